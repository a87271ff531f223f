import Foundation
import TabsyncCore
import TabsyncProto
import TabsyncServer
import TabsyncTestServer
import TabsyncTestSupport
import Testing
@testable import TabsyncStore

/// A node while its PostgreSQL goes down and comes back, on a cluster of the test's own (stopping
/// the shared one would fail the tests running beside it).
@Suite(
    "A node while PostgreSQL restarts", .serialized,
    .enabled(if: PostgresTestCluster.isEnabled, PostgresTestCluster.skipReason))
struct SharedStoreRestartTests {
    @Test func writesAreRefusedUnavailableWhileItIsDownReadsGoOnAndWritesResumeByThemselves() throws {
        _ = try PostgresTestCluster.requireURL()  // required and configured alike
        let directory = NSTemporaryDirectory() + "tabsync-node-pg-" + UUID().uuidString
        defer { _ = try? PostgresTestCluster.runScript(["destroy", directory]) }
        let started = try PostgresTestCluster.runScript(["start", directory])
        let url = try #require(
            started.split(separator: "\n").first { $0.contains("TABSYNC_TEST_POSTGRES_URL=") }?
                .split(separator: "=", maxSplits: 1).last.map(String.init))
        let nodes = try SharedStoreNodes(url: url, [.notifications]) { $0.sharedStore?.pollInterval = .milliseconds(300) }
        let node = nodes[0]
        #expect(waitUntil(deadline: .seconds(10)) { (try? metric(node, "tabsync_store_listening")) == 1 })

        let (writer, welcome) = try TestClient.joined(port: node.port, workspace: "w", clientId: "writer")
        for i in 1...3 { try writer.submit(.add(tab: .named("t\(i)"), place: .end, activate: i == 1), seq: UInt64(i)) }
        var acknowledged: [AppliedOp] = []
        try writer.collect(through: 3, into: &acknowledged)
        let (watcher, _) = try TestClient.joined(port: node.port, workspace: "quiet", clientId: "watcher")

        try PostgresTestCluster.runScript(["stop", directory])
        // A write: refused UNAVAILABLE, never acknowledged.
        let next = TabsyncCore.Operation.add(tab: .named("t4"), place: .end, activate: false)
        try writer.submit(next, seq: 4)
        let refused = try writer.nextRejected(timeout: 15)
        #expect(refused.seq == 4 && refused.code == .unavailable)
        // Reads go on: the snapshot over HTTP, a Welcome for a loaded workspace, presence, /healthz.
        let snapshot = try httpGet(port: node.port, path: "/v1/workspaces/w")
        #expect(snapshot.status == 200 && snapshot.body.contains("\"version\":\"3\""))
        #expect(try httpGet(port: node.port, path: "/healthz").status == 200)
        let (visitor, visitorWelcome) = try TestClient.joined(port: node.port, workspace: "quiet", clientId: "visitor", name: "v")
        #expect(visitorWelcome.snapshot.version == 0)
        let peers = try watcher.next(timeout: 5) { message -> [String]? in
            guard case .presence(let p) = message, p.peers.contains(where: { $0.clientID == "visitor" }) else { return nil }
            return p.peers.map(\.clientID)
        }
        #expect(peers.contains("watcher"))
        _ = visitor

        try PostgresTestCluster.runScript(["start", directory])
        // Writes resume by themselves: the client sends its unacknowledged op again until stored.
        var applied: AppliedOp?
        let resumed = try waitUntil(deadline: .seconds(30), interval: .milliseconds(200)) {
            try writer.submit(next, seq: 4)
            switch try writer.next(timeout: 10, { message -> Tabsync_V1_ServerMessage.OneOf_Message? in
                switch message {
                case .applied, .rejected: message
                default: nil
                }
            }) {
            case .applied(let a):
                applied = try AppliedOp(a)
                return true
            case .rejected(let r):
                #expect(r.code == .unavailable)
                return false
            default:
                return false
            }
        }
        #expect(resumed)
        #expect(applied?.version == 4 && applied?.seq == 4)
        // Nothing acknowledged was lost, nothing is there twice.
        let reader = try nodes.reader()
        let log = try #require(try reader.ops(workspaceId: "w", after: 0, limit: .max))
        #expect(Array(log.prefix(3)) == acknowledged)
        #expect(log.map(\.seq) == [1, 2, 3, 4])
        #expect(try reader.load(workspaceId: "w")?.workspace.epoch == welcome.epoch)
        #expect(waitUntil(deadline: .seconds(15)) { ((try? metric(node, "tabsync_store_listener_reconnects_total")) ?? 0) >= 1 })
    }
}
