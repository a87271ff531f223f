import Testing
import TabsyncCore
import TabsyncProto
import TabsyncStore
@testable import TabsyncServerCore

/// The change feed's rules in the core (docs/design.md, "The change feed"; ServerCore+Feed.swift),
/// with no socket: a stream opens once its workspace is loaded with a snapshot, carries an op only
/// once it is stored, resumes from the log or else a snapshot, gets a comment when silent, and
/// ends (writing nothing more) when its reader falls behind or goes.
@Suite struct FeedRuleTests {
    static let feed: RequestID = 900

    /// Each feed action, in words: `open`, `op N`, `snapshot N`, `comment`, `close`.
    static func written(_ actions: [ServerCore.Action], to id: RequestID = feed) -> [String] {
        actions.flatMap { action -> [String] in
            switch action {
            case .feedOpen(let r) where r == id: return ["open"]
            case .feedClose(let r) where r == id: return ["close"]
            case .feedWrite(let r, let bytes) where r == id:
                let text = String(decoding: bytes, as: UTF8.self)
                if text.hasPrefix(":") { return ["comment"] }
                return text.components(separatedBy: "\n\n").filter { !$0.isEmpty }.map { event in
                    let lines = event.split(separator: "\n")
                    let id = lines.first { $0.hasPrefix("id: ") }.map { $0.dropFirst(4) } ?? "?"
                    let name = lines.first { $0.hasPrefix("event: ") }.map { $0.dropFirst(7) } ?? "?"
                    return "\(name) \(id)"
                }
            default: return []
            }
        }
    }

    /// A core holding workspace `w` at version `ops` (all stored), with session 1 joined.
    static func withStoredOps(_ ops: Int) -> CoreHarness {
        var h = CoreHarness()
        h.hello(1, client: "c1")
        h.handle(.loaded(workspaceId: "w", .success(nil)))
        for seq in 1...UInt64(max(ops, 1)) where ops > 0 {
            let id = h.submit(1, seq: seq, CoreHarness.add("t\(seq)")).commitId!
            h.handle(.committed(batch: id, .stored, duration: .zero))
        }
        return h
    }

    @Test func aFeedOpensWithASnapshotOnceItsWorkspaceIsLoaded() {
        var h = CoreHarness()
        let asked = h.handle(.feedRequested(Self.feed, workspaceId: "w", after: nil, bearerToken: nil))
        #expect(Said.of(asked).contains(.load("w")) || Said.of(asked).contains(.hold("w")))
        #expect(Self.written(asked).isEmpty)
        let loaded = h.handle(.loaded(workspaceId: "w", .success(nil)))
        #expect(Self.written(loaded) == ["open", "snapshot 0"])
    }

