import Foundation
import TabsyncCore
import TabsyncProto
@testable import TabsyncServer
import TabsyncTestServer
import Testing

/// Frames queued to one connection during one loop iteration leave in one send (`OutBatch`, whose
/// framing is tested in TabsyncLoopTests), on both event loops; the peer still reads every message
/// whole and in order.
@Suite("Write coalescing", .serialized)
struct ServerWriteCoalescingTests {
    /// 60 submits arrive in one TCP write, so the server applies several in one loop iteration and
    /// the watcher gets their `Applied`s in fewer writes than messages; each one still parses, in
    /// version order, with titles long enough to need the 16-bit length header.
    @Test(arguments: [Server.Configuration.LoopBackend.epoll, .poll], [WireFormat.json, .proto])
    func opsAppliedTogetherReachAPeerInFewerWritesAndInOrder(loop: Server.Configuration.LoopBackend, format: WireFormat) throws {
        let server = try TestServer(configure: { $0.eventLoop = loop })
        defer { server.stop() }
        let (writer, _) = try TestClient.joined(port: server.port, workspace: "burst", clientId: "w", format: format)
        let (watcher, _) = try TestClient.joined(port: server.port, workspace: "burst", clientId: "v", format: format)
        let writesBefore = try server.metric("tabsync_writes_out_total")
        let messagesBefore = try server.metric("tabsync_messages_out_total")

        let count = 60
        let title = String(repeating: "t", count: 150)
        var burst: [UInt8] = []
        for i in 1...count {
            let op = TabsyncCore.Operation.add(tab: Tab(id: "b\(i)", title: "\(title)\(i)"), place: .end, activate: false)
            let bytes = format.encode(Tabsync_V1_ClientMessage(submit: Tabsync_V1_Submit(seq: UInt64(i), op: op)))
            burst += RawWebSocket.maskedFrame(opcode: format.usesTextFrames ? 0x1 : 0x2, payload: bytes)
        }
        try writer.socket.writeAll(burst)

        var versions: [UInt64] = []
        for i in 1...count {
            let applied = try watcher.nextApplied()
            #expect(applied.clientId == "w" && applied.seq == UInt64(i))
            guard case .add(let tab, _, _) = applied.op else { Issue.record("not an add: \(applied.op)"); continue }
            #expect(tab.title == "\(title)\(i)")
            versions.append(applied.version)
        }
        #expect(versions == Array(versions[0]...versions[0] + UInt64(count - 1)))
        for _ in 1...count { _ = try writer.nextApplied() }

        let messages = try server.waitForMetric("tabsync_messages_out_total", atLeast: messagesBefore + Double(2 * count))
        let writes = try server.metric("tabsync_writes_out_total")
        #expect(messages - messagesBefore >= Double(2 * count))
        #expect(writes - writesBefore < messages - messagesBefore, "\(writes - writesBefore) writes for \(messages - messagesBefore) messages")
    }

    /// A reader that stops reading with a small socket buffer makes the kernel take only part of a
    /// batch: lws keeps the rest, the queue waits behind it, and once the reader drains its socket
    /// every message arrives whole and in order (no frame cut or interleaved at a batch boundary).
    @Test(arguments: [Server.Configuration.LoopBackend.epoll, .poll])
    func aPausedReaderGetsEveryMessageWholeAfterPartialWrites(loop: Server.Configuration.LoopBackend) throws {
        let server = try TestServer(configure: {
            $0.eventLoop = loop
            $0.limits.maxOpsPerSecond = 100_000
            $0.limits.maxTabs = 1_000
        })
        defer { server.stop() }
        let (writer, _) = try TestClient.joined(port: server.port, workspace: "pause", clientId: "w", format: .proto)
        let reader = try TestClient(port: server.port, format: .proto, receiveBuffer: 4096)
        try reader.send(Tabsync_V1_ClientMessage(hello: Tabsync_V1_Hello(workspace: "pause", clientId: "r")))
        _ = try reader.next { if case .welcome(let w) = $0 { return w } else { return nil } }

        // About 2.4 MB of Applied for the reader while it does not read: far over what the two
        // sockets buffer, under the 4 MiB send queue limit.
        let count = 600
        let title = String(repeating: "p", count: 200)
        let url = "https://example.com/" + String(repeating: "u", count: 3_900)
        for round in 0..<(count / 50) {
            var burst: [UInt8] = []
            for i in (round * 50 + 1)...(round * 50 + 50) {
                let op = TabsyncCore.Operation.add(tab: Tab(id: "p\(i)", title: "\(title)\(i)", url: url), place: .end, activate: false)
                burst += RawWebSocket.maskedFrame(
                    opcode: 0x2, payload: WireFormat.proto.encode(Tabsync_V1_ClientMessage(submit: Tabsync_V1_Submit(seq: UInt64(i), op: op))))
            }
            try writer.socket.writeAll(burst)
            for _ in 1...50 { _ = try writer.nextApplied() }
        }
        #expect(try server.metric("tabsync_send_queue_bytes") > 0, "the reader's queue is waiting behind a partial write")

        for i in 1...count {
            let applied = try reader.nextApplied()
            #expect(applied.seq == UInt64(i))
            guard case .add(let tab, _, _) = applied.op else { Issue.record("not an add"); continue }
            #expect(tab.id == "p\(i)" && tab.title == "\(title)\(i)" && tab.url == url)
        }
        #expect(try server.metric("tabsync_slow_consumer_closes_total") == 0)
    }
}
