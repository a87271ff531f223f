import CLibwebsockets
import Logging
import TabsyncCore
import TabsyncLoop
import TabsyncProto
import TabsyncServerCore

/// WebSocket connections on lws: their callbacks become core events; frames are reassembled,
/// queued and written; closes go out after the queue (``Connection``). Event loop thread.
extension LoopDriver {
    /// protocols[1...]: one WebSocket session per connection (`echo`: a diagnostics echo session).
    func handleWebSocket(
        _ wsi: OpaquePointer, _ format: WireFormat, _ reason: lws_callback_reasons,
        _ user: UnsafeMutableRawPointer?, _ input: UnsafeMutableRawPointer?, _ length: Int, echo: Bool = false
    ) -> Int32 {
        switch reason {
        case LWS_CALLBACK_ESTABLISHED:
            guard let user else { return -1 }
            let id = makeId()
            user.storeBytes(of: id, as: Int.self)
            connections[id] = Connection(id: id, wsi: wsi, format: format, diagnosticsEcho: echo)
            logger.info("connection open", metadata: [
                "session": "\(id)", "peer": "\(peerAddress(wsi))",
                "subprotocol": "\(echo ? Self.echoSubprotocol : format.subprotocol)",
            ])
            // The workspace its upgrade path named, kept by `confirmUpgrade` for this wsi.
            dispatch(.connected(id, format: format, echo: echo, workspace: upgradeWorkspaces.removeValue(forKey: wsi)))
            return 0

        case LWS_CALLBACK_RECEIVE:
            guard let connection = connection(user) else { return -1 }
            receive(connection, input, length)
            return 0

        case LWS_CALLBACK_RECEIVE_PONG:
            guard let connection = connection(user) else { return 0 }
            dispatch(.pong(connection.id))
            return 0

        case LWS_CALLBACK_SERVER_WRITEABLE:
            guard let connection = connection(user) else { return 0 }
            return writeQueued(connection)

        case LWS_CALLBACK_WS_PEER_INITIATED_CLOSE:
            guard let connection = connection(user) else { return 0 }
            // lws answers the close frame; no data frame may follow it (RFC 6455 5.5.1), and what
            // the peer sends after its close is ignored.
            if connection.state != .closing { connection.state = .peerClosed }
            connection.queue.removeAll()
            if let input, length >= 2 {
                let bytes = UnsafeRawBufferPointer(start: input, count: length)
                connection.closeCode = UInt16(bytes[0]) << 8 | UInt16(bytes[1])
                connection.closeReason = "peer: " + String(decoding: bytes.dropFirst(2).prefix(123), as: UTF8.self)
            }
            return 0

        case LWS_CALLBACK_CLOSED:
            guard let user else { return 0 }
            let id = user.load(as: Int.self)
            guard let connection = connections.removeValue(forKey: id) else { return 0 }
            user.storeBytes(of: 0, as: Int.self)
            connection.state = .gone
            connection.queue.removeAll()
            logger.info("connection closed", metadata: [
                "session": "\(id)", "code": "\(connection.closeCode)", "reason": "\(connection.closeReason)",
            ])
            dispatch(.disconnected(id))
            return 0

        default:
            return 0
        }
    }

    private func connection(_ user: UnsafeMutableRawPointer?) -> Connection? {
        guard let user else { return nil }
        let id = user.load(as: Int.self)
        return id == 0 ? nil : connections[id]
    }

    private func peerAddress(_ wsi: OpaquePointer) -> String {
        var buffer = [CChar](repeating: 0, count: 64)
        guard lws_get_peer_simple(wsi, &buffer, buffer.count) != nil else { return "?" }
        return String(nulTerminated: buffer)
    }

    // MARK: receive

    /// Reassembles a message across fragments (and lws's rx chunks), bounded by `maxFrameBytes`;
    /// a whole message goes to the core.
    private func receive(_ connection: Connection, _ input: UnsafeMutableRawPointer?, _ length: Int) {
        guard connection.isReceiving else { return }
        if connection.rx.count + length > configuration.limits.maxFrameBytes {
            connection.state = .overflowed
            connection.rx = []
            dispatch(.frameTooBig(connection.id))
            return
        }
        if let input, length > 0 {
            connection.rx.append(contentsOf: UnsafeRawBufferPointer(start: input, count: length))
        }
        guard lws_is_final_fragment(connection.wsi) != 0, lws_remaining_packet_payload(connection.wsi) == 0 else { return }
        let bytes = connection.rx
        connection.rx = []
        dispatch(.frame(connection.id, bytes, binary: lws_frame_is_binary(connection.wsi) != 0))
    }

    // MARK: send

