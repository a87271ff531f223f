import Foundation
import TabsyncCore
import TabsyncProto
import TabsyncTestServer
import TabsyncTestSupport
import Testing

/// docs/design.md, 'Bad input': a client that reads too slowly (its queue past maxSendQueueBytes)
/// is closed 1013, leaves the workspace at once so server memory stays bounded, and resumes. Readers here are raw sockets that stop
/// reading for real (nothing read from the kernel), with the kernel's default buffers unless said
/// otherwise, so the server meets what a stalled client on a real network makes it meet: kernel
/// buffers full, lws holding the unsent part of a write, then its own queue growing.
@Suite("Slow readers", .serialized)
struct ServerSlowReaderTests {
    static let bound = 256 << 10
    /// The servers here send no liveness pings while a test runs: a stalled reader cannot answer
    /// one, so past half the default 60 s idle timeout (a test under ThreadSanitizer, on a busy
    /// machine) it would be hung up as idle before its queue reaches the bound, or would find the
    /// ping in its backlog and answer it after the server's close (a reset, not the close frame).
    static let noIdlePings: Duration = .seconds(3_600)
    /// A 4 KB url: each broadcast is a few KB, so kernel buffers fill in a few thousand ops.
    static let url = "https://example.com/" + String(repeating: "u", count: 4000)

    /// Every message of `messages` that is a tabsync message: all must be (a close frame spliced
    /// into a frame, or a frame cut short, would not decode), else the test fails.
    static func decoded(_ messages: [RawWebSocket.Message], sourceLocation: SourceLocation = #_sourceLocation)
        -> [Tabsync_V1_ServerMessage.OneOf_Message] {
        messages.compactMap { message in
            switch message {
            case .text(let text):
                guard let decoded = try? WireFormat.json.decodeServerMessage(Array(text.utf8)).message else {
                    Issue.record("a frame that is no whole ServerMessage: \(text.prefix(80))…", sourceLocation: sourceLocation)
                    return nil
                }
                return decoded
            case .binary(let bytes):
                Issue.record("a binary frame on tabsync.v1.json (\(bytes.count) bytes)", sourceLocation: sourceLocation)
                return nil
            case .close, .ping, .pong:
                return nil
            }
        }
    }

    /// The versions of the `Applied`s among `messages`, in arrival order.
    static func versions(_ messages: [Tabsync_V1_ServerMessage.OneOf_Message]) -> [UInt64] {
        messages.compactMap { if case .applied(let a) = $0 { return a.version } else { return nil } }
    }

    /// Sends big updates one at a time (each waits for its `Applied` at the writer and the watcher,
    /// so every broadcast is written before the next op: the server's queue for a reader grows only
    /// once the kernel and lws hold all they can for it) until the server closes a slow reader.
    /// Returns the ops sent and the last peer list the watcher saw.
    static func sendUntilASlowReaderIsClosed(
        _ server: TestServer, writer: TestClient, watcher: TestClient
    ) throws -> (sent: Int, peers: [String]) {
        var sent = 0
        var peers: [String] = []
        while try server.metric("tabsync_slow_consumer_closes_total") < 1 {
            try #require(sent < 20_000, "no slow reader was closed after \(sent) ops")
            for _ in 0..<20 {
                try writer.submit(.update(TabUpdate(tabId: "t2", url: Self.url + String(sent % 10))))
                sent += 1
                _ = try writer.nextApplied()
                _ = try watcher.next { message -> Bool? in
                    if case .presence(let p) = message { peers = p.peers.map(\.clientID) }
                    if case .applied = message { return true }
                    return nil
                }
            }
        }
        return (sent, peers)
    }

    /// The peer list the watcher sees once it no longer names `clientId`, or its last one after
    /// `deadline`.
    static func peersWithout(_ clientId: String, watcher: TestClient, since peers: [String], deadline: Duration) -> [String] {
        var peers = peers
        _ = waitUntil(deadline: deadline) {
            if let message = try? watcher.receive(timeout: 0.05), case .presence(let p) = message {
                peers = p.peers.map(\.clientID)
            }
            return !peers.contains(clientId)
        }
        return peers
    }

    /// The stall lasts 7 s past the bound: longer than the 5 s lws was given before, shorter
    /// than the grace configured here.
    @Test func aStalledReaderFindsClose1013WithinItsGraceAndLeavesAtOnce() throws {
        let server = try TestServer {
            $0.limits.maxSendQueueBytes = Self.bound
            $0.limits.maxOpsPerSecond = 100_000
            $0.idleTimeout = Self.noIdlePings
            $0.slowCloseGrace = .seconds(30)
        }
        defer { server.stop() }
        let writer = try seed(server, workspace: "stall", format: .proto)
        let (stalled, _) = try TestClient.joined(port: server.port, workspace: "stall", clientId: "stalled")
        let (watcher, _) = try TestClient.joined(port: server.port, workspace: "stall", clientId: "watcher", format: .proto)
        // The stalled one reads nothing from here on.
        let (sent, seen) = try Self.sendUntilASlowReaderIsClosed(server, writer: writer, watcher: watcher)
        let stallEnds = Date().addingTimeInterval(7)
        #expect(try server.metric("tabsync_slow_consumer_closes_total") == 1)
        // It leaves the workspace at once, while its connection still waits for it to read: the
        // watcher's presence drops it, and its queued frames are gone (memory stays bounded).
        let peers = Self.peersWithout("stalled", watcher: watcher, since: seen, deadline: .seconds(3))
        #expect(!peers.contains("stalled"), "presence still lists the stalled reader: \(peers)")
        #expect(try server.waitForMetric("tabsync_send_queue_bytes", atMost: 0) == 0)
        // Its connection is not held open for the test's sake: it ends once lws has the close frame
        // out, which the socket buffers allow long before the reader reads (polling the count
        // through the stall, without this test reading, 5 of 6 runs saw it fall
        // to 2, 0.4 to 3.0 s after this point), or else when the grace is over. Reading it once
        // here as "still open" was this test's flake. The writer and the watcher stay; nothing is
        // counted twice.
        let open = try server.metric("tabsync_connections")
        #expect((2...3).contains(open), "\(open) connections: the writer or the watcher was dropped")
        // The rest of the stall (the scenario, not a wait for the server): the watcher keeps reading.
        while Date() < stallEnds { _ = try? watcher.receive(timeout: 0.1) }
        // Reading again at last, it finds whole frames in order, then the close 1013 with a reason
        // (never an abrupt end, never a close spliced into a frame), then the end of the stream.
        let (code, reason, before) = try stalled.socket.receiveClose(timeout: 20)
        #expect(code == 1013)
        #expect(!reason.isEmpty)
        let versions = Self.versions(Self.decoded(before))
        #expect(!versions.isEmpty)
        #expect(versions == Array((versions.first ?? 0)..<((versions.first ?? 0) + UInt64(versions.count))),
                "a gap in what reached the stalled reader")
        #expect(versions.count < sent, "it got everything: it was not stalled")
        #expect(stalled.socket.waitForEOF(timeout: 10))
        // Nothing was lost for anyone else.
        #expect(try #require(try server.snapshot("stall")).version == 3 + UInt64(sent))
    }

