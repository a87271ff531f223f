import Foundation
import TabsyncTestServer
import TabsyncTestSupport
import Testing

/// Refused handshakes as a third-party client sees them: Python's `websockets` (which README's own
/// example uses, and which scripts/test installs) must read the refusal's status and body. It
/// accepts only an `HTTP/1.1` status line; lws' own header helpers answered `HTTP/1.0` here, so the
/// user saw "did not receive a valid HTTP response" instead of the subprotocols the server speaks.
@Suite("Handshake refusals read by Python websockets", .serialized)
struct ServerHandshakeRefusalTests {
    /// Tries to connect to argv[1] offering the subprotocols in argv[2] (comma-separated, may be
    /// empty); prints the refusal's status line, status and body, or "upgraded".
    private static let script = #"""
import asyncio, socket, sys
from urllib.parse import urlparse
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

async def main(url, offered):
    try:
        async with connect(url, subprotocols=offered or None, open_timeout=10):
            print("upgraded")
    except InvalidStatus as refusal:
        print("status", refusal.response.status_code)
        print("body", refusal.response.body.decode())

    # The raw status line, as the server wrote it.
    parsed = urlparse(url)
    with socket.create_connection((parsed.hostname, parsed.port), timeout=10) as s:
        protocols = f"Sec-WebSocket-Protocol: {', '.join(offered)}\r\n" if offered else ""
        s.sendall((f"GET {parsed.path} HTTP/1.1\r\nHost: {parsed.netloc}\r\nUpgrade: websocket\r\n"
                   "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                   f"Sec-WebSocket-Version: 13\r\n{protocols}\r\n").encode())
        print("line", s.makefile("rb").readline().decode().strip())

asyncio.run(main(sys.argv[1], [p for p in sys.argv[2].split(",") if p]))
"""#

    private static func attempt(_ url: String, offering offered: [String]) throws -> String {
        let directory = TemporaryDirectory(prefix: "tabsync-refusal")
        let path = directory.path + "/refusal.py"
        try script.write(toFile: path, atomically: true, encoding: .utf8)
        let imports = try ToolRun.run("/usr/bin/env", ["python3", "-c", "import websockets"])
        try #require(imports.status == 0, "Python's websockets is missing (scripts/test installs it): \(imports.output)")
        let run = try ToolRun.run("/usr/bin/env", ["python3", path, url, offered.joined(separator: ",")])
        #expect(run.status == 0, "\(run.output)")
        return run.output
    }

    @Test(arguments: [[], ["chat"], ["tabsync.v2.json"]] as [[String]])
    func aMissingOrUnknownSubprotocolIsA400ThatPythonWebsocketsReads(offered: [String]) throws {
        let server = try TestServer()
        defer { server.stop() }
        let output = try Self.attempt("ws://127.0.0.1:\(server.port)/", offering: offered)
        #expect(output.contains("status 400"), "\(output)")
        #expect(output.contains("tabsync.v1.json") && output.contains("tabsync.v1.proto"), "\(output)")
        #expect(output.contains("line HTTP/1.1 400 Bad Request"), "\(output)")
    }

    @Test func anUpgradeOnAnotherPathIsA404ThatPythonWebsocketsReads() throws {
        let server = try TestServer()
        defer { server.stop() }
        let output = try Self.attempt("ws://127.0.0.1:\(server.port)/ws", offering: ["tabsync.v1.json"])
        #expect(output.contains("status 404"), "\(output)")
        #expect(output.contains("line HTTP/1.1 404 Not Found"), "\(output)")
    }
}
