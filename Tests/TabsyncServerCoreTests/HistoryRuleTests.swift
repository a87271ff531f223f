import Foundation
import TabsyncCore
import TabsyncProto
import TabsyncStore
import Testing
@testable import TabsyncServerCore

/// History's rules on the core alone, on the virtual clock (ServerCore+History.swift;
/// docs/design.md, "History"): a `restore` or `reopen` waits for its store read and the session's
/// later Submits wait behind it, in seq order; a read the store could not make is `UNAVAILABLE`
/// and consumes nothing; a restore puts back `editable` only for a role that may set it; a tab
/// closed before the window is refused for good. The store reads are a real ``MemoryStore``'s,
/// answered through ``StoreTurn`` as the driver answers them. Over sockets: Tests/thirdparty/test_history.py.
@Suite struct HistoryRuleTests {
    /// A ``StoredCore`` whose history reads the test answers, from the store or with a failure.
    struct HistoryCore {
        var s: StoredCore

        init(accessControl: Bool = false) {
            s = StoredCore { $0.accessControl = accessControl }
        }

        /// The history reads among `actions`.
        static func reads(_ actions: [ServerCore.Action]) -> [ServerCore.Action] {
            actions.filter { if case .readHistory = $0 { true } else { false } }
        }

        /// Answers every history read among `actions` from the store (or with `failure`), then the
        /// commits the answers start; every action that followed.
        mutating func answerReads(_ actions: [ServerCore.Action], failure: StoreError? = nil) throws -> [ServerCore.Action] {
            var out: [ServerCore.Action] = []
            for action in Self.reads(actions) {
                guard case .readHistory(let call) = action else { continue }
                let event: ServerCore.Event
                if let failure {
                    event = .historyRead(call, .failure(.store(failure)))
                } else {
                    event = try #require(StoreTurn(stores: StoreCapabilities(s.store), holders: nil).answer(action))
                }
                let next = s.h.handle(event)
                out += next + (try s.commit(next))
            }
            return out
        }

        /// Submits `op` as `seq` from session `id` and stores what it starts; every action.
        @discardableResult
        mutating func submit(_ id: ConnectionID, seq: UInt64, _ op: TabsyncCore.Operation) throws -> [ServerCore.Action] {
            let actions = s.h.submit(id, seq: seq, op)
            return actions + (try s.commit(actions))
        }

        /// Session `id` of client "c`id`" joins "w" with a token the core takes as `role`.
        mutating func join(_ id: ConnectionID, role: AccessRole) throws {
            s.h.handle(.connected(id, format: .proto, echo: false))
            s.h.send(id, .init(hello: .init(workspace: "w", clientId: "c\(id)", token: "token-\(id)")))
            let grant = AccessGrant(
                subject: "sub\(id)", workspaces: WorkspacePattern("w")!, role: role,
                expiresAt: s.h.core.wallNow.addingTimeInterval(3_600))
            var actions = s.h.handle(.tokenVerified(.session(id), .success(grant)))
            if actions.contains(where: { if case .load = $0 { true } else { false } }) { actions += try s.load() }
            actions += try s.commit(actions)
            #expect(StoredCore.welcome(actions, to: id) != nil)
        }