    @Test func aStalledReaderThatNeverReadsIsDroppedOnceItsGraceIsOver() throws {
        let server = try TestServer {
            $0.limits.maxSendQueueBytes = Self.bound
            $0.limits.maxOpsPerSecond = 100_000
            $0.idleTimeout = Self.noIdlePings
            $0.slowCloseGrace = .seconds(1)
        }
        defer { server.stop() }
        let writer = try seed(server, workspace: "gone", format: .proto)
        let (stalled, _) = try TestClient.joined(port: server.port, workspace: "gone", clientId: "stalled")
        let (watcher, _) = try TestClient.joined(port: server.port, workspace: "gone", clientId: "watcher", format: .proto)
        _ = try Self.sendUntilASlowReaderIsClosed(server, writer: writer, watcher: watcher)
        // It never reads again: its connection goes once the grace is over, and nothing is held for it.
        #expect(try server.waitForMetric("tabsync_connections", atMost: 2, timeout: 10) == 2)
        #expect(try server.metric("tabsync_send_queue_bytes") == 0)
        _ = stalled
    }

    @Test func aReaderThatStallsUnderItsBoundCatchesUpUncut() throws {
        let server = try TestServer {
            $0.limits.maxSendQueueBytes = Self.bound
            $0.limits.maxOpsPerSecond = 100_000
            $0.idleTimeout = Self.noIdlePings
        }
        defer { server.stop() }
        let writer = try seed(server, workspace: "pause", format: .proto)
        // A small receive buffer: the server's queue, not the kernel, holds most of the backlog.
        let paused = try TestClient(port: server.port, format: .json, receiveBuffer: 4096)
        try paused.send(Tabsync_V1_ClientMessage(hello: Tabsync_V1_Hello(workspace: "pause", clientId: "paused")))
        _ = try paused.next { if case .welcome(let w) = $0 { return w } else { return nil } }
        // It stops reading while ops go out one at a time, until the server holds a quarter of the
        // bound for it (each op adds about 4 KB, so it never gets near the bound).
        var sent = 0
        while try server.metric("tabsync_send_queue_bytes") < Double(Self.bound / 4) {
            try #require(sent < 2_000, "the server never queued anything for the paused reader")
            try writer.submit(.update(TabUpdate(tabId: "t2", url: Self.url + String(sent % 10))))
            sent += 1
            _ = try writer.nextApplied()
        }
        // It reads again: every op, in order, and the connection goes on.
        var versions: [UInt64] = []
        while versions.count < sent {
            if case .applied(let applied) = try paused.receive(timeout: 10) { versions.append(applied.version) }
        }
        #expect(versions == Array(4..<(4 + UInt64(sent))))
        let seq = try paused.submit(.update(TabUpdate(tabId: "t1", title: "still here")))
        let own = try paused.nextApplied()
        #expect(own.seq == seq && own.clientId == "paused")
        #expect(try server.metric("tabsync_slow_consumer_closes_total") == 0)
    }
}
