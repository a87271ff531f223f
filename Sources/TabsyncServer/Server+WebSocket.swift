import CLibwebsockets
import Logging
import TabsyncCore
import TabsyncLoop
import TabsyncProto

extension Server.Loop {
    /// protocols[1...]: one WebSocket session per connection (`echo`: a diagnostics echo
    /// session, Server+DiagnosticsEcho.swift). Event loop thread.
    func handleWebSocket(
        _ wsi: OpaquePointer, _ format: WireFormat, _ reason: lws_callback_reasons,
        _ user: UnsafeMutableRawPointer?, _ input: UnsafeMutableRawPointer?, _ length: Int, echo: Bool = false
    ) -> Int32 {
        switch reason {
        case LWS_CALLBACK_ESTABLISHED:
            guard let user else { return -1 }
            let id = makeId()
            user.storeBytes(of: id, as: Int.self)
            let session = Session(
                id: id, wsi: wsi, format: format, opsPerSecond: limits.maxOpsPerSecond, now: clock.now,
                diagnosticsEcho: echo)
            sessions[id] = session
            if !echo { lws_set_timer_usecs(wsi, configuration.helloTimeout.microseconds) }
            logger.info("connection open", metadata: [
                "session": "\(id)", "peer": "\(peerAddress(wsi))",
                "subprotocol": "\(echo ? Self.echoSubprotocol : format.subprotocol)",
            ])
            if case .draining = shutdown { close(session, code: 1001, reason: "server shutting down") }
            return 0

        case LWS_CALLBACK_RECEIVE:
            guard let session = session(user) else { return -1 }
            return receive(session, input, length)

        case LWS_CALLBACK_SERVER_WRITEABLE:
            guard let session = session(user) else { return 0 }
            return writeQueued(session)

        case LWS_CALLBACK_TIMER:
            guard let session = session(user) else { return 0 }
            if case .awaitingHello = session.phase, session.closing == nil {
                refuse(session, code: .protocolError, message: "no Hello within \(configuration.helloTimeout)")
            } else {
                checkTokenExpiry(session)
            }
            return 0

        case LWS_CALLBACK_WS_PEER_INITIATED_CLOSE:
            guard let session = session(user) else { return 0 }
            // lws answers the close frame; no data frame may follow it (RFC 6455 5.5.1), and what
            // the peer sends after its close is ignored.
            session.peerClosed = true
            session.queue.removeAll()
            if let input, length >= 2 {
                let bytes = UnsafeRawBufferPointer(start: input, count: length)
                session.closeCode = UInt16(bytes[0]) << 8 | UInt16(bytes[1])
                session.closeReason = "peer: " + String(decoding: bytes.dropFirst(2).prefix(123), as: UTF8.self)
            }
            return 0

        case LWS_CALLBACK_CLOSED:
            guard let user else { return 0 }
            let id = user.load(as: Int.self)
            guard let session = sessions.removeValue(forKey: id) else { return 0 }
            user.storeBytes(of: 0, as: Int.self)
            session.gone = true
            session.queue.removeAll()
            logger.info("connection closed", metadata: [
                "session": "\(id)", "code": "\(session.closeCode)", "reason": "\(session.closeReason)",
                "client": "\(session.hello?.clientId ?? "")", "workspace": "\(session.workspaceId ?? "")",
            ])
            sessionLeft(session)
            if case .draining = shutdown { continueShutdown(now: clock.now) }
            return 0

        default:
            return 0
        }
    }

    private func session(_ user: UnsafeMutableRawPointer?) -> Session? {
        guard let user else { return nil }
        let id = user.load(as: Int.self)
        return id == 0 ? nil : sessions[id]
    }

    private func peerAddress(_ wsi: OpaquePointer) -> String {
        var buffer = [CChar](repeating: 0, count: 64)
        guard lws_get_peer_simple(wsi, &buffer, buffer.count) != nil else { return "?" }
        return String(nulTerminated: buffer)
    }

