import Foundation
import TabsyncCore
import TabsyncProto
import TabsyncServer
import TabsyncStore
import TabsyncTestServer
import TabsyncTestSupport
import Testing

/// Read back end to end: a commit whose answer is lost, over sockets, the server's metrics and a
/// resume. The rules (a batch stored or not, another node's ops stored meanwhile, in order) are
/// `ReadBackRuleTests` in the core tests. Both cases broke the cluster test with PostgreSQL
/// restarted under load (version gaps; an op refused UNAVAILABLE that was in the log).
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
}

