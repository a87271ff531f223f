import Foundation
import TabsyncCore
import TabsyncProto
import TabsyncTestServer
import TabsyncTestSupport
import Testing

/// Server memory follows the active workspaces: one with no session for `idleUnload` leaves memory
/// after its last commit, and the next Hello loads the same state back. Commit metrics show.
@Suite("Idle unload and commit metrics", .serialized)
struct ServerIdleUnloadTests {
    @Test(arguments: TestServer.Storage.allCases)
    func anIdleWorkspaceLeavesMemoryAndTheNextHelloReloadsTheSameState(storage: TestServer.Storage) throws {
        let idleUnload = Duration.seconds(1)
        let server = try TestServer(storage) { $0.idleUnload = idleUnload }
        defer { server.stop() }
        let writer = try seed(server, workspace: "idle", tabs: 3)
        try writer.submit(.activate(.tabId("t2")))
        let last = try writer.nextApplied()
        let before = try #require(try server.snapshot("idle"))
        #expect(try server.metric("tabsync_workspaces_loaded") == 1)

        try writer.socket.sendClose()
        _ = try? writer.closeCode()
        // Unloaded once idle (when exactly is a rule of the core, on its virtual clock: DeadlineRuleTests).
        #expect(try waitUntil { try server.metric("tabsync_connections") == 0 })
        #expect(try server.waitForMetric("tabsync_workspaces_loaded", atMost: 0) == 0)

        let (client, welcome) = try TestClient.joined(
            port: server.port, workspace: "idle", clientId: "seeder", lastVersion: last.version - 1, epoch: before.epoch)
        #expect(try server.metric("tabsync_workspaces_loaded") == 1)
        #expect(welcome.recovered)
        #expect(try welcome.missed.map { try AppliedOp($0) } == [last])
        #expect(welcome.lastSeq == 4)
        #expect(try server.snapshot("idle") == before)
        // The reloaded workspace goes on at the next version.
        try client.submit(.remove(tabId: "t1"), seq: 5)
        #expect(try client.nextApplied().version == last.version + 1)
    }

    /// A witness workspace left idle after the busy one's last op shows the idle scan has run past
    /// the busy one's idle time: the scan that unloads the witness would have unloaded the busy one
    /// too (or earlier) if a session did not keep it.
    @Test func aWorkspaceWithASessionStaysLoaded() throws {
        let server = try TestServer(capturingLog: .debug) { $0.idleUnload = .milliseconds(100) }
        defer { server.stop() }
        let writer = try seed(server, workspace: "busy", tabs: 1)
        let witness = try seed(server, workspace: "witness", tabs: 1)
        try witness.socket.sendClose()
        _ = try? witness.closeCode()
        func unloaded(_ workspace: String) -> Bool {
            server.logEntries.contains { "\($0.message)" == "idle workspace unloaded" && $0.metadata["workspace"] == "\(workspace)" }
        }
        #expect(waitUntil { unloaded("witness") }, "the idle scan never unloaded the witness")
        #expect(!unloaded("busy"))
        #expect(try server.metric("tabsync_workspaces_loaded") == 1)
        try writer.submit(.add(tab: .named("t2"), place: .end, activate: false))
        #expect(try writer.nextApplied().version == 2)
    }

    @Test func commitBatchSizesAndCommitLatencyShowInMetrics() throws {
        let server = try TestServer()
        defer { server.stop() }
        _ = try seed(server, workspace: "m", tabs: 5)
        let (_, body) = try httpGet(port: server.port, path: "/metrics")
        for line in [
            "# TYPE tabsync_commit_batch_ops histogram", "# TYPE tabsync_commit_seconds histogram",
            "tabsync_commit_batch_ops_bucket{le=\"+Inf\"}", "tabsync_commit_seconds_bucket{le=\"0.001\"}",
        ] {
            #expect(body.contains(line), "metrics lack \(line)")
        }
        let batches = try server.metric("tabsync_commit_batch_ops_count")
        #expect(batches >= 1)
        #expect(try server.metric("tabsync_commit_batch_ops_sum") == 5)  // five seqs consumed
        #expect(try server.metric("tabsync_commit_seconds_count") == batches)
        #expect(try server.metric("tabsync_commit_seconds_sum") > 0)
    }
}
