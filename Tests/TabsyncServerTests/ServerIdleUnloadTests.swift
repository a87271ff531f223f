import Foundation
import TabsyncCore
import TabsyncProto
import TabsyncTestServer
import Testing

/// Server memory follows the active workspaces: one with no session for `idleUnload` leaves memory
/// after its last commit, and the next Hello loads the same state back. Commit metrics show.
@Suite("Idle unload and commit metrics", .serialized)
struct ServerIdleUnloadTests {
    /// Polls `/metrics` until `series` is at most `value`; the last value read.
    static func waitForMetric(_ server: TestServer, _ series: String, atMost value: Double, timeout: Double = 5) throws -> Double {
        let deadline = Date().addingTimeInterval(timeout)
        var last = try server.metric(series)
        while last > value && Date() < deadline {
            Thread.sleep(forTimeInterval: 0.05)
            last = try server.metric(series)
        }
        return last
    }

    @Test func anIdleWorkspaceLeavesMemoryAndTheNextHelloReloadsTheSameState() throws {
        let server = try TestServer(configure: { $0.idleUnload = .milliseconds(400) })
        defer { server.stop() }
        let writer = try seed(server, workspace: "idle", tabs: 3)
        try writer.submit(.activate(.tabId("t2")))
        let last = try writer.nextApplied()
        let before = try #require(try server.snapshot("idle"))
        #expect(try server.metric("tabsync_workspaces_loaded") == 1)

        try writer.socket.sendClose()
        _ = try? writer.closeCode()
        // Still loaded shortly after the last session left (the idle time has not passed) ...
        Thread.sleep(forTimeInterval: 0.1)
        #expect(try server.metric("tabsync_workspaces_loaded") == 1)
        // ... and gone once it has.
        #expect(try Self.waitForMetric(server, "tabsync_workspaces_loaded", atMost: 0) == 0)

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

    @Test func aWorkspaceWithASessionStaysLoaded() throws {
        let server = try TestServer(configure: { $0.idleUnload = .milliseconds(100) })
        defer { server.stop() }
        let writer = try seed(server, workspace: "busy", tabs: 1)
        Thread.sleep(forTimeInterval: 1.3)  // over a second: the idle scan has run
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