    // MARK: receive

    /// Reassembles a message across fragments (and lws's rx chunks), bounded by `maxFrameBytes`.
    private func receive(_ session: Session, _ input: UnsafeMutableRawPointer?, _ length: Int) -> Int32 {
        if session.closing != nil || session.rxOverflow || session.peerClosed { return 0 }
        if session.rx.count + length > limits.maxFrameBytes {
            session.rxOverflow = true
            session.rx = []
            close(session, code: 1009, reason: "message over \(limits.maxFrameBytes) bytes", flush: false)
            return 0
        }
        if let input, length > 0 {
            session.rx.append(contentsOf: UnsafeRawBufferPointer(start: input, count: length))
        }
        guard lws_is_final_fragment(session.wsi) != 0, lws_remaining_packet_payload(session.wsi) == 0 else {
            return 0
        }
        let bytes = session.rx
        session.rx = []
        let binary = lws_frame_is_binary(session.wsi) != 0
        if session.diagnosticsEcho {
            echo(session, bytes, binary: binary)
            return 0
        }
        guard binary != session.format.usesTextFrames else {
            close(session, code: 1007, reason: binary ? "binary frame on \(session.format.subprotocol)"
                : "text frame on \(session.format.subprotocol)", flush: false)
            return 0
        }
        received(session, bytes)
        return 0
    }

    // MARK: send

    /// Queues a frame; a session whose queue would go over `maxSendQueueBytes` is closed 1013
    /// (``closeSlowReader(_:)``).
    ///
    /// Nothing is written here: ``flushQueued()`` writes every session's frames once the loop
    /// iteration that queued them is done, so the frames one wakeup produces for one connection
    /// leave in one send (under load several ops reach each client per wakeup) and no write waits
    /// for a writable round trip through the event loop.
    func send(_ frame: OutFrame, to session: Session) {
        guard session.closing == nil, !session.gone, !session.peerClosed else { return }
        if session.queue.bytes + frame.queuedCost > limits.maxSendQueueBytes && !session.queue.isEmpty {
            closeSlowReader(session)
            return
        }
        session.queue.append(frame)
        if session.diagnosticsEcho {
            // Only from SERVER_WRITEABLE, where lws sends a pending pong first (Server+DiagnosticsEcho.swift).
            if !session.awaitingWritable {
                session.awaitingWritable = true
                lws_callback_on_writable(session.wsi)
            }
            return
        }
        if !session.flushPending {
            session.flushPending = true
            flushList.append(session)
        }
    }

    /// Called after every event loop iteration: writes what each session queued during it, while
    /// the socket takes it; the rest goes out from `SERVER_WRITEABLE`.
    func flushQueued() {
        guard !flushList.isEmpty else { return }
        swap(&flushList, &flushing)
        defer { flushing.removeAll(keepingCapacity: true) }
        for session in flushing {
            session.flushPending = false
            guard !session.gone, !session.awaitingWritable, !session.queue.isEmpty else { continue }
            guard write(session, maxWrites: 1) else {
                // Nothing could be written: the connection is broken; close it from its callback.
                close(session, code: 1006, reason: "write failed", flush: false)
                continue
            }
            if session.queue.isEmpty { continue }
            session.awaitingWritable = true
            lws_callback_on_writable(session.wsi)
        }
    }

    /// Writes the head of a session's queue, at most `maxWrites` sends, while lws holds nothing
    /// back for the connection (``BatchedWriter``: one frame as it is, or several as one send of
    /// complete WebSocket frames). Counts what it wrote; false when lws refused a write (a dead
    /// connection).
    private func write(_ session: Session, maxWrites: Int) -> Bool {
        let written = writer.write(&session.queue, to: session.wsi, ownsConnection: session.ownsConnection, maxWrites: maxWrites)
        metrics.writesOut += UInt64(written.writes)
        metrics.messagesOut += UInt64(written.frames)
        metrics.bytesOut += UInt64(written.bytes)
        return !written.failed
    }

