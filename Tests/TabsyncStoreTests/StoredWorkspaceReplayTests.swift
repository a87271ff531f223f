import Testing
import TabsyncCore
@testable import TabsyncStore

/// How every durable store turns its rows back into a workspace (``StoredWorkspace/replayed``), once,
/// without a database: the store tests then only show each store's SQL reads the right rows.
struct StoredWorkspaceReplayTests {
    /// Two adds and an activate of "b": the ops of versions 1...3 of workspace "w", as the server made them.
    static let log: [AppliedOp] = {
        var sequencer = Sequencer(workspace: Workspace(id: "w", epoch: "e"), limits: Limits())
        let ops: [Operation] = [
            .add(tab: Tab(id: "a"), place: .end, activate: true), .add(tab: Tab(id: "b"), place: .end, activate: false),
            .activate(.tabId("b")),
        ]
        return ops.enumerated().flatMap { i, op -> [AppliedOp] in
            guard case .applied(let applied) = sequencer.submit(clientId: "c", seq: UInt64(i + 1), baseVersion: UInt64(i), op: op)
            else { return [] }
            return applied
        }
    }()

    static func state(at version: UInt64) throws -> Workspace {
        try StoredWorkspace.replayed(
            snapshot: nil, log: Array(log.prefix(Int(version))), workspaceId: "w", epoch: "e", source: "")
    }

    @Test func aLogWithoutASnapshotReplaysFromAnEmptyWorkspace() throws {
        let state = try Self.state(at: 3)
        #expect(state.version == 3)
        #expect(state.tabs.map(\.id) == ["a", "b"])
        #expect(state.activeTabId == "b")
        #expect(state.epoch == "e")
    }

    @Test func onlyTheOpsAfterTheSnapshotAreReplayed() throws {
        let snapshot = try Self.state(at: 2)
        let state = try StoredWorkspace.replayed(snapshot: snapshot, log: Self.log, workspaceId: "w", epoch: "e", source: "")
        #expect(state == (try Self.state(at: 3)))
        // A snapshot at the log's end: nothing to replay.
        let same = try StoredWorkspace.replayed(snapshot: state, log: Self.log, workspaceId: "w", epoch: "e", source: "")
        #expect(same == state)
    }

    @Test func aLogThatDoesNotReplayIsAReadFailureNamingTheVersion() throws {
        #expect(Self.log.map(\.version) == [1, 2, 3])
        // Version 2 is missing: version 3 does not follow 1.
        do {
            _ = try StoredWorkspace.replayed(
                snapshot: nil, log: [Self.log[0], Self.log[2]], workspaceId: "w", epoch: "e", source: "db: ")
            Issue.record("a log with a gap replayed")
        } catch {
            guard case .readFailed(let why) = error else { throw error }
            #expect(why.hasPrefix("db: op log of w does not replay at version 3: "))
        }
    }

    @Test func aLogEndingBeforeTheSnapshotIsAReadFailure() throws {
        let snapshot = try Self.state(at: 3)
        #expect(throws: StoreError.readFailed("op log of w ends at 2, snapshot is at 3")) {
            try StoredWorkspace.replayed(snapshot: snapshot, log: Array(Self.log.prefix(2)), workspaceId: "w", epoch: "e", source: "")
        }
    }

    @Test func nothingStoredIsToldFromAnEmptyWorkspaceThatWas() throws {
        #expect(StoredWorkspace.neverStored(snapshot: nil, lastSeqs: [:], log: []))
        // A refused first op consumed a seq: the workspace was stored, at version 0.
        #expect(!StoredWorkspace.neverStored(snapshot: nil, lastSeqs: ["c": 1], log: []))
        #expect(!StoredWorkspace.neverStored(snapshot: nil, lastSeqs: [:], log: Array(Self.log.prefix(1))))
    }

    @Test func rekeysAreKeptFromTheFirstLoggedVersion() {
        #expect(StoredWorkspace.rekeyWindowStart(of: Array(Self.log.suffix(2))) == 2)
        #expect(StoredWorkspace.rekeyWindowStart(of: []) == UInt64(Int64.max))
    }
}
