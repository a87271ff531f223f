import Foundation
import TabsyncLock
import TabsyncTestSupport
import Testing
@testable import TabsyncClient

/// Records what the loop reports for one raw connection (no tabsync session on top).
final class RecordingOwner: LoopConnectionOwner {
    struct Record {
        var opened = 0
        var messages: [[UInt8]] = []
        var endings: [ConnectionEnding] = []
        var outgoing: [[UInt8]] = []
    }

    let record = Lock(Record())

    func loopConnecting(attempt: Int) {}
    func loopOpened() -> [[UInt8]] {
        record.withLock { $0.opened += 1 }
        return []
    }
    func loopReceived(_ message: [UInt8]) -> LoopVerdict {
        record.withLock { $0.messages.append(message) }
        return .keep
    }
    func loopTakeOutgoing(budget: Int) -> [[UInt8]] {
        record.withLock { record in
            defer { record.outgoing = [] }
            return record.outgoing
        }
    }
    func loopClosed(_ ending: ConnectionEnding) -> LoopNext {
        record.withLock { $0.endings.append(ending) }
        return .retry
    }
    func loopWaiting(attempt: Int, delay: Duration) {}
    func loopForgotten() {}
}

/// A WebSocket echo server over TLS in plain Python (standard library only), with a throwaway
/// self-signed certificate: it echoes every frame, and answers `big:N` with N bytes of `x` in
/// three fragments. It prints `listening PORT` once bound.
private let echoServerScript = #"""
import base64, hashlib, socket, ssl, struct, sys, threading
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(sys.argv[1], sys.argv[2])
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(8)
print("listening", listener.getsockname()[1], flush=True)

def read_exact(conn, n):
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk: raise EOFError
        data += chunk
    return data

def send_frame(conn, opcode, payload, fin=True):
    head = bytes([(0x80 if fin else 0) | opcode])
    n = len(payload)
    if n < 126: head += bytes([n])
    elif n < 65536: head += bytes([126]) + struct.pack(">H", n)
    else: head += bytes([127]) + struct.pack(">Q", n)
    conn.sendall(head + payload)

