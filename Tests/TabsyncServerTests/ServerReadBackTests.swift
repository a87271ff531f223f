import Foundation
import TabsyncCore
import TabsyncProto
import TabsyncServer
import TabsyncStore
import TabsyncTestServer
import TabsyncTestSupport
import Testing

/// What a server tells its sessions when a commit fails and the workspace is read back from the
/// store, which may hold more than they saw: another node's ops stored meanwhile, or this node's
/// batch whose `COMMIT` lost its answer but took effect. Both broke the cluster test with
/// PostgreSQL restarted under load (version gaps; an op refused UNAVAILABLE that was in the log).
@Suite("Read back after a failed commit")
struct ServerReadBackTests {
    /// The answer to a commit is lost (outcomeUnknown) and the batch was stored: the submitter is
    /// told neither "applied" nor "refused" but closed 1013; it resumes and finds its op applied;
    /// the other session gets the op from the read back, versions contiguous.
    @Test func aBatchWhoseAnswerWasLostButStoredReachesEveryoneAndTheSubmitterResumesToIt() throws {
        let store = FaultyStore(MemoryStore())
        let server = try TestServer(store: store)
        defer { server.stop() }
        let writer = try seed(server, workspace: "lost")  // t1..t3, v3, seqs 1-3 of "seeder"
        let (watcher, welcome) = try TestClient.joined(port: server.port, workspace: "lost", clientId: "watcher")
        #expect(welcome.snapshot.version == 3)

        store.loseNextAnswer(stored: true)
        try writer.submit(.add(tab: .named("t4"), place: .end, activate: false))  // seq 4
        #expect(try writer.closeCode(timeout: 10) == 1013)
        let seen = try watcher.nextApplied(timeout: 10)
        #expect(seen.version == 4 && seen.clientId == "seeder" && seen.seq == 4)

        let (resumed, again) = try TestClient.joined(
            port: server.port, workspace: "lost", clientId: "seeder", lastVersion: 3, epoch: welcome.epoch)
        #expect(again.recovered)
        #expect(again.lastSeq == 4)
        #expect(again.missed.map(\.version) == [4])
        #expect(try server.metric("tabsync_commits_outcome_unknown_total") == 1)
        #expect(try server.metric("tabsync_ops_read_back_total") == 1)
        // The workspace goes on at the next version, for everyone.
        try resumed.submit(.activate(.tabId("t4")), seq: 5)
        #expect(try resumed.nextApplied().version == 5)
        #expect(try watcher.nextApplied().version == 5)
    }

    /// The same lost answer when the batch was not stored: nothing reaches anyone, the submitter
    /// resumes, learns its seq was not consumed (`lastSeq`) and sends it again.
    @Test func aBatchWhoseAnswerWasLostAndNotStoredIsSentAgainAfterTheResume() throws {
        let store = FaultyStore(MemoryStore())
        let server = try TestServer(store: store)
        defer { server.stop() }
        let writer = try seed(server, workspace: "gone")
        let (watcher, welcome) = try TestClient.joined(port: server.port, workspace: "gone", clientId: "watcher")

        store.loseNextAnswer(stored: false)
        let op = TabsyncCore.Operation.add(tab: .named("t4"), place: .end, activate: false)
        try writer.submit(op)  // seq 4
        #expect(try writer.closeCode(timeout: 10) == 1013)
        let (resumed, again) = try TestClient.joined(
            port: server.port, workspace: "gone", clientId: "seeder", lastVersion: 3, epoch: welcome.epoch)
        #expect(again.recovered && again.missed.isEmpty)
        #expect(again.lastSeq == 3)
        try resumed.submit(op, seq: 4)
        let applied = try resumed.nextApplied()
        #expect(applied.version == 4 && applied.seq == 4)
        #expect(try watcher.nextApplied() == applied)
    }
}

/// The same on two nodes of one PostgreSQL: node 0's store goes away, node 1 goes on writing, and
/// when node 0 reads the workspace back its sessions get node 1's ops, in order, before any later
/// one (before the fix they got none of them: a version gap).
@Suite(
    "Read back on a shared store", .serialized,
    .enabled(if: SharedStoreDatabase.isEnabled, SharedStoreDatabase.skipReason))
struct SharedStoreReadBackTests {
    @Test func aNodeReadingBackAfterItsStoreFailedSendsTheOtherNodesOpsInOrder() throws {
        var faulty: FaultyStore?
        let nodes = try SharedStoreNodes([])
        try nodes.addNode(.notifications, wrap: { store in
            let wrapped = FaultyStore(store)
            faulty = wrapped
            return wrapped
        })
        try nodes.addNode(.notifications)
        let store = try #require(faulty)

        let (a, _) = try TestClient.joined(port: nodes[0].port, workspace: "rb", clientId: "a")
        let (b, _) = try TestClient.joined(port: nodes[1].port, workspace: "rb", clientId: "b")
        try b.submit(.add(tab: .named("t1"), place: .end, activate: true))
        var seenByA: [AppliedOp] = []
        try a.collect(through: 1, into: &seenByA)
        var seenByB: [AppliedOp] = []
        try b.collect(through: 1, into: &seenByB)
        seenByB = []

        store.failing = true
        try a.submit(.add(tab: .named("mine"), place: .end, activate: false))
        #expect(try a.nextRejected(timeout: 10).code == .unavailable)
        for i in 2...4 { try b.submit(.add(tab: .named("t\(i)"), place: .end, activate: false)) }
        _ = try b.collect(answers: 3, clientId: "b", into: &seenByB)
        #expect(seenByB.map(\.version) == [2, 3, 4])

        store.failing = false
        try a.collect(through: 4, into: &seenByA, timeout: 15)
        #expect(seenByA.map(\.version) == [1, 2, 3, 4])
        #expect(seenByA.dropFirst().map(\.seq) == seenByB.map(\.seq))
        #expect(try metric(nodes[0], "tabsync_ops_read_back_total") == 3)
        // And on from there.
        try a.submit(.add(tab: .named("mine"), place: .end, activate: false))
        try a.collect(through: 5, into: &seenByA)
        #expect(seenByA.map(\.version) == [1, 2, 3, 4, 5])
    }
}
