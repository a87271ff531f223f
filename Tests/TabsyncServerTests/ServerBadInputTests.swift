import Foundation
import TabsyncCore
import TabsyncProto
import TabsyncTestServer
import TabsyncTestSupport
import Testing

/// The table of docs/design.md, 'Bad input', row by row (auth and store rows
/// excepted): each sends the bad input over a real socket, checks the answer, then checks that the
/// workspace is intact.
@Suite("Bad input", .serialized)
struct ServerBadInputTests {
    /// The seeded workspace: t1, t2, t3 at version 3, t1 active.
    static func expectIntact(_ server: TestServer, _ id: String = "bad", version: UInt64 = 3,
                             sourceLocation: SourceLocation = #_sourceLocation) throws {
        let snapshot = try #require(try server.snapshot(id), sourceLocation: sourceLocation)
        #expect(snapshot.version == version, sourceLocation: sourceLocation)
        #expect(Array(snapshot.tabs.prefix(3).map(\.id)) == ["t1", "t2", "t3"], sourceLocation: sourceLocation)
        #expect(snapshot.activeTabId == "t1", sourceLocation: sourceLocation)
        #expect(snapshot.invariantViolations(limits: .default).isEmpty, sourceLocation: sourceLocation)
    }

    /// Reads the Error and the close code that follows it.
    static func expectError(_ socket: RawWebSocket, _ code: Tabsync_V1_ErrorCode, close: UInt16,
                            sourceLocation: SourceLocation = #_sourceLocation) throws {
        let (closeCode, _, before) = try socket.receiveClose()
        #expect(closeCode == close, sourceLocation: sourceLocation)
        let errors = before.compactMap { message -> Tabsync_V1_Error? in
            guard case .text(let text) = message,
                  let decoded = try? WireFormat.json.decodeServerMessage(Array(text.utf8)),
                  case .error(let error) = decoded.message else { return nil }
            return error
        }
        #expect(errors.map(\.code) == [code], sourceLocation: sourceLocation)
    }

    @Test(arguments: [
        #"{"submit":{"seq":"1","op":{"remove":{"tabId":"t1"}}}}"#,
        #"{"focus":{"tabId":"t1"}}"#,
        #"{}"#,
    ])
    func aMessageBeforeHelloIsAProtocolError(first: String) throws {
        let server = try TestServer()
        defer { server.stop() }
        _ = try seed(server, workspace: "bad")
        let socket = try RawWebSocket.open(port: server.port, subprotocol: "tabsync.v1.json")
        try socket.send(text: first)
        try Self.expectError(socket, .protocolError, close: 4400)
        try Self.expectIntact(server)
    }

