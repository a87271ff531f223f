import Foundation
import TabsyncBench
import TabsyncTestServer
import TabsyncTestSupport
import Testing

/// `tabsync bench` with several `--server`s: the connections are spread over them round-robin, and
/// the report splits delivery latency into same-node and cross-node.
@Suite("tabsync bench over several servers")
struct BenchSeveralServersTests {
    @Test("--server repeats: every URL is kept in order; one --server keeps the old behaviour")
    func serverRepeats() throws {
        let several = try BenchConfiguration.parse(["--server", "127.0.0.1:7001", "--server", "ws://[::1]:7002", "--server=h:7003"])
        #expect(several.servers == [
            .init(host: "127.0.0.1", port: 7001), .init(host: "::1", port: 7002), .init(host: "h", port: 7003),
        ])
        #expect(several.servers.map(\.url) == ["ws://127.0.0.1:7001", "ws://[::1]:7002", "ws://h:7003"])
        #expect(several.host == "127.0.0.1" && several.port == 7001)
        #expect(try BenchConfiguration.parse([]).servers == [.init(host: "127.0.0.1", port: 7070)])
        #expect(try BenchConfiguration.parse(["--server", "x:1"]).servers.count == 1)
        #expect(throws: BenchError.self) { try BenchConfiguration.parse(["--server", "127.0.0.1:7001", "--server", "nope"]) }
    }

    /// The same server named twice (two nodes of one cluster would do the same through PostgreSQL; the
    /// cluster tests and BENCHMARKS.md run that): every delivery is counted once, in exactly one of
    /// the two halves, and with 2 servers × 4 clients per workspace each op has 1 same-node and 2
    /// cross-node receivers (of the 3 other clients of its workspace, 1 shares its server).
    @Test("the report splits delivery latency into same-node and cross-node")
    func splitsDeliveryBySameAndCrossNode() async throws {
        let server = try TestServer()
        defer { server.stop() }
        let configuration = try BenchConfiguration.parse([
            "--server", "127.0.0.1:\(server.port)", "--server", "ws://127.0.0.1:\(server.port)/", "--seed", "11",
            "--workspaces", "2", "--clients", "4", "--rate", "200", "--duration", "1", "--warmup", "0.2",
            "--drain-timeout", "\(5 * testTimeScale)",
        ])
        let result = try await withTimeout(scaled(.seconds(60))) { try await BenchRunner.runDetached(configuration) }
        let report = result.report
        #expect(report.connect.connected == 8)
        #expect(report.servers == ["ws://127.0.0.1:\(server.port)", "ws://127.0.0.1:\(server.port)"])
        #expect(report.ops.applied > 0 && report.ops.unanswered == 0)
        #expect(report.ops.deliveries == report.ops.applied * 3)
        let same = try #require(report.deliverySameNode)
        let cross = try #require(report.deliveryCrossNode)
        // Connections alternate between the two servers: of a submitter's 3 peers, 1 is on its
        // server and 2 are on the other.
        #expect(same.count == UInt64(report.ops.applied))
        #expect(cross.count == UInt64(report.ops.applied * 2))
        #expect(same.count + cross.count == report.delivery.count)
        #expect(same.p50 > 0 && cross.p50 > 0)
        #expect(result.table.contains("same node") && result.table.contains("cross node"))
        #expect(result.table.contains("connections round-robin"))
        let decoded = try JSONDecoder().decode(BenchReport.self, from: try result.json())
        #expect(decoded.deliveryCrossNode?.count == cross.count)
    }

    @Test("with one server the report has no split (and its JSON no such keys)")
    func oneServerHasNoSplit() async throws {
        let server = try TestServer()
        defer { server.stop() }
        let configuration = try BenchConfiguration.parse([
            "--server", "127.0.0.1:\(server.port)", "--seed", "12",
            "--workspaces", "1", "--clients", "3", "--rate", "100", "--duration", "0.5", "--warmup", "0.1",
        ])
        let result = try await withTimeout(scaled(.seconds(60))) { try await BenchRunner.runDetached(configuration) }
        #expect(result.report.ops.deliveries > 0)
        #expect(result.report.deliverySameNode == nil && result.report.deliveryCrossNode == nil)
        #expect(result.report.servers == nil)
        #expect(!result.table.contains("cross node"))
        let json = String(decoding: try result.json(), as: UTF8.self)
        #expect(!json.contains("deliveryCrossNode") && !json.contains("\"servers\""))
    }
}
