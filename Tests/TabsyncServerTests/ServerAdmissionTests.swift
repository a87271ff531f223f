import Foundation
import Logging
import TabsyncServer
import TabsyncStore
import TabsyncTestServer
import TabsyncTestSupport
import Testing

/// Who may connect, over real sockets: per-address caps under a flood from 127.0.0.1 while
/// 127.0.0.2 is served, browser origins at the handshake, and the refusal to listen beyond
/// loopback without authentication.
@Suite("Admission", .serialized)
struct ServerAdmissionTests {
    /// Tries an upgrade from `source`: the socket when upgraded, nil when the server hung up at
    /// accept (or answered something else).
    static func attempt(_ server: TestServer, from source: String) -> RawWebSocket? {
        guard case .upgraded(let socket, _)? = try? RawWebSocket.connect(
            port: server.port, subprotocols: ["tabsync.v1.json"], timeout: 5, source: source) else { return nil }
        return socket
    }

    /// A refusal counter, read from 127.0.0.3 (an address no limit in these tests has touched).
    static func refused(_ server: TestServer, _ reason: String) throws -> Double {
        let series = "tabsync_connections_refused_total{reason=\"\(reason)\"} "
        let (_, body) = try httpGet(port: server.port, path: "/metrics", source: "127.0.0.3")
        let line = body.split(separator: "\n").first { $0.hasPrefix(series) }
        return line.flatMap { Double($0.dropFirst(series.count)) } ?? -1
    }

    @Test func perAddressConnectionCapHoldsUnderAFloodWhileAnotherAddressIsServed() throws {
        let server = try TestServer { configuration in
            configuration.perIPLimits = .init(maxConnections: 4, handshakesPerSecond: 0, handshakeBurst: 0)
        }
        defer { server.stop() }
        var held: [RawWebSocket] = []
        var refusedCount = 0
        for _ in 0..<30 {
            if let socket = Self.attempt(server, from: "127.0.0.1") { held.append(socket) } else { refusedCount += 1 }
        }
        #expect(held.count == 4, "exactly the cap is admitted from one address")
        #expect(refusedCount == 26)
        #expect(try Self.refused(server, "ip_connections") == 26)

        // Another address is not affected: it joins and edits while the flood holds its sockets.
        let (other, _) = try TestClient.joined(port: server.port, workspace: "cap", clientId: "b", source: "127.0.0.2")
        try other.submit(.add(tab: .named("t1"), place: .end, activate: true))
        #expect(try other.nextApplied().version == 1)

        // A slot freed by a close is given back.
        try held.removeLast().sendClose()
        #expect(waitUntil(deadline: .seconds(5)) { Self.attempt(server, from: "127.0.0.1") != nil })
        withExtendedLifetime(held) {}
    }

    @Test func perAddressHandshakeRateHoldsUnderAFloodWhileAnotherAddressIsServed() throws {
        let server = try TestServer { configuration in
            configuration.perIPLimits = .init(maxConnections: 0, handshakesPerSecond: 2, handshakeBurst: 3)
        }
        defer { server.stop() }
        let started = ContinuousClock.now
        var admitted = 0
        for _ in 0..<40 {
            // Each admitted socket is closed at once: only the rate limits this flood.
            if let socket = Self.attempt(server, from: "127.0.0.1") {
                admitted += 1
                try? socket.sendClose()
            }
        }
        let (seconds, attoseconds) = (ContinuousClock.now - started).components
        let elapsed = Double(seconds) + Double(attoseconds) / 1e18
        #expect(admitted >= 3, "the burst goes through")
        #expect(Double(admitted) <= 3 + 2 * elapsed + 1, "\(admitted) admitted in \(elapsed) s")
        #expect(try Self.refused(server, "ip_handshake_rate") == Double(40 - admitted))

        let (other, _) = try TestClient.joined(port: server.port, workspace: "rate", clientId: "b", source: "127.0.0.2")
        try other.submit(.add(tab: .named("t1"), place: .end, activate: true))
        #expect(try other.nextApplied().version == 1)
    }

