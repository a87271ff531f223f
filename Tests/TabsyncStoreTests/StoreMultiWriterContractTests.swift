import Testing
import TabsyncCore
@testable import TabsyncStore

/// The store contract for several writers on one stored dataset (server nodes on one PostgreSQL
/// database; here also two connections to one SQLite file, or one memory store shared): a batch
/// states the version it builds on, a stale one is refused whole with `behind`, and the writer
/// catches up from ``WorkspaceStore/ops(workspaceId:after:limit:)`` and
/// ``WorkspaceStore/dedupState(workspaceId:)``.
@Suite("Store contract: several writers")
struct StoreMultiWriterContractTests {
    /// The batch with its base versions: each touched workspace's version before the batch.
    static func based(_ batch: CommitBatch, on versions: [String: UInt64]) -> CommitBatch {
        var batch = batch
        batch.baseVersions = versions
        return batch
    }

    @Test(arguments: StoreKind.allCases)
    func aStaleBatchIsRefusedWholeAndTheWriterCatchesUp(kind: StoreKind) throws {
        let harness = try StoreHarness(kind)
        let nodeA = harness.store
        let nodeB = try harness.secondWriter()
        #expect(nodeB.epoch == nodeA.epoch)

        // Both nodes loaded "w" empty; A commits first.
        var a = Driver(epoch: nodeA.epoch)
        var b = try Driver(store: nodeB, workspaces: ["w", "other"])
        a.submit("w", "alice", 1, .add(tab: Tab(id: "x", title: "X"), place: .end, activate: true))
        a.submit("w", "alice", 2, .remove(tabId: "ghost"))  // refused: consumes seq 2
        a.submit("w", "alice", 3, .add(tab: Tab(id: "y", title: "Y"), place: .end, activate: false))
        try nodeA.commit(Self.based(a.takeBatch(), on: ["w": 0]))
        let committedByA = try #require(try nodeA.load(workspaceId: "w"))

        // B's batch builds on version 0 of "w" (and touches "other"): refused whole.
        b.submit("other", "bob", 1, .add(tab: Tab(id: "o"), place: .end, activate: true))
        b.submit("w", "bob", 1, .add(tab: Tab(id: "z", title: "Z"), place: .end, activate: true))
        let stale = Self.based(b.takeBatch(), on: ["w": 0, "other": 0])
        #expect(throws: StoreError.behind(storedVersions: ["w": 2])) { try nodeB.commit(stale) }
        #expect(try nodeB.load(workspaceId: "w") == committedByA)
        #expect(try nodeB.load(workspaceId: "other") == nil)

        // B reads what it missed, with clientId and seq, and the dedup state.
        let missed = try #require(try nodeB.ops(workspaceId: "w", after: 0, limit: 100))
        #expect(missed == committedByA.log)
        #expect(missed.map { "\($0.clientId)/\($0.seq)@\($0.version)" } == ["alice/1@1", "alice/3@2"])
        #expect(try nodeB.ops(workspaceId: "w", after: 1, limit: 100)?.map(\.version) == [2])
        #expect(try nodeB.ops(workspaceId: "w", after: 0, limit: 1)?.map(\.version) == [1])
        #expect(try nodeB.ops(workspaceId: "w", after: 2, limit: 100) == [])
        let dedup = try #require(try nodeB.dedupState(workspaceId: "w"))
        #expect(dedup.version == 2)
        #expect(dedup.lastSeqs == ["alice": 3])
        #expect(dedup.rejections == [Sequencer.Rejection(clientId: "alice", seq: 2, error: .tabGone("ghost"))])
        #expect(try nodeB.dedupState(workspaceId: "other") == nil)

        // B re-sequences its ops against the new state and commits on version 2.
        var caughtUp = try Driver(store: nodeB, workspaces: ["w", "other"])
        caughtUp.submit("other", "bob", 1, .add(tab: Tab(id: "o"), place: .end, activate: true))
        caughtUp.submit("w", "bob", 1, .add(tab: Tab(id: "z", title: "Z"), place: .end, activate: true))
        try nodeB.commit(Self.based(caughtUp.takeBatch(), on: ["w": 2, "other": 0]))
        #expect(try nodeA.load(workspaceId: "w")?.workspace.tabs.map(\.id) == ["x", "y", "z"])
        #expect(try nodeA.load(workspaceId: "other")?.workspace.version == 1)

        // Now A is the one behind.
        a.submit("w", "alice", 4, .remove(tabId: "x"))
        #expect(throws: StoreError.behind(storedVersions: ["w": 3])) {
            try nodeA.commit(Self.based(a.takeBatch(), on: ["w": 2]))
        }
        #expect(try nodeA.load(workspaceId: "w")?.workspace.version == 3)
    }

    /// The seq fence: a refusal leaves the version where it was, so only the consumed seq tells a
    /// second writer that the seq is taken. A batch consuming a seq another writer already consumed
    /// is `behind` though its base version is current; a later seq of the same client, or another
    /// client's, is not (docs/design.md, 'Several nodes').
    @Test(arguments: StoreKind.allCases)
    func aSeqAnotherWriterRefusedFencesTheBatchThatConsumesItAgain(kind: StoreKind) throws {
        let harness = try StoreHarness(kind)
        let nodeA = harness.store
        let nodeB = try harness.secondWriter()
        var a = Driver(epoch: nodeA.epoch)
        a.submit("w", "alice", 1, .add(tab: Tab(id: "x"), place: .end, activate: true))
        try nodeA.commit(Self.based(a.takeBatch(), on: ["w": 0]))

        // Both writers at version 1. A refuses alice's seq 2: the version stays 1.
        var b = try Driver(store: nodeB, workspaces: ["w"])
        a.submit("w", "alice", 2, .remove(tabId: "ghost"))
        try nodeA.commit(Self.based(a.takeBatch(), on: ["w": 1]))
        #expect(try nodeA.dedupState(workspaceId: "w")?.version == 1)

        // B, which has not heard of it, decides seq 2 again (alice moved to B and resubmitted it).
        b.submit("w", "alice", 2, .add(tab: Tab(id: "y"), place: .end, activate: false))
        #expect(throws: StoreError.behind(storedVersions: ["w": 1])) {
            try nodeB.commit(Self.based(b.takeBatch(), on: ["w": 1]))
        }
        #expect(try nodeB.load(workspaceId: "w")?.workspace.tabs.map(\.id) == ["x"])

        // Seqs above the stored one, of alice or of anyone else, go through on the same base.
        var c = try Driver(store: nodeB, workspaces: ["w"])
        c.submit("w", "alice", 3, .add(tab: Tab(id: "y"), place: .end, activate: false))
        c.submit("w", "bob", 1, .add(tab: Tab(id: "z"), place: .end, activate: false))
        try nodeB.commit(Self.based(c.takeBatch(), on: ["w": 1]))
        #expect(try nodeA.load(workspaceId: "w")?.workspace.tabs.map(\.id) == ["x", "y", "z"])
        #expect(try nodeA.dedupState(workspaceId: "w")?.lastSeqs == ["alice": 3, "bob": 1])
    }

    /// ``WorkspaceStore/changes(after:)``: what a writer at some version missed of several
    /// workspaces at once; adopting it gives the writer's sequencer the stored state (every
    /// consumed seq, every answer), refusals and all, also when refusals were trimmed meanwhile.
    @Test(arguments: StoreKind.allCases)
    func changesAfterAVersionBringAWriterToTheStoredState(kind: StoreKind) throws {
        let harness = try StoreHarness(kind)
        let nodeA = harness.store
        let nodeB = try harness.secondWriter()
        var a = Driver(epoch: nodeA.epoch, limits: Limits(logRetention: 4))
        a.submit("w", "alice", 1, .add(tab: Tab(id: "x"), place: .end, activate: true))
        a.submit("v", "alice", 1, .add(tab: Tab(id: "x"), place: .end, activate: true))
        try nodeA.commit(Self.based(a.takeBatch(), on: ["w": 0, "v": 0]))
        // B holds both at version 1 (and "new" at 0, never stored).
        let b = try Driver(store: nodeB, workspaces: ["w", "v"], limits: Limits(logRetention: 4))
        // A goes on: ops and refusals on "w" (more refusals than the 4 kept), nothing on "v".
        a.submit("w", "alice", 2, .remove(tabId: "ghost"))
        a.submit("w", "bob", 1, .add(tab: Tab(id: "y"), place: .end, activate: false))
        try nodeA.commit(Self.based(a.takeBatch(), on: ["w": 1]))
        a.submit("w", "dave", 1, .remove(tabId: "gone"))  // a refusal trimmed before B reads: only the last seqs tell
        for seq in 3...9 { a.submit("w", "alice", UInt64(seq), .remove(tabId: "ghost\(seq)")) }
        a.submit("w", "carol", 1, .move(tabId: "nope", place: .end))
        a.submit("w", "bob", 2, .activate(.tabId("y")))
        try nodeA.commit(Self.based(a.takeBatch(), on: ["w": 2]))

        let changes = try nodeB.changes(after: ["w": 1, "v": 1, "new": 0])
        #expect(changes["new"] == .changes(ops: [], dedup: nil))
        guard case .changes(let vOps, let vDedup)? = changes["v"] else {
            Issue.record("v: \(String(describing: changes["v"]))")
            return
        }
        #expect(vOps.isEmpty && vDedup?.version == 1)
        guard case .changes(let ops, let dedup)? = changes["w"], let dedup else {
            Issue.record("w: \(String(describing: changes["w"]))")
            return
        }
        #expect(ops.map(\.version) == [2, 3])
        #expect(dedup.version == 3)
        // Adopted by B's sequencer at version 1: the state A's sequencer has.
        var caughtUp = b.sequencer("w")
        for op in ops { try caughtUp.adopt(op) }
        for rejection in dedup.rejections { caughtUp.adopt(rejection) }
        for (client, seq) in dedup.lastSeqs { caughtUp.adopt(lastSeq: seq, of: client) }
        var truth = a.sequencer("w")
        #expect(caughtUp.workspace == truth.workspace)
        for client in ["alice", "bob", "carol", "dave"] { #expect(caughtUp.lastSeq(of: client) == truth.lastSeq(of: client), "\(client)") }
        // The refusals still kept are answered again (the 4 most recent at least).
        for seq in 6...9 {
            let again = caughtUp.submit(clientId: "alice", seq: UInt64(seq), baseVersion: 0, op: .remove(tabId: "ghost\(seq)"))
            #expect(again == truth.submit(clientId: "alice", seq: UInt64(seq), baseVersion: 0, op: .remove(tabId: "ghost\(seq)")), "alice/\(seq)")
        }
        // Behind what the store holds: read whole.
        #expect(try nodeB.changes(after: ["w": 9])["w"] == .compacted)
    }

    @Test(arguments: StoreKind.allCases)
    func aBatchWithoutBaseVersionsIsNotChecked(kind: StoreKind) throws {
        let harness = try StoreHarness(kind)
        var driver = Driver(epoch: harness.store.epoch)
        driver.submit("w", "c", 1, .add(tab: Tab(id: "x"), place: .end, activate: true))
        try harness.store.commit(driver.takeBatch())
        driver.submit("w", "c", 2, .add(tab: Tab(id: "y"), place: .end, activate: true))
        try harness.store.commit(driver.takeBatch())
        #expect(try harness.store.load(workspaceId: "w")?.workspace.version == 2)
    }

    @Test(arguments: StoreKind.allCases)
    func opsAfterAVersionCompactedAwayAreNil(kind: StoreKind) throws {
        let harness = try StoreHarness(kind, options: .init(snapshotInterval: 4))
        var driver = Driver(epoch: harness.store.epoch, limits: Limits(logRetention: 8))
        for seq in UInt64(1)...40 {
            driver.submit("w", "c", seq, .add(tab: Tab(id: "t\(seq)"), place: .end, activate: false))
            try harness.store.commit(driver.takeBatch())
        }
        let version = driver.sequencer("w").workspace.version
        #expect(try harness.store.ops(workspaceId: "w", after: 1, limit: 100) == nil)
        let tail = try #require(try harness.store.ops(workspaceId: "w", after: version - 3, limit: 100))
        #expect(tail == Array(driver.sequencer("w").log.suffix(3)))
        #expect(try harness.store.ops(workspaceId: "never", after: 0, limit: 10) == [])
    }
}