    @Test(arguments: [
        #"{"hello":{"workspace":"bad","clientId":"c2"}}"#,
        #"{}"#,
    ])
    func aSecondHelloOrAnEmptyMessageAfterHelloIsAProtocolError(second: String) throws {
        let server = try TestServer()
        defer { server.stop() }
        _ = try seed(server, workspace: "bad")
        let socket = try RawWebSocket.open(port: server.port, subprotocol: "tabsync.v1.json")
        try socket.send(text: #"{"hello":{"workspace":"bad","clientId":"c2"}}"#)
        guard case .text(let welcome) = try socket.receive(), welcome.hasPrefix(#"{"welcome""#) else {
            Issue.record("no welcome")
            return
        }
        try socket.send(text: second)
        try Self.expectError(socket, .protocolError, close: 4400)
        try Self.expectIntact(server)
    }

    @Test(arguments: [
        #"{"hello":{"workspace":"bad id","clientId":"c2"}}"#,
        #"{"hello":{"workspace":"","clientId":"c2"}}"#,
        #"{"hello":{"workspace":"bad","clientId":""}}"#,
        #"{"hello":{"workspace":"bad","clientId":"c/2"}}"#,
        #"{"hello":{"workspace":"bad","clientId":"c2","clientName":"evil\u001b[2J"}}"#,
        "{\"hello\":{\"workspace\":\"bad\",\"clientId\":\"c2\",\"clientName\":\"\(String(repeating: "n", count: 65))\"}}",
    ])
    func aHelloWithInvalidFieldsIsRefused(hello: String) throws {
        let server = try TestServer()
        defer { server.stop() }
        _ = try seed(server, workspace: "bad")
        let socket = try RawWebSocket.open(port: server.port, subprotocol: "tabsync.v1.json")
        try socket.send(text: hello)
        try Self.expectError(socket, .invalidArgument, close: 4400)
        try Self.expectIntact(server)
    }

    @Test func noHelloWithinTheTimeoutIsAProtocolError() throws {
        let server = try TestServer { $0.helloTimeout = .milliseconds(300) }
        defer { server.stop() }
        _ = try seed(server, workspace: "bad")
        let socket = try RawWebSocket.open(port: server.port, subprotocol: "tabsync.v1.json")
        // Within receiveClose's deadline (5 s, for a 300 ms timeout): the driver's one timer fired.
        try Self.expectError(socket, .protocolError, close: 4400)
        try Self.expectIntact(server)
    }

    enum Garbage: String, CaseIterable, Sendable {
        case notJSON, unknownField, unknownEnvelopeField, wrongType, binaryOnJSON, textOnProto, notProtobuf, invalidUTF8
    }

    @Test(arguments: Garbage.allCases)
    func anUndecodableFrameCloses1007(garbage: Garbage) throws {
        let server = try TestServer()
        defer { server.stop() }
        let seeder = try seed(server, workspace: "bad")
        let proto = [.textOnProto, .notProtobuf].contains(garbage)
        let socket = try RawWebSocket.open(port: server.port, subprotocol: proto ? "tabsync.v1.proto" : "tabsync.v1.json")
        if garbage != .notJSON && !proto {
            try socket.send(text: #"{"hello":{"workspace":"bad","clientId":"g"}}"#)
            _ = try socket.receive()
        }
        switch garbage {
        case .notJSON: try socket.send(text: "hello?")
        case .unknownField: try socket.send(text: #"{"submit":{"seq":"1","op":{"remove":{"tabId":"t1"}},"extra":1}}"#)
        case .unknownEnvelopeField: try socket.send(text: #"{"bogus":{}}"#)
        case .wrongType: try socket.send(text: #"{"submit":{"seq":"one"}}"#)
        case .binaryOnJSON: try socket.send(binary: Array(#"{"focus":{}}"#.utf8))
        case .textOnProto: try socket.send(text: "x")
        case .notProtobuf: try socket.send(binary: [0xFF, 0xFF, 0xFF, 0xFF])
        case .invalidUTF8: try socket.sendFrame(opcode: 0x1, payload: [0x7B, 0xC3, 0x28, 0x7D])
        }
        #expect(try socket.receiveClose().code == 1007)
        try Self.expectIntact(server)
        // Others are unaffected.
        try seeder.submit(.activate(.tabId("t2")))
        #expect(try seeder.nextApplied().version == 4)
    }

    @Test(arguments: [false, true])
    func aMessageOverTheSizeLimitCloses1009(fragmented: Bool) throws {
        let server = try TestServer { $0.limits.maxFrameBytes = 64 << 10 }
        defer { server.stop() }
        _ = try seed(server, workspace: "bad")
        let socket = try RawWebSocket.open(port: server.port, subprotocol: "tabsync.v1.json")
        try socket.send(text: #"{"hello":{"workspace":"bad","clientId":"big"}}"#)
        _ = try socket.receive()
        let title = String(repeating: "x", count: 100 << 10)
        let message = Array(#"{"submit":{"seq":"1","op":{"add":{"tab":{"id":"big","title":"\#(title)"}}}}}"#.utf8)
        // The server may close before the last fragment is out: a failed send is fine, the close is what counts.
        if fragmented {
            try? socket.sendFragmented(opcode: 0x1, payload: message, fragmentSize: 4096)
        } else {
            try? socket.send(text: String(decoding: message, as: UTF8.self))
        }
        #expect(try socket.receiveClose().code == 1009)
        try Self.expectIntact(server)
    }

    @Test func aLargeFragmentedMessageUnderTheLimitIsReassembled() throws {
        let server = try TestServer()
        defer { server.stop() }
        _ = try seed(server, workspace: "bad")
        let socket = try RawWebSocket.open(port: server.port, subprotocol: "tabsync.v1.json")
        try socket.send(text: #"{"hello":{"workspace":"bad","clientId":"frag"}}"#)
        _ = try socket.receive()
        let url = "https://example.com/" + String(repeating: "p", count: 4000)
        let message = Array(#"{"submit":{"seq":"1","op":{"add":{"tab":{"id":"t4","title":"\#(String(repeating: "é", count: 200))","url":"\#(url)"}}}}}"#.utf8)
        try socket.sendFragmented(opcode: 0x1, payload: message, fragmentSize: 1000)
        var applied = false
        while !applied {
            guard case .text(let text) = try socket.receive() else { continue }
            applied = text.hasPrefix(#"{"applied""#)
        }
        let snapshot = try #require(try server.snapshot("bad"))
        #expect(snapshot.tabs.last?.url == url)
    }

    @Test func invalidOpsAreRejectedAndTheConnectionStays() throws {
        let server = try TestServer { $0.limits.maxTabs = 5 }
        defer { server.stop() }
        _ = try seed(server, workspace: "bad")
        let (c, _) = try TestClient.joined(port: server.port, workspace: "bad", clientId: "c")
        let cases: [(TabsyncCore.Operation, ErrorCode)] = [
            (.add(tab: Tab(id: "bad id"), place: .end, activate: false), .invalidArgument),
            (.add(tab: Tab(id: "t9", title: "evil\u{1B}[31mred"), place: .end, activate: false), .invalidArgument),
            (.update(TabUpdate(tabId: "t1", badge: "\u{9B}2J")), .invalidArgument),
            (.move(tabId: "t1", place: .key("not a key!")), .invalidArgument),
            (.rekey(keys: []), .invalidArgument),
            (.update(TabUpdate(tabId: "t1")), .invalidArgument),
            (.activate(.index(99)), .invalidArgument),
            (.remove(tabId: "nope"), .tabGone),
            (.move(tabId: "nope", place: .end), .tabGone),
            (.add(tab: .named("t2"), place: .end, activate: false), .tabExists),
        ]
        for (op, code) in cases {
            let seq = try c.submit(op)
            let rejected = try c.nextRejected()
            #expect(rejected.seq == seq)
            #expect(ErrorCode(rejected.code) == code, "\(op)")
            #expect(!rejected.message.isEmpty)
        }
        try Self.expectIntact(server)
        // Locked, not editable, over the tab limit; each needs a state change first.
        try c.submit(.update(TabUpdate(tabId: "t3", locked: true)))
        _ = try c.nextApplied()
        try c.submit(.remove(tabId: "t3"))
        #expect(try c.nextRejected().code == .locked)
        try c.submit(.add(tab: .named("t4"), place: .end, activate: false))
        try c.submit(.add(tab: .named("t5"), place: .end, activate: false))
        _ = try c.nextApplied()
        _ = try c.nextApplied()
        try c.submit(.add(tab: .named("t6"), place: .end, activate: false))
        #expect(try c.nextRejected().code == .limitExceeded)
        try c.submit(.setEditable(false))
        _ = try c.nextApplied()
        try c.submit(.remove(tabId: "t4"))
        #expect(try c.nextRejected().code == .notEditable)
        try Self.expectIntact(server, version: 7)
        // The connection stays usable.
        try c.submit(.activate(.tabId("t2")))
        #expect(try c.nextApplied().version == 8)
    }

    @Test func anOpRateOverTheLimitIsRejectedAndSustainedAbuseCloses1008() throws {
        let server = try TestServer {
            $0.limits.maxOpsPerSecond = 5
            $0.rateLimitStrikes = 2
        }
        defer { server.stop() }
        _ = try seed(server, workspace: "bad")
        // The session's token bucket is full (5) when it connects, after `opened`.
        let opened = ContinuousClock.now
        let (c, _) = try TestClient.joined(port: server.port, workspace: "bad", clientId: "c")
        for _ in 0..<20 { try c.submit(.activate(.tabId("t1"))) }
        var rateLimited = 0
        var applied = 0
        for _ in 0..<20 {
            let message = try c.next { message -> Bool? in
                switch message {
                case .applied: return true
                case .rejected(let r): return r.code == .rateLimited ? false : nil
                default: return nil
                }
            }
            if message { applied += 1 } else { rateLimited += 1 }
        }
        // 5 tokens at the start, plus what refilled while the burst was in flight: at most 5 a
        // second for as long as the session had been open when the last answer came. Both bounds
        // hold however slow the machine is; an unlimited server applies all 20 at once.
        let open = ContinuousClock.now - opened
        #expect(applied >= 5)
        #expect(Double(applied) <= 5 + 5 * open.seconds, "\(applied) applied within \(open)")
        #expect(rateLimited == 20 - applied)
        // Keep hammering for over a second: closed 1008.
        var closed: UInt16?
        let deadline = Date().addingTimeInterval(4)
        while closed == nil && Date() < deadline {
            do {
                for _ in 0..<10 { try c.submit(.activate(.tabId("t1"))) }
                // Read until the server has been quiet for 50 ms (that paces the hammering too).
                while true {
                    if case .close(let code, _) = try c.socket.receive(timeout: 0.05) { closed = code; break }
                }
            } catch RawWebSocket.Failure.timeout {
                continue
            } catch {
                // A write can fail (the server already closed) before the close frame is read:
                // read what the server sent before it went.
                while closed == nil, let frame = try? c.socket.receive(timeout: 0.5) {
                    if case .close(let code, _) = frame { closed = code }
                }
                break
            }
        }
        #expect(closed == 1008)
        // Every refusal of the burst, and at least one more in the next second (two strikes).
        #expect(try server.waitForMetric(#"tabsync_ops_rejected_total{code="RATE_LIMITED"}"#, atLeast: Double(rateLimited + 1))
                >= Double(rateLimited + 1))
        try Self.expectIntact(server, version: 3 + UInt64(try server.snapshot("bad")!.version - 3))
    }

    @Test func aSlowReaderIsClosed1013WhileAnotherKeepsReceiving() throws {
        // No liveness pings, and a grace longer than the test: the slow reader reads again only
        // after 100 more ops, which outlast the default 5 s grace (and reach the 30 s ping) under
        // ThreadSanitizer; see ServerSlowReaderTests.noIdlePings.
        let server = try TestServer {
            $0.limits.maxSendQueueBytes = 256 << 10
            $0.limits.maxOpsPerSecond = 100_000
            $0.idleTimeout = ServerSlowReaderTests.noIdlePings
            $0.slowCloseGrace = .seconds(120)
        }
        defer { server.stop() }
        let writer = try seed(server, workspace: "bad", format: .proto)
        let slow = try TestClient(port: server.port, format: .json, receiveBuffer: 4096)
        try slow.send(Tabsync_V1_ClientMessage(hello: Tabsync_V1_Hello(workspace: "bad", clientId: "slow")))
        let (fast, _) = try TestClient.joined(port: server.port, workspace: "bad", clientId: "fast", format: .proto)
        // The slow one stops reading; the writer sends big updates (4 KB urls, so the kernel's socket
        // buffers fill fast) until the server gives up on it.
        let url = "https://example.com/" + String(repeating: "u", count: 4000)
        var sent = 0
        var received = 0
        while try server.metric("tabsync_slow_consumer_closes_total") < 1 && sent < 20_000 {
            for _ in 0..<10 {
                try writer.submit(.update(TabUpdate(tabId: "t2", url: url + String(sent % 10))))
                sent += 1
            }
            for _ in 0..<10 {
                _ = try fast.nextApplied()
                _ = try writer.nextApplied()  // the writer is a reader too
                received += 1
            }
        }
        print("slow-reader test: \(sent) ops before the close; server latency sum \(try server.metric("tabsync_op_latency_seconds_sum")) s")
        #expect(try server.metric("tabsync_slow_consumer_closes_total") == 1)
        // The fast reader keeps full speed after the close.
        for _ in 0..<100 {
            try writer.submit(.update(TabUpdate(tabId: "t2", title: "after")))
            sent += 1
        }
        while received < sent {
            _ = try fast.nextApplied()
            _ = try writer.nextApplied()
            received += 1
        }
        #expect(received == sent)
        // The slow reader, reading at last, finds the close 1013 after what was already on its way.
        #expect(try slow.socket.receiveClose(timeout: 10).code == 1013)
        #expect(try server.metric("tabsync_send_queue_bytes") < Double(256 << 10))
        let snapshot = try #require(try server.snapshot("bad"))
        #expect(snapshot.version == 3 + UInt64(sent))
        #expect(snapshot.tabs.map(\.id) == ["t1", "t2", "t3"])
    }

    /// The core's keepalive over real sockets (ServerCore+Keepalive.swift): a client that never
    /// answers pings is dropped within the idle timeout + 10% of its last frame; one that answers
    /// them (and sends nothing else) stays past twice the idle timeout.
    @Test func aSilentConnectionIsClosedWithinTheIdleTimeoutAndALiveOneIsNot() throws {
        let idle = 5.0
        let server = try TestServer { $0.idleTimeout = .seconds(idle) }
        defer { server.stop() }
        _ = try seed(server, workspace: "bad")
        // Before its Hello went and after its Welcome came: the server heard its last frame in
        // between, so the bounds below hold however long the join took.
        let beforeHello = Date()
        let (quiet, _) = try TestClient.joined(port: server.port, workspace: "bad", clientId: "quiet")
        let afterWelcome = Date()
        quiet.socket.answersPings = false
        let (chatty, _) = try TestClient.joined(port: server.port, workspace: "bad", clientId: "chatty")
        var quietClosedAt: Date?
        var lastPeers: [String] = []
        // Wait for the silent one to go, while the other reads (and so answers pings), and keep
        // the other past twice the idle timeout.
        while Date().timeIntervalSince(afterWelcome) < 2.5 * idle {
            if quietClosedAt == nil, quiet.socket.waitForEOF(timeout: 0.02) { quietClosedAt = Date() }
            if let message = try? chatty.receive(timeout: 0.02), case .presence(let p) = message {
                lastPeers = p.peers.map(\.clientID)
            }
        }
        let closedAt = try #require(quietClosedAt)
        #expect(closedAt.timeIntervalSince(beforeHello) >= idle)
        #expect(closedAt.timeIntervalSince(afterWelcome) <= idle * 1.1)
        // The one answering pings is still there, and presence dropped the silent one.
        #expect(!lastPeers.contains("quiet") && lastPeers.contains("chatty"))
        #expect(try server.metric("tabsync_idle_timeouts_total") == 1)
        #expect(try server.metric("tabsync_keepalive_pings_total") >= 3)
        try chatty.send(.init(focus: .init(tabId: "")))
        #expect(!chatty.socket.waitForEOF(timeout: 0.2))
        try Self.expectIntact(server)
    }
}
