import Foundation
import TabsyncCore
import TabsyncProto
import TabsyncStore
import TabsyncTestServer
import TabsyncTestSupport
import Testing

/// The workspace in the connection's URL, over real sockets (docs/design.md, "The protocol in
/// brief"): sessions on `/v1/workspaces/{id}/ws`, the Hello checked against the path, invalid
/// paths refused at the handshake; and `/healthz` while a graceful stop drains.
@Suite(.serialized)
struct ServerWorkspacePathTests {
    @Test func aClientOnTheWorkspacePathIsWelcomedAndItsOpsReachTheRootPathsClients() throws {
        let server = try TestServer()
        defer { server.stop() }
        let (a, welcome) = try TestClient.joined(
            port: server.port, workspace: "team", clientId: "a", path: "/v1/workspaces/team/ws")
        #expect(welcome.snapshot.version == 0)
        let (b, _) = try TestClient.joined(port: server.port, workspace: "team", clientId: "b", format: .proto)
        let seq = try a.submit(.add(tab: .named("t1"), place: .end, activate: true))
        #expect(try a.nextApplied().seq == seq)
        #expect(try b.nextApplied().version == 1)
        #expect(try server.snapshot("team")?.tabs.map(\.id) == ["t1"])
    }

    /// libwebsockets decodes the path before the server reads it: `te%61m` is `team`.
    @Test func aPercentEncodedWorkspaceIdIsDecodedOnce() throws {
        let server = try TestServer()
        defer { server.stop() }
        let (_, welcome) = try TestClient.joined(
            port: server.port, workspace: "team", clientId: "a", path: "/v1/workspaces/te%61m/ws")
        #expect(welcome.clientID == "a")
        // `%2561` decodes to `%61` once, which no workspace id holds: refused, not decoded again.
        let twice = try RawWebSocket.connect(
            port: server.port, path: "/v1/workspaces/te%2561m/ws", subprotocols: ["tabsync.v1.json"])
        guard case .refused(let status, _) = twice else { Issue.record("upgraded"); return }
        #expect(status == 400)
    }

    @Test func aHelloNamingAnotherWorkspaceIsClosed4400() throws {
        let server = try TestServer()
        defer { server.stop() }
        let client = try TestClient(port: server.port, path: "/v1/workspaces/team/ws")
        try client.send(Tabsync_V1_ClientMessage(hello: Tabsync_V1_Hello(workspace: "other", clientId: "a")))
        let close = try client.socket.receiveClose()
        #expect(close.code == 4400)
        #expect(close.reason == "PROTOCOL_ERROR: Hello workspace differs from the URL path")
        let error = close.before.compactMap { message -> Tabsync_V1_Error? in
            guard case .text(let text) = message, let decoded = try? Tabsync_V1_ServerMessage(jsonString: text),
                  case .error(let error)? = decoded.message else { return nil }
            return error
        }.first
        #expect(error?.code == .protocolError)
        #expect(error?.message.contains("\"other\"") == true && error?.message.contains("\"team\"") == true)
        #expect(try server.metric("tabsync_workspaces_loaded") == 0)
    }

    @Test(arguments: [
        ("/v1/workspaces/has%20space/ws", 400), ("/v1/workspaces/colon:id/ws", 400),
        ("/v1/workspaces/\(String(repeating: "x", count: 65))/ws", 400),
        ("/v1/workspaces/a/b/ws", 404), ("/v1/workspaces/team", 404), ("/ws", 404),
    ])
    func anInvalidPathIsRefusedAtTheHandshake(path: String, status: Int) throws {
        let server = try TestServer()
        defer { server.stop() }
        let handshake = try RawWebSocket.connect(port: server.port, path: path, subprotocols: ["tabsync.v1.json"])
        guard case .refused(let got, let body) = handshake else { Issue.record("\(path) upgraded"); return }
        #expect(got == status, "\(path): \(body)")
        if status == 400 { #expect(body.contains("invalid workspace id in the path"), "\(body)") }
    }

    /// From the moment a graceful stop begins, `/healthz` answers 503 `draining` (HAProxy's check
    /// then takes the node out), while the batch being stored finishes and before the sessions
    /// are closed 1001.
    @Test func healthzAnswers503DrainingWhileTheStopDrains() throws {
        let memory = MemoryStore()
        let slow = SlowStore(base: memory, delay: 1.5)
        let server = try TestServer(store: slow)
        let running = try httpGet(port: server.port, path: "/healthz")
        #expect(running.status == 200 && running.body == "ok\n")
        let (a, _) = try TestClient.joined(port: server.port, workspace: "d", clientId: "a", path: "/v1/workspaces/d/ws")
        try a.submit(.add(tab: .named("x"), place: .end, activate: true))
        #expect(slow.commitStarted.wait(timeout: .now() + 5) == .success)  // the op is being stored
        let stopped = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            server.stop()
            stopped.signal()
        }
        var last: (status: Int, body: String) = (0, "")
        #expect(try waitUntil(deadline: .seconds(2)) {
            last = try httpGet(port: server.port, path: "/healthz", timeout: 1)
            return last.status == 503
        })
        #expect(last.body == "draining\n")
        // The session is still open: its ack comes first, then 1001.
        let close = try a.socket.receiveClose()
        #expect(close.code == 1001)
        #expect(close.before.contains { if case .text(let t) = $0 { t.hasPrefix(#"{"applied""#) } else { false } })
        #expect(stopped.wait(timeout: .now() + 10) == .success)
    }
}