    /// Encodes and queues one message to one session.
    func send(_ message: Tabsync_V1_ServerMessage, to session: Session) {
        let frame = OutFrame(bytes: session.format.encode(message), isBinary: !session.format.usesTextFrames)
        send(frame, to: session)
    }

    /// Closes a session with `code`: after its queued frames when `flush`, else at once (the queue
    /// is dropped). The close frame goes out from `SERVER_WRITEABLE`; a peer that never lets it out
    /// is dropped after `grace` (rounded up to whole seconds, at least 1).
    func close(_ session: Session, code: UInt16, reason: String, flush: Bool = true, grace: Duration = .seconds(5)) {
        guard session.closing == nil else { return }
        session.closing = Session.Close(code: code, reason: String(reason.utf8.prefix(120)) ?? "")
        session.closeCode = code
        session.closeReason = reason
        if !flush { session.queue.removeAll() }
        // lws 4.1.6 counts these timeouts in whole seconds (lws_set_timeout_us is not exported).
        let seconds = min(Int64(Int32.max), max(1, (grace.microseconds + 999_999) / 1_000_000))
        lws_set_timeout(session.wsi, PENDING_TIMEOUT_USER_OK, Int32(seconds))
        session.awaitingWritable = true
        lws_callback_on_writable(session.wsi)
    }

    /// A session whose queue would pass `maxSendQueueBytes`: closed 1013, its close frame alone.
    ///
    /// - Its queued frames are dropped and nothing more is queued to it (`closing` is set), so what
    ///   the server holds for it is at most what lws already holds: the unsent tail of one write.
    /// - It leaves its workspace at once (no more broadcasts; presence drops it) rather than when
    ///   the connection ends.
    /// - The close frame is never spliced into a frame: frames are written whole and only while lws
    ///   holds nothing back (``BatchedWriter``); lws sends the unsent tail of a write before
    ///   anything else and raises `SERVER_WRITEABLE` only once it is gone, so the frame in progress
    ///   is finished first and the close frame, which lws writes after `SERVER_WRITEABLE` returns
    ///   -1 with the reason set, starts on a frame boundary.
    /// - The peer has `slowCloseGrace` to read that far; a peer that does not is dropped without a
    ///   close frame (it could not have read one).
    func closeSlowReader(_ session: Session) {
        metrics.slowConsumerCloses += 1
        logger.warning("slow consumer closed", metadata: [
            "session": "\(session.id)", "client": "\(session.hello?.clientId ?? "")",
            "queued_bytes": "\(session.queue.bytes)",
        ])
        close(session, code: 1013, reason: "reading too slowly", flush: false, grace: configuration.slowCloseGrace)
        sessionLeft(session)
    }

    /// Sends `Error{code, message}`, then closes 4400 (a protocol violation or a refused Hello).
    func refuse(_ session: Session, code: ErrorCode, message: String) {
        logger.info("session refused", metadata: [
            "session": "\(session.id)", "code": "\(code.wireName)", "message": "\(message)",
        ])
        send(Tabsync_V1_ServerMessage(error: Tabsync_V1_Error(code: code, message: message)), to: session)
        close(session, code: 4400, reason: code.wireName)
    }

    /// `SERVER_WRITEABLE`: writes queued frames while the socket takes them, then the close.
    private func writeQueued(_ session: Session) -> Int32 {
        session.awaitingWritable = false
        // While the kernel takes it all (lws holds nothing back), up to 16 sends per callback.
        if !write(session, maxWrites: 16) { return -1 }
        if !session.queue.isEmpty {
            session.awaitingWritable = true
            lws_callback_on_writable(session.wsi)
            return 0
        }
        if let closing = session.closing {
            var reason = Array(closing.reason.utf8)
            lws_close_reason(session.wsi, lws_close_status(rawValue: UInt32(closing.code)), &reason, reason.count)
            return -1
        }
        return 0
    }
}