    @Test func anOpIsWrittenOnlyOnceItIsStored() {
        var h = Self.withStoredOps(2)
        #expect(Self.written(h.handle(.feedRequested(Self.feed, workspaceId: "w", after: nil, bearerToken: nil)))
            == ["open", "snapshot 2"])
        let submitted = h.submit(1, seq: 3, CoreHarness.add("t3"))
        #expect(Self.written(submitted).isEmpty, "not stored yet: nothing on the feed")
        let stored = h.handle(.committed(batch: submitted.commitId!, .stored, duration: .zero))
        #expect(Self.written(stored) == ["op 3"])
    }

    @Test func aResumeTakesTheLogElseASnapshot() {
        var h = Self.withStoredOps(4)
        #expect(Self.written(h.handle(.feedRequested(Self.feed, workspaceId: "w", after: 1, bearerToken: nil)))
            == ["open", "op 2", "op 3", "op 4"])
        #expect(Self.written(h.handle(.feedRequested(901, workspaceId: "w", after: 4, bearerToken: nil)), to: 901) == ["open"])
        #expect(Self.written(h.handle(.feedRequested(902, workspaceId: "w", after: 9, bearerToken: nil)), to: 902)
            == ["open", "snapshot 4"])
        // After a new op, every stream continues from where it is: none repeats, none skips.
        let id = h.submit(1, seq: 5, CoreHarness.add("t5")).commitId!
        let stored = h.handle(.committed(batch: id, .stored, duration: .zero))
        for r in [Self.feed, 901, 902] { #expect(Self.written(stored, to: r) == ["op 5"]) }
    }

    @Test func aLogThatNoLongerHoldsTheVersionGivesASnapshot() {
        var h = CoreHarness { $0.limits.logRetention = 2 }
        h.hello(1, client: "c1")
        h.handle(.loaded(workspaceId: "w", .success(nil)))
        for seq in 1...UInt64(8) {
            let id = h.submit(1, seq: seq, CoreHarness.add("t\(seq)")).commitId!
            h.handle(.committed(batch: id, .stored, duration: .zero))
        }
        #expect(Self.written(h.handle(.feedRequested(Self.feed, workspaceId: "w", after: 1, bearerToken: nil)))
            == ["open", "snapshot 8"])
    }

    @Test func aSilentFeedGetsACommentAtItsKeepAlive() {
        var h = Self.withStoredOps(1)
        h.handle(.feedRequested(Self.feed, workspaceId: "w", after: 1, bearerToken: nil))
        h.advance(.seconds(14))
        #expect(Self.written(h.handle(.timeout)).isEmpty)
        h.advance(.seconds(1))
        #expect(Self.written(h.handle(.timeout)) == ["comment"])
        h.advance(.seconds(15))
        #expect(Self.written(h.handle(.timeout)) == ["comment"])
    }

    @Test func aReaderBehindIsCutAndOneGoneGetsNothingMore() {
        var h = Self.withStoredOps(1)
        h.handle(.feedRequested(Self.feed, workspaceId: "w", after: 1, bearerToken: nil))
        h.handle(.feedRequested(901, workspaceId: "w", after: 1, bearerToken: nil))
        #expect(Self.written(h.handle(.feedBacklogExceeded(Self.feed))) == ["close"])
        #expect(h.core.metrics.feedsCut == 1)
        h.handle(.requestGone(901))
        let id = h.submit(1, seq: 2, CoreHarness.add("t2")).commitId!
        let stored = h.handle(.committed(batch: id, .stored, duration: .zero))
        #expect(Self.written(stored).isEmpty && Self.written(stored, to: 901).isEmpty)
        h.advance(.seconds(20))
        #expect(Self.written(h.handle(.timeout)).isEmpty && Self.written(h.handle(.timeout), to: 901).isEmpty)
    }

    @Test func aFeedKeepsItsWorkspaceLoaded() {
        var h = CoreHarness { $0.idleUnload = .seconds(1) }
        h.handle(.feedRequested(Self.feed, workspaceId: "w", after: nil, bearerToken: nil))
        h.handle(.loaded(workspaceId: "w", .success(nil)))
        h.advance(.seconds(5))
        h.handle(.timeout)
        #expect(h.core.workspacesInMemory == 1, "a feed holds its workspace")
        h.handle(.requestGone(Self.feed))
        h.advance(.seconds(5))
        h.handle(.timeout)
        #expect(h.core.workspacesInMemory == 0, "dropped once its last feed went")
    }

    /// A token's `exp` ends its stream, as it closes a session; the keep-alive goes on until then.
    @Test func aStreamEndsWhenItsTokenExpires() {
        var h = CoreHarness { $0.accessControl = true }
        let asked = h.handle(.feedRequested(Self.feed, workspaceId: "w", after: nil, bearerToken: "t"))
        #expect(asked.contains { if case .verifyToken(.http(Self.feed), "t") = $0 { true } else { false } })
        let grant = AccessGrant(subject: "vic", workspaces: WorkspacePattern("*")!, role: .viewer,
                                expiresAt: h.core.wallNow.addingTimeInterval(20))
        h.handle(.tokenVerified(.http(Self.feed), .success(grant)))
        #expect(Self.written(h.handle(.loaded(workspaceId: "w", .success(nil)))) == ["open", "snapshot 0"])
        h.advance(.seconds(15))
        #expect(Self.written(h.handle(.timeout)) == ["comment"])
        h.advance(.seconds(5) + .milliseconds(200))
        #expect(Self.written(h.handle(.timeout)) == ["close"])
    }

    // MARK: a node behind the store (several nodes)

    /// Another node's ops 1...n of "w", as a catch-up read from `from` returns them.
    static func othersRead(from: UInt64, to n: UInt64) -> CatchUpRead {
        let tabs = (1...max(n, 1)).map { "o\($0)" }
        let ops = (1...max(n, 1)).filter { $0 > from && $0 <= n }.map { v in
            CatchUpRuleTests.othersOp(tabs[Int(v) - 1], version: v, after: Array(tabs.prefix(Int(v) - 1)))
        }
        return .caughtUp(.init(from: from, ops: ops, dedup: DedupState(version: n, lastSeqs: ["c9": n], rejections: [], rekeys: [])))
    }

    static func reads(_ actions: [ServerCore.Action]) -> [[String: UInt64]] {
        actions.compactMap { if case .readChanges(let versions) = $0 { versions } else { nil } }
    }

    @Test func theDecision() {
        typealias O = ServerCore.Opening
        let open = ServerCore.opening
        #expect(open(nil, 5, false, true, false) == O.snapshot)
        #expect(open(3, 5, true, true, false) == O.ops)
        #expect(open(3, 5, false, false, false) == O.snapshot, "the log no longer holds it")
        #expect(open(5, 5, true, true, false) == O.ops, "at the durable version: nothing to write")
        #expect(open(7, 5, false, true, false) == O.catchUpFirst, "past this node of a shared store: read it first")
        #expect(open(7, 5, false, true, true) == O.snapshot, "past the store itself: another history")
        #expect(open(7, 5, false, false, false) == O.snapshot, "a store of its own: this node is the store's version")
    }

    /// A reader that saw version 2 on another node resumes on this node, which holds "w" at 0:
    /// nothing goes backwards; the node reads the store and the stream goes on at 3.
    @Test func aResumePastANodeBehindTheStoreWaitsForItToCatchUp() {
        var h = CatchUpRuleTests.joined()
        let asked = h.handle(.feedRequested(Self.feed, workspaceId: "w", after: 2, bearerToken: nil))
        #expect(Self.written(asked) == ["open"], "no snapshot at 0 for a reader at 2")
        #expect(Self.reads(asked) == [["w": 0]])
        let caught = h.handle(.caughtUp(["w": Self.othersRead(from: 0, to: 3)], duration: .zero))
        #expect(Self.written(caught) == ["op 3"])
        let next = h.submit(1, seq: 1, CoreHarness.add("mine")).commitId!
        #expect(Self.written(h.handle(.committed(batch: next, .stored, duration: .zero))) == ["op 4"])
    }

    /// A read already in flight when the reader asked may not hold its version: it does not
    /// decide; the next read does.
    @Test func aReadStartedBeforeTheReaderAskedDoesNotDecide() {
        var h = CatchUpRuleTests.joined()
        #expect(Self.reads(h.handle(.heard(.committed(CommitNotification(workspaceId: "w", version: 1))))) == [["w": 0]])
        let asked = h.handle(.feedRequested(Self.feed, workspaceId: "w", after: 2, bearerToken: nil))
        #expect(Self.written(asked) == ["open"] && Self.reads(asked).isEmpty, "one read at a time")
        let stale = h.handle(.caughtUp(["w": Self.othersRead(from: 0, to: 1)], duration: .zero))
        #expect(Self.written(stale).isEmpty, "the node is at 1, the reader at 2: nothing yet")
        #expect(Self.reads(stale) == [["w": 1]])
        let caught = h.handle(.caughtUp(["w": Self.othersRead(from: 1, to: 3)], duration: .zero))
        #expect(Self.written(caught) == ["op 3"])
    }

    /// The store itself is below the reader (restored from a backup): a snapshot, once the store
    /// was read; and a read that fails ends the stream (the reader resumes).
    @Test func aReaderPastTheStoreGetsASnapshotAndAFailedReadEndsTheStream() {
        var h = CatchUpRuleTests.joined()
        h.handle(.feedRequested(Self.feed, workspaceId: "w", after: 5, bearerToken: nil))
        let caught = h.handle(.caughtUp(["w": Self.othersRead(from: 0, to: 2)], duration: .zero))
        #expect(Self.written(caught) == ["snapshot 2"])
        h.handle(.feedRequested(901, workspaceId: "w", after: 9, bearerToken: nil))
        let failed = h.handle(.caughtUp(["w": .failed(.readFailed("down"))], duration: .zero))
        #expect(Self.written(failed, to: 901) == ["close"])
        #expect(Self.written(failed).isEmpty)
    }
}
