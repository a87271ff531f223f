import Foundation
import TabsyncBench
import TabsyncCore
import TabsyncTestServer
import TabsyncTestSupport
import Testing

@Suite("tabsync bench against the real server")
struct BenchSmokeTests {
    /// The drain waits 5 s stretched by the time scale: under a sanitizer the answers come later.
    func configuration(port: Int, _ extra: [String]) throws -> BenchConfiguration {
        try BenchConfiguration.parse(
            ["--server", "127.0.0.1:\(port)", "--seed", "7", "--drain-timeout", "\(5 * testTimeScale)"] + extra)
    }

    @Test("a short bench completes and counts every op it sent (both subprotocols, both event loops)",
          arguments: [("proto", "epoll"), ("json", "epoll"), ("proto", "poll")])
    func benchCountsWhatItSent(subprotocol: String, loop: String) async throws {
        let server = try TestServer()
        defer { server.stop() }
        let configuration = try configuration(port: server.port, [
            "--workspaces", "2", "--clients", "3", "--rate", "200", "--duration", "1.5", "--warmup", "0.3",
            "--subprotocol", subprotocol, "--server-pid", "\(getpid())", "--event-loop", loop,
        ])
        let result = try await withTimeout(scaled(.seconds(60))) { try await BenchRunner.runDetached(configuration) }
        let report = result.report
        #expect(report.connect.connected == 6)
        #expect(report.connect.failed == 0)
        // Open loop at 200 ops/s: the schedule, not the answers or the clock, sets how many were
        // sent. The measured window [0.3 s, 1.8 s) holds the ops scheduled at k / 200 s for k = 60
        // ... 359, and the bench sends every op due by the window's end before it drains.
        #expect(report.ops.sent + report.ops.notSent == 300)
        #expect(report.ops.notSent == 0)
        #expect(report.ops.sent == report.ops.applied + report.ops.rejected)
        #expect(report.ops.unanswered == 0)
        // Closed workspaces (nobody joins or leaves): every other client sees every applied op.
        #expect(report.ops.deliveries == report.ops.applied * 2)
        #expect(report.ops.expectedDeliveries == report.ops.deliveries)
        #expect(report.ack.count == UInt64(report.ops.applied))
        #expect(report.delivery.count == UInt64(report.ops.deliveries))
        #expect(report.ack.p50 > 0 && report.ack.p50 <= report.ack.p99)
        #expect(report.disconnects.isEmpty)
        let process = try #require(report.serverProcess)
        #expect(process.readable && process.rssConnectedBytes > 0)
        // The table and the files have the figures.
        #expect(result.table.contains("applied \(report.ops.applied)"))
        #expect(result.svg.contains("<polyline"))
        #expect(result.hgrm.contains("# delivery latency"))
        let decoded = try JSONDecoder().decode(BenchReport.self, from: try result.json())
        #expect(decoded.ops.sent == report.ops.sent)
    }

    @Test("several --server-pid are read as one server (CPU and RSS summed), --store-pid as the store's CPU")
    func severalServerPidsAndStorePids() async throws {
        let server = try TestServer()
        defer { server.stop() }
        // This process (the server and the load generator run in it) and its parent (the test runner).
        let configuration = try configuration(port: server.port, [
            "--workspaces", "1", "--clients", "2", "--rate", "200", "--duration", "1", "--warmup", "0.2",
            "--server-pid", "\(getpid())", "--server-pid", "\(getppid())", "--store-pid", "\(getpid())",
        ])
        #expect(configuration.serverPids == [getpid(), getppid()] && configuration.storePids == [getpid()])
        let result = try await withTimeout(scaled(.seconds(60))) { try await BenchRunner.runDetached(configuration) }
        let report = result.report
        let process = try #require(report.serverProcess)
        #expect(process.pids == [getpid(), getppid()] && process.pid == getpid() && process.readable)
        #expect(process.rssConnectedBytes > 0)
        let store = try #require(report.storeProcesses)
        #expect(store.pids == [getpid()])
        // The store pid is this busy process: it used CPU in the window, and no more than the
        // server pids (this process among them) together.
        #expect(store.cpuSeconds > 0 && store.cpuSeconds <= process.cpuSeconds + 0.01)
        #expect((store.cpuMicrosPerOp ?? 0) > 0)
        #expect(result.table.contains("store CPU") && result.table.contains("server CPU (2 processes)"))
    }

    @Test("--check-presence: every connection's view (full list + deltas) matches the sessions, past the cap too",
          arguments: ["proto", "json"])
    func presenceViewsAreChecked(subprotocol: String) async throws {
        let server = try TestServer { $0.maxPresencePeers = 7 }
        defer { server.stop() }
        let configuration = try configuration(port: server.port, [
            "--workspaces", "2", "--clients", "15", "--rate", "0", "--duration", "0.2", "--warmup", "0",
            "--subprotocol", subprotocol, "--check-presence",
        ])
        let report = try await withTimeout(scaled(.seconds(60))) { try await BenchRunner.runDetached(configuration) }.report
        #expect(report.connect.connected == 30)
        let check = try #require(report.presenceCheck)
        #expect(check.checked == 30)
        #expect(check.correct == 30)
        #expect(check.namedMax == 7)
        #expect(check.messages >= 30)
    }

    @Test("idle connections: rate 0 holds them and sends nothing")
    func idleConnections() async throws {
        let server = try TestServer()
        defer { server.stop() }
        let configuration = try configuration(port: server.port, [
            "--workspaces", "5", "--clients", "4", "--rate", "0", "--duration", "0.5", "--warmup", "0",
        ])
        let report = try await withTimeout(scaled(.seconds(60))) { try await BenchRunner.runDetached(configuration) }.report
        #expect(report.connect.connected == 20)
        #expect(report.ops.sent == 0 && report.ops.deliveries == 0)
    }

    @Test("a server that refuses the connections is reported, not a crash")
    func refusedLoadIsReported() async throws {
        // A port nothing listens on: bind one, note it, close it.
        let server = try TestServer()
        let port = server.port
        server.stop()
        let configuration = try configuration(port: port, ["--clients", "3", "--rate", "10", "--duration", "0.5"])
        let report = try await withTimeout(scaled(.seconds(60))) { try await BenchRunner.runDetached(configuration) }.report
        #expect(report.connect.connected == 0)
        #expect(report.connect.failed == 3)
        #expect(report.connect.failures.values.reduce(0, +) == 3)
        #expect(report.notes.contains { $0.contains("nothing was measured") })
    }

    @Test("the wrong subprotocol for the server fails the handshake and is counted")
    func mirrorAgainstTabsyncIsRefused() async throws {
        let server = try TestServer()
        defer { server.stop() }
        let configuration = try configuration(port: server.port, [
            "--clients", "2", "--subprotocol", "mirror", "--rate", "10", "--duration", "0.3",
        ])
        let report = try await withTimeout(scaled(.seconds(60))) { try await BenchRunner.runDetached(configuration) }.report
        #expect(report.connect.connected == 0)
        #expect(report.connect.failed == 2)
    }
}
