import Foundation
import TabsyncTestServer
import TabsyncTestSupport
import Testing

/// `--diagnostics-echo` (subprotocol `tabsync.echo`, Server+DiagnosticsEcho.swift) over raw
/// sockets: what scripts/autobahn relies on, checked where Python 2.7 is missing too.
@Suite("Diagnostics echo", .serialized)
struct ServerDiagnosticsEchoTests {
    @Test func theEchoIsRefusedUnlessTurnedOn() throws {
        let server = try TestServer()
        defer { server.stop() }
        guard case .refused(let status, let body) = try RawWebSocket.connect(port: server.port, subprotocols: ["tabsync.echo"]) else {
            Issue.record("upgraded to tabsync.echo with the echo off")
            return
        }
        #expect(status == 400)
        #expect(!body.contains("tabsync.echo"))
    }

    @Test func everyMessageComesBackWholeWithItsOpcode() throws {
        let server = try TestServer { $0.diagnosticsEcho = true }
        defer { server.stop() }
        let socket = try RawWebSocket.open(port: server.port, subprotocol: "tabsync.echo")
        try socket.send(text: "héllo")
        #expect(try socket.receive() == .text("héllo"))
        let blob = (0..<70_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        try socket.send(binary: blob)
        #expect(try socket.receive() == .binary(blob))
        try socket.sendFragmented(opcode: 0x1, payload: Array(String(repeating: "ab", count: 5000).utf8), fragmentSize: 999)
        #expect(try socket.receive() == .text(String(repeating: "ab", count: 5000)))
        try socket.send(text: "")
        #expect(try socket.receive() == .text(""))
        // No Hello is expected and none of tabsync's messages is sent: a ping gets its pong only.
        socket.answersPings = false
        try socket.sendFrame(opcode: 0x9, payload: Array("p".utf8))
        #expect(try socket.receive() == .pong(Array("p".utf8)))
        // The server's own limits hold: over maxFrameBytes is 1009.
        try socket.send(binary: [UInt8](repeating: 7, count: server.configuration.limits.maxFrameBytes + 1))
        #expect(try socket.receiveClose().code == 1009)
    }

    /// Autobahn 7.1.4: a text message after the client's close frame is not echoed; the answer is
    /// the close frame alone.
    @Test func nothingIsEchoedAfterThePeersCloseFrame() throws {
        let server = try TestServer { $0.diagnosticsEcho = true }
        defer { server.stop() }
        let socket = try RawWebSocket.open(port: server.port, subprotocol: "tabsync.echo")
        try socket.writeAll(
            RawWebSocket.maskedFrame(opcode: 0x8, payload: [0x03, 0xE8])
                + RawWebSocket.maskedFrame(opcode: 0x1, payload: Array("after close".utf8)))
        let (code, _, before) = try socket.receiveClose()
        #expect(code == 1000)
        #expect(before.isEmpty, "sent after the peer's close: \(before)")
    }
}