    @Test func aForeignBrowserOriginGets403() throws {
        // Default on a loopback bind without auth: loopback pages only.
        let server = try TestServer()
        defer { server.stop() }
        for (origin, allowed) in [
            ("https://evil.example", false), ("null", false), ("http://localhost:5173", true),
            ("http://127.0.0.1:8080", true), (nil, true),
        ] as [(String?, Bool)] {
            let result = try RawWebSocket.connect(
                port: server.port, subprotocols: ["tabsync.v1.json"], origin: origin)
            switch result {
            case .upgraded: #expect(allowed, "\(origin ?? "no origin") was let in")
            case .refused(let status, _): #expect(!allowed && status == 403, "\(origin ?? "no origin"): \(status)")
            }
        }
        #expect(try Self.refused(server, "origin") == 2)

        // An allow-list admits exactly its origins.
        let listed = try TestServer { $0.allowedOrigins = ["https://tabs.example.com"] }
        defer { listed.stop() }
        for (origin, allowed) in [
            ("https://tabs.example.com", true), ("HTTPS://TABS.EXAMPLE.COM:443", true),
            ("https://tabs.example.com.evil.example", false), ("http://localhost:5173", false),
        ] {
            let result = try RawWebSocket.connect(port: listed.port, subprotocols: ["tabsync.v1.json"], origin: origin)
            if case .refused(let status, _) = result {
                #expect(!allowed && status == 403, "\(origin): \(status)")
            } else {
                #expect(allowed, "\(origin) was let in")
            }
        }
    }

    @Test func theServerRefusesToListenBeyondLoopbackWithoutAuthentication() throws {
        var configuration = Server.Configuration(host: "0.0.0.0", port: 0)
        let refused = Server(configuration: configuration, store: MemoryStore(), logger: Logger(label: "test"))
        #expect(throws: Server.Error.unauthenticatedExposure(host: "0.0.0.0")) { _ = try refused.start() }

        // Asked explicitly: it starts, and with auth off beyond loopback no browser origin gets in.
        configuration.insecureNoAuth = true
        let open = Server(configuration: configuration, store: MemoryStore(), logger: Logger(label: "test"))
        let port = try open.start()
        defer { open.shutdown() }
        let page = try RawWebSocket.connect(port: port, subprotocols: ["tabsync.v1.json"], origin: "http://localhost:3000")
        guard case .refused(403, _) = page else {
            Issue.record("a page got in: \(page)")
            return
        }
        let program = try RawWebSocket.connect(port: port, subprotocols: ["tabsync.v1.json"])
        guard case .upgraded = program else {
            Issue.record("a client without Origin was refused: \(program)")
            return
        }
    }

    @Test func theExecutableTakesTheLimitsAndOriginsFromItsFlags() throws {
        let child = try ServerExecutableTests.Child(
            arguments: ["--port", "0", "--memory", "--max-connections-per-ip", "1", "--allow-origin", "https://tabs.example.com"])
        defer { child.kill() }
        _ = try child.waitForListening()
        guard case .upgraded(let first, _) = try RawWebSocket.connect(
            port: child.port, subprotocols: ["tabsync.v1.json"], origin: "https://tabs.example.com") else {
            Issue.record("the listed origin was refused")
            return
        }
        #expect(throws: (any Error).self, "a second connection from 127.0.0.1") {
            _ = try RawWebSocket.connect(port: child.port, subprotocols: ["tabsync.v1.json"])
        }
        let page = try RawWebSocket.connect(
            port: child.port, subprotocols: ["tabsync.v1.json"], source: "127.0.0.2", origin: "http://localhost:3000")
        guard case .refused(403, _) = page else {
            Issue.record("an unlisted origin got in: \(page)")
            return
        }
        withExtendedLifetime(first) {}

        for bad in [["--allow-origin", "tabs.example.com"], ["--tls-cert", "/nonexistent.pem", "--tls-key", "/nonexistent.key"]] {
            let refused = try ServerExecutableTests.Child(arguments: ["--port", "0", "--memory"] + bad)
            #expect(refused.waitForExit(timeout: 10) != 0, "\(bad)")
        }
    }

    @Test func theExecutableSaysWhyInOneLineAndStartsWithInsecureNoAuth() throws {
        let child = try ServerExecutableTests.Child(arguments: ["--host", "0.0.0.0", "--port", "0", "--memory"])
        defer { child.kill() }
        #expect(child.waitForExit(timeout: 10) == 1)
        let stderr = String(decoding: child.stderr.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let lines = stderr.split(separator: "\n").filter { $0.contains("refusing") }
        #expect(lines.count == 1, "\(stderr)")
        #expect(lines.first?.contains("refusing to listen on 0.0.0.0 without authentication") == true, "\(stderr)")
        #expect(lines.first?.contains("--insecure-no-auth") == true)

        let open = try ServerExecutableTests.Child(
            arguments: ["--host", "0.0.0.0", "--port", "0", "--memory"], environment: ["TABSYNC_INSECURE_NO_AUTH": "1"])
        defer { open.kill() }
        #expect(try open.waitForListening().hasPrefix("listening on ws://0.0.0.0:"))
        let (client, _) = try TestClient.joined(port: open.port, workspace: "open", clientId: "a")
        try client.submit(.add(tab: .named("t1"), place: .end, activate: true))
        #expect(try client.nextApplied().version == 1)
    }
}
