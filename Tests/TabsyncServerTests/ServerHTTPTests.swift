import Foundation
import TabsyncCore
import TabsyncProto
import TabsyncTestServer
import TabsyncTestSupport
import Testing

@testable import TabsyncServer

@Suite("HTTP and handshake", .serialized)
struct ServerHTTPTests {
    @Test func healthzAnswersOk() throws {
        let server = try TestServer()
        defer { server.stop() }
        let (status, body) = try httpGet(port: server.port, path: "/healthz")
        #expect(status == 200)
        #expect(body == "ok\n")
    }

    @Test func metricsListsEverySeriesOfTheDesign() throws {
        let server = try TestServer()
        defer { server.stop() }
        let client = try seed(server, workspace: "m", tabs: 2)
        _ = client
        let (status, body) = try httpGet(port: server.port, path: "/metrics")
        #expect(status == 200)
        for series in [
            "tabsync_connections 1", "tabsync_workspaces_loaded 1", "tabsync_ops_applied_total 2",
            "tabsync_ops_rejected_total{code=\"TAB_GONE\"} 0", "tabsync_messages_out_total",
            "tabsync_bytes_out_total", "tabsync_slow_consumer_closes_total 0", "tabsync_send_queue_bytes",
            "tabsync_commit_batch_ops_bucket{le=\"+Inf\"}", "tabsync_commit_batch_ops_count",
            "tabsync_op_latency_seconds_bucket{le=\"0.001\"}", "tabsync_op_latency_seconds_sum",
            "tabsync_op_latency_seconds_count 2",
        ] {
            #expect(body.contains(series), "missing \(series)")
        }
        #expect(body.contains("# TYPE tabsync_op_latency_seconds histogram"))
    }

    @Test func workspaceSnapshotIs404UntilTheFirstOpThenJSON() throws {
        let server = try TestServer()
        defer { server.stop() }
        // A Hello alone creates nothing.
        let (watcher, welcome) = try TestClient.joined(port: server.port, workspace: "w1", clientId: "c0")
        #expect(welcome.snapshot.version == 0)
        #expect(try httpGet(port: server.port, path: "/v1/workspaces/w1").status == 404)
        _ = watcher
        let client = try seed(server, workspace: "w1", tabs: 2)
        _ = client
        let (status, body) = try httpGet(port: server.port, path: "/v1/workspaces/w1")
        #expect(status == 200)
        #expect(body.contains("\"workspace\":\"w1\""))
        #expect(body.contains("\"version\":\"2\""))
        let snapshot = try #require(try server.snapshot("w1"))
        #expect(snapshot.tabs.map(\.id) == ["t1", "t2"])
        #expect(snapshot.activeTabId == "t1")
        // Unloaded (no session left), it is read back from the store.
        #expect(try httpGet(port: server.port, path: "/v1/workspaces/none").status == 404)
        #expect(try httpGet(port: server.port, path: "/v1/workspaces/bad%20id").status == 404)
    }

    @Test func anyOtherPathIs404() throws {
        let server = try TestServer(configure: { $0.serveWeb = false })
        defer { server.stop() }
        #expect(try httpGet(port: server.port, path: "/").status == 404)
        #expect(try httpGet(port: server.port, path: "/w/team").status == 404)
        #expect(try httpGet(port: server.port, path: "/web/bar.js").status == 404)
        #expect(try httpGet(port: server.port, path: "/v1/workspaces/").status == 404)
        #expect(try httpGet(port: server.port, path: "/metrics/x").status == 404)
    }

    @Test(arguments: [nil, ["chat"], ["tabsync.v2.json"], ["http"]] as [[String]?])
    func upgradeWithoutAServedSubprotocolIs400NamingThem(offered: [String]?) throws {
        let server = try TestServer()
        defer { server.stop() }
        let handshake = try RawWebSocket.connect(port: server.port, subprotocols: offered)
        guard case .refused(let status, let body) = handshake else {
            Issue.record("upgrade accepted with \(String(describing: offered))")
            return
        }
        #expect(status == 400)
        #expect(body.contains("tabsync.v1.json"))
        #expect(body.contains("tabsync.v1.proto"))
    }