def serve(raw):
    try:
        conn = ctx.wrap_socket(raw, server_side=True)
        request = b""
        while b"\r\n\r\n" not in request: request += conn.recv(4096)
        headers = {}
        for line in request.decode().split("\r\n")[1:]:
            if ":" in line:
                k, v = line.split(":", 1); headers[k.strip().lower()] = v.strip()
        accept = base64.b64encode(hashlib.sha1((headers["sec-websocket-key"] + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()).decode()
        protocol = headers.get("sec-websocket-protocol", "").split(",")[0].strip()
        conn.sendall(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                      "Sec-WebSocket-Accept: %s\r\nSec-WebSocket-Protocol: %s\r\n\r\n" % (accept, protocol)).encode())
        while True:
            b0, b1 = read_exact(conn, 2)
            opcode, n = b0 & 0x0F, b1 & 0x7F
            if n == 126: n = struct.unpack(">H", read_exact(conn, 2))[0]
            elif n == 127: n = struct.unpack(">Q", read_exact(conn, 8))[0]
            mask = read_exact(conn, 4) if b1 & 0x80 else b"\0\0\0\0"
            payload = bytes(c ^ mask[i % 4] for i, c in enumerate(read_exact(conn, n)))
            if opcode == 8:
                send_frame(conn, 8, payload[:2]); return
            if opcode == 9:
                send_frame(conn, 10, payload); continue
            if payload.startswith(b"big:"):
                size = int(payload[4:]); third = size // 3
                send_frame(conn, 2, b"x" * third, fin=False)
                send_frame(conn, 0, b"x" * third, fin=False)
                send_frame(conn, 0, b"x" * (size - 2 * third))
            else:
                send_frame(conn, opcode, payload)
    except Exception:
        pass
    finally:
        raw.close()

while True:
    client, _ = listener.accept()
    threading.Thread(target=serve, args=(client,), daemon=True).start()
"""#

/// The Python TLS echo server, running until `stop()`.
final class EchoServer {
    let process = Process()
    let directory: URL
    let port: Int

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("tabsync-wss-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let cert = directory.appendingPathComponent("cert.pem").path
        let key = directory.appendingPathComponent("key.pem").path
        let openssl = Process()
        openssl.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        openssl.arguments = ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
                             "-days", "1", "-subj", "/CN=localhost"]
        openssl.standardOutput = FileHandle.nullDevice
        openssl.standardError = FileHandle.nullDevice
        try openssl.run()
        openssl.waitUntilExit()
        let script = directory.appendingPathComponent("echo.py")
        try echoServerScript.write(to: script, atomically: true, encoding: .utf8)

        let output = Pipe()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = [script.path, cert, key]
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let text = output.firstLine()
        guard text.hasPrefix("listening "), let port = Int(text.dropFirst(10).prefix { $0.isNumber }) else {
            kill(process.processIdentifier, SIGKILL)
            var status: Int32 = 0
            _ = waitpid(process.processIdentifier, &status, 0)
            throw ClientError.loopUnavailable("echo server did not start: \(text)")
        }
        self.port = port
    }

    /// SIGKILL, then reap: a child spawned from a test thread may inherit a signal mask that
    /// blocks SIGTERM, and `waitUntilExit` would then wait for ever.
    func stop() {
        let pid = process.processIdentifier
        kill(pid, SIGKILL)
        var status: Int32 = 0
        _ = waitpid(pid, &status, 0)
        try? FileManager.default.removeItem(at: directory)
    }
}

private let toolsAvailable =
    ["/usr/bin/python3", "/usr/bin/openssl"].allSatisfy { FileManager.default.isExecutableFile(atPath: $0) }

/// The transport over `wss://` (TLS, subprotocol negotiation, writes, fragmented reads).
@Suite(.serialized, .enabled(if: toolsAvailable, "needs python3 and openssl"))
struct TLSTransportTests {
    @Test func secureConnectionCarriesMessagesBothWaysAndReassemblesFragments() async throws {
        let server = try EchoServer()
        defer { server.stop() }
        let loop = try ClientLoop()
        defer { loop.shutdown() }
        let owner = RecordingOwner()
        let id = loop.makeConnectionId()
        loop.send(.open(
            id: id, owner: owner, url: try ServerURL(parsing: "wss://127.0.0.1:\(server.port)/"),
            subprotocol: "tabsync.v1.proto", backoff: Backoff(initial: .milliseconds(50), maximum: .milliseconds(200)),
            allowSelfSigned: true))
        let opened = await waitUntil(deadline: .seconds(10)) { owner.record.withLock { $0.opened == 1 } }
        try #require(opened, "the connection never opened")

        let small: [UInt8] = Array("hello over tls".utf8)
        let large = (0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        owner.record.withLock { $0.outgoing = [small, large, Array("big:250000".utf8)] }
        loop.send(.flush(id: id))
        let received = await waitUntil(deadline: .seconds(10)) { owner.record.withLock { $0.messages.count == 3 } }
        try #require(received, "not all three messages arrived")
        let record = owner.record.withLock { $0 }
        #expect(record.messages[0] == small)
        #expect(record.messages[1] == large, "a 300 KB message arrives whole")
        #expect(record.messages[2] == Array(repeating: UInt8(ascii: "x"), count: 250_000), "three fragments, one message")
        #expect(record.opened == 1)
        // Every handshake succeeds the first time. scripts/test runs this suite alone: libwebsockets
        // 4.1.6 fails a client handshake in flight while another context starts in the same process
        // (docs/architecture.md, "libwebsockets").
        #expect(record.endings.isEmpty, "\(record.endings)")
        loop.send(.close(id: id, code: 1000, reason: "done"))
    }

    @Test func anUntrustedCertificateIsRefused() async throws {
        let server = try EchoServer()
        defer { server.stop() }
        let loop = try ClientLoop()
        defer { loop.shutdown() }
        let owner = RecordingOwner()
        let id = loop.makeConnectionId()
        loop.send(.open(
            id: id, owner: owner, url: try ServerURL(parsing: "wss://127.0.0.1:\(server.port)/"),
            subprotocol: "tabsync.v1.proto", backoff: Backoff(initial: .milliseconds(50), maximum: .milliseconds(100)),
            allowSelfSigned: false))
        let refused = await waitUntil(deadline: .seconds(10)) { owner.record.withLock { $0.endings.count >= 3 } }
        try #require(refused, "fewer than three failed attempts")
        let record = owner.record.withLock { $0 }
        #expect(record.opened == 0)
        #expect(record.endings.allSatisfy { $0.kind == .failedToConnect })
        loop.send(.close(id: id, code: 1000, reason: "done"))
    }
}
