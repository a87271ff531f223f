import Foundation
import TabsyncCore
import TabsyncProto
import TabsyncTestServer
import TabsyncTestSupport
import Testing

/// RFC 6455 5.5.1 from the server's side: once the peer's close frame is in, the server sends no
/// data frame (only its close answer) and acts on nothing that follows it (Autobahn 7.1.4 checks
/// this on the echo; here on a tabsync session, whose frames leave at the end of the loop iteration).
@Suite("Close handshake")
struct ServerCloseHandshakeTests {
    @Test func aSubmitAfterTheClientsCloseFrameIsIgnoredAndNothingFollowsTheClose() throws {
        let server = try TestServer()
        defer { server.stop() }
        _ = try seed(server, workspace: "closing")
        let (client, _) = try TestClient.joined(port: server.port, workspace: "closing", clientId: "leaver")
        _ = try client.next { if case .presence(let p) = $0, p.peers.contains(where: { $0.clientID == "leaver" }) { return true } else { return nil } }
        let submit = WireFormat.json.encode(Tabsync_V1_ClientMessage(submit: Tabsync_V1_Submit(
            seq: 1, op: .update(TabUpdate(tabId: "t1", title: "after close")))))
        // The close frame and a Submit in one write: lws reads both in one go.
        try client.socket.writeAll(
            RawWebSocket.maskedFrame(opcode: 0x8, payload: [0x03, 0xE8])
                + RawWebSocket.maskedFrame(opcode: 0x1, payload: submit))
        let (code, _, before) = try client.socket.receiveClose()
        #expect(code == 1000)
        #expect(before.isEmpty, "sent after the client's close frame: \(before)")
        #expect(try #require(try server.snapshot("closing")).version == 3)
    }
}