    @Test func upgradeOnAnotherPathIs404() throws {
        let server = try TestServer()
        defer { server.stop() }
        let handshake = try RawWebSocket.connect(port: server.port, path: "/ws", subprotocols: ["tabsync.v1.json"])
        guard case .refused(let status, _) = handshake else {
            Issue.record("upgrade on /ws accepted")
            return
        }
        #expect(status == 404)
    }

    @Test func upgradePicksTheFirstServedSubprotocol() throws {
        let server = try TestServer()
        defer { server.stop() }
        let handshake = try RawWebSocket.connect(port: server.port, subprotocols: ["chat", "tabsync.v1.proto", "tabsync.v1.json"])
        guard case .upgraded(_, let subprotocol) = handshake else {
            Issue.record("refused")
            return
        }
        #expect(subprotocol == "tabsync.v1.proto")
    }

    /// NOTES.md: lws 4.1.6 was seen binding all interfaces when given 127.0.0.1.
    @Test func bindsExactlyTheAskedAddress() throws {
        let server = try TestServer()
        defer { server.stop() }
        let table = try String(contentsOfFile: "/proc/net/tcp", encoding: .utf8)
        let portHex = String(format: "%04X", server.port)
        let listening = table.split(separator: "\n").dropFirst().compactMap { line -> String? in
            let fields = line.split(separator: " ")
            guard fields.count > 3, fields[1].hasSuffix(":" + portHex), fields[3] == "0A" else { return nil }
            return String(fields[1])
        }
        #expect(listening == ["0100007F:" + portHex])
        let table6 = (try? String(contentsOfFile: "/proc/net/tcp6", encoding: .utf8)) ?? ""
        #expect(!table6.contains(":" + portHex + " 00000000000000000000000000000000:0000 0A"))
    }

    @Test func connectionsOverTheCapAreRefusedAtAccept() throws {
        let server = try TestServer { $0.maxConnections = 2 }
        defer { server.stop() }
        let (a, _) = try TestClient.joined(port: server.port, workspace: "cap", clientId: "a")
        let (b, _) = try TestClient.joined(port: server.port, workspace: "cap", clientId: "b")
        // The third is accepted by the kernel and closed at once by the server: no answer.
        #expect(throws: RawWebSocket.Failure.self) {
            _ = try RawWebSocket.connect(port: server.port, subprotocols: ["tabsync.v1.json"], timeout: 2)
        }
        // Once one leaves, a new connection is served again (as soon as the server has seen it go).
        try b.socket.sendClose()
        _ = try b.socket.receiveClose()
        #expect(waitUntil { (try? httpGet(port: server.port, path: "/healthz", timeout: 1).status) == 200 })
        _ = a
    }

    @Test func resolvesHostsToOneAddress() throws {
        #expect(try Server.resolve("127.0.0.1").isIPv6 == false)
        #expect(try Server.resolve("::1").isIPv6 == true)
        #expect(try Server.resolve("localhost").address.isEmpty == false)
        #expect(throws: Server.Error.self) { try Server.resolve("no-such-host.invalid") }
    }

    /// The browser page: `/` and `/w/{workspace}` are index.html, `/web/NAME` its files; an unknown
    /// file or an invalid workspace id is 404 (the web assets' headers are checked by Tests/web).
    @Test func theBrowserPageIsServedOnRootAndWorkspacePaths() throws {
        let server = try TestServer()
        defer { server.stop() }
        let (status, body) = try httpGet(port: server.port, path: "/")
        #expect(status == 200)
        #expect(body.contains("<script type=\"module\" src=\"/web/bar.js\"></script>"))
        #expect(try httpGet(port: server.port, path: "/w/team").body == body)
        #expect(try httpGet(port: server.port, path: "/web/tabsync-client.js").body.contains("export class TabsyncClient"))
        #expect(try httpGet(port: server.port, path: "/web/none.js").status == 404)
        #expect(try httpGet(port: server.port, path: "/w/bad%20id").status == 404)
        #expect(try httpGet(port: server.port, path: "/w/").status == 404)
    }
}