        var stored: Workspace { get throws { try #require(try s.store.load(workspaceId: "w")).workspace } }
    }

    static func appliedSeqs(_ actions: [ServerCore.Action], to id: ConnectionID) -> [UInt64] {
        Said.of(actions).compactMap { if case .applied(let to, _, let seq) = $0, to.contains(id) { seq } else { nil } }
    }

    @Test func laterSubmitsWaitBehindAReopenAndAreSequencedAfterItInSeqOrder() throws {
        var c = HistoryCore()
        _ = try c.s.join(1, client: "c1")
        try c.s.add(1, ["t1", "t2", "t3"])
        try c.submit(1, seq: 4, .remove(tabId: "t2"))

        let asked = try c.submit(1, seq: 5, .reopen(tabId: "t2"))
        #expect(HistoryCore.reads(asked).count == 1)
        #expect(asked.commitId == nil, "a reopen is not sequenced before its read comes back")
        let behind = try c.submit(1, seq: 6, CoreHarness.add("t9"))
        #expect(behind.commitId == nil && Self.appliedSeqs(behind, to: 1).isEmpty, "seq 6 went ahead of the reopen")

        let resolved = try c.answerReads(asked)
        #expect(Self.appliedSeqs(resolved, to: 1) == [5, 6])
        #expect(try c.stored.tabs.map(\.id) == ["t1", "t2", "t3", "t9"], "the reopened tab is back between its old neighbours")
    }

    @Test func aReadTheStoreCouldNotMakeIsUnavailableAndConsumesNothing() throws {
        var c = HistoryCore()
        _ = try c.s.join(1, client: "c1")
        try c.s.add(1, ["t1", "t2"])
        try c.submit(1, seq: 3, .remove(tabId: "t1"))

        let asked = try c.submit(1, seq: 4, .reopen(tabId: "t1"))
        let failed = try c.answerReads(asked, failure: .readFailed("disk gone"))
        #expect(Said.of(failed).contains(.rejected(to: 1, seq: 4, code: .unavailable)))
        #expect(try c.stored.version == 3 && c.stored.tabs.map(\.id) == ["t2"])

        // Seq 4 was not consumed: sent again, it is read again and applied (not answered as a repeat).
        let again = try c.submit(1, seq: 4, .reopen(tabId: "t1"))
        #expect(HistoryCore.reads(again).count == 1, "the resent seq was taken as consumed")
        #expect(Self.appliedSeqs(try c.answerReads(again), to: 1) == [4])
        #expect(try c.stored.tabs.map(\.id) == ["t1", "t2"])
    }

    /// Only a role that may set `editable` restores it (docs/security.md): an editor's restore puts
    /// back tabs, order and active tab, and leaves `editable` as it is now.
    @Test(arguments: [(AccessRole.admin, false), (AccessRole.editor, true)])
    func aRestorePutsBackEditableOnlyForARoleThatMaySetIt(_ role: AccessRole, editableAfter: Bool) throws {
        var c = HistoryCore(accessControl: true)
        try c.join(1, role: .admin)
        try c.join(2, role: role)
        try c.submit(1, seq: 1, CoreHarness.add("t1"))  // v1
        try c.submit(1, seq: 2, .setEditable(false))  // v2: t1, not editable
        try c.submit(1, seq: 3, .setEditable(true))  // v3
        try c.submit(1, seq: 4, CoreHarness.add("t2"))  // v4

        let asked = try c.submit(2, seq: 1, .restore(version: 2, state: nil))
        #expect(Self.appliedSeqs(try c.answerReads(asked), to: 2) == [1])
        let after = try c.stored
        #expect(after.version == 5 && after.tabs.map(\.id) == ["t1"])
        #expect(after.editable == editableAfter)
    }

    @Test func aReopenOfATabClosedBeforeTheWindowIsRefusedForGood() throws {
        var c = HistoryCore()
        _ = try c.s.join(1, client: "c1")
        try c.s.add(1, ["t1", "t2"])
        try c.submit(1, seq: 3, .remove(tabId: "t1"))  // v3
        var seq: UInt64 = 3
        for _ in 0..<20 {  // 2,000 ops after the close, 100 to a batch
            var actions: [ServerCore.Action] = []
            for _ in 0..<100 {
                seq += 1
                actions += c.s.h.submit(1, seq: seq, .update(TabUpdate(tabId: "t2", title: "title \(seq)")))
            }
            try c.s.commit(actions)
        }
        #expect(try c.stored.version == 2_003)

        seq += 1
        let asked = try c.submit(1, seq: seq, .reopen(tabId: "t1"))
        let refused = try c.answerReads(asked)
        #expect(Said.of(refused).contains(.rejected(to: 1, seq: seq, code: .invalidArgument)))
        // Consumed: the same seq again is answered with the same refusal, and reads nothing.
        let again = c.s.h.submit(1, seq: seq, .reopen(tabId: "t1"))
        #expect(HistoryCore.reads(again).isEmpty)
        #expect(Said.of(again).contains(.rejected(to: 1, seq: seq, code: .invalidArgument)))
        #expect(try c.stored.tabs.map(\.id) == ["t2"])
    }
}