    /// Queues a frame; a queue that would go over `maxSendQueueBytes` is reported to the core
    /// (``ServerCore/Event/backlogExceeded(_:)``), which closes the session 1013.
    ///
    /// Nothing is written here: ``flushQueued()`` writes every connection's frames once the loop
    /// iteration that queued them is done, so the frames one wakeup produces for one connection
    /// leave in one send and no write waits for a writable round trip through the event loop.
    func queue(_ frame: OutFrame, to connection: Connection) {
        guard connection.isOpen else { return }
        if connection.queue.bytes + frame.queuedCost > configuration.limits.maxSendQueueBytes && !connection.queue.isEmpty {
            connection.state = .backlogged
            logger.debug("send queue over its bound", metadata: ["session": "\(connection.id)", "queued_bytes": "\(connection.queue.bytes)"])
            dispatch(.backlogExceeded(connection.id))
            return
        }
        connection.queue.append(frame)
        if connection.diagnosticsEcho {
            // Only from SERVER_WRITEABLE, where lws sends a pending pong first: a ping that came
            // before a message was whole is answered before the echo (Autobahn 5.6, 5.19, 5.20).
            if !connection.awaitingWritable {
                connection.awaitingWritable = true
                lws_callback_on_writable(connection.wsi)
            }
            return
        }
        if !connection.flushPending {
            connection.flushPending = true
            flushList.append(connection)
        }
    }

    /// Called after every event loop iteration: writes what each connection queued during it,
    /// while the socket takes it; the rest goes out from `SERVER_WRITEABLE`.
    func flushQueued() {
        guard !flushList.isEmpty else { return }
        swap(&flushList, &flushing)
        defer { flushing.removeAll(keepingCapacity: true) }
        for connection in flushing {
            connection.flushPending = false
            guard connection.state != .gone, !connection.awaitingWritable, !connection.queue.isEmpty else { continue }
            guard write(connection, maxWrites: 1) else {
                // Nothing could be written: the connection is broken; close it from its callback.
                close(connection, code: CloseReason.writeFailed.code, reason: CloseReason.writeFailed.text, flush: false)
                continue
            }
            if connection.queue.isEmpty { continue }
            connection.awaitingWritable = true
            lws_callback_on_writable(connection.wsi)
        }
    }

    /// Writes the head of a connection's queue, at most `maxWrites` sends, while lws holds nothing
    /// back (``BatchedWriter``). Counts what it wrote; false when lws refused a write.
    private func write(_ connection: Connection, maxWrites: Int) -> Bool {
        let written = writer.write(
            &connection.queue, to: connection.wsi, ownsConnection: connection.ownsConnection, maxWrites: maxWrites)
        metrics.writesOut += UInt64(written.writes)
        metrics.messagesOut += UInt64(written.frames)
        metrics.bytesOut += UInt64(written.bytes)
        return !written.failed
    }

    /// Closes a connection with `code`: after its queued frames when `flush`, else at once (the
    /// queue is dropped). The close frame goes out from `SERVER_WRITEABLE`; a peer that never lets
    /// it out is dropped after `grace` (rounded up to whole seconds, at least 1).
    ///
    /// A connection closed for reading too slowly keeps nothing queued, so the server holds for it
    /// at most what lws already holds (the unsent tail of one write); the close frame is never
    /// spliced into a frame: frames are written whole and only while lws holds nothing back, and
    /// lws raises `SERVER_WRITEABLE` only once that tail is gone.
    func close(_ connection: Connection, code: UInt16, reason: String, flush: Bool = true, grace: Duration = .seconds(5)) {
        guard !connection.isClosingOrGone else { return }
        connection.state = .closing
        connection.closeCode = code
        connection.closeReason = reason
        if !flush { connection.queue.removeAll() }
        // lws 4.1.6 counts these timeouts in whole seconds (lws_set_timeout_us is not exported).
        let seconds = min(Int64(Int32.max), max(1, (grace.microseconds + 999_999) / 1_000_000))
        lws_set_timeout(connection.wsi, PENDING_TIMEOUT_USER_OK, Int32(seconds))
        connection.awaitingWritable = true
        lws_callback_on_writable(connection.wsi)
    }

    /// Writes the core's keepalive ping (``ServerCore/Action/ping(_:)``); false when lws refused
    /// it. Its payload is not empty: lws 4.1.6 raises no RECEIVE_PONG for an empty pong (ops-ws.c
    /// skips to `already_done`).
    func writePing(_ connection: Connection) -> Bool {
        lws_write(connection.wsi, pingBuffer + clws_pre(), Self.pingPayloadBytes, LWS_WRITE_PING) >= 0
    }

    /// `SERVER_WRITEABLE`: writes queued frames while the socket takes them, then the close.
    private func writeQueued(_ connection: Connection) -> Int32 {
        connection.awaitingWritable = false
        if connection.pingPending, connection.isOpen, BatchedWriter.mayWrite(connection.wsi) {
            // The core's keepalive ping, ahead of queued frames.
            connection.pingPending = false
            guard writePing(connection) else { return -1 }
        }
        // While the kernel takes it all (lws holds nothing back), up to 16 sends per callback.
        if !write(connection, maxWrites: 16) { return -1 }
        if !connection.queue.isEmpty || (connection.pingPending && connection.isOpen) {
            connection.awaitingWritable = true
            lws_callback_on_writable(connection.wsi)
            return 0
        }
        if connection.state == .closing {
            // 1006 names an ending without a close frame (a failed write): none is sent.
            guard connection.closeCode != CloseReason.writeFailed.code else { return -1 }
            var reason = Array(connection.closeReason.utf8)
            lws_close_reason(connection.wsi, lws_close_status(rawValue: UInt32(connection.closeCode)), &reason, reason.count)
            return -1
        }
        return 0
    }
}
