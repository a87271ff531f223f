import CLibwebsockets
import Foundation
import TabsyncLoop

/// The loop thread's work: lws callbacks, inbox commands, connects, writes and retry timers.
/// Everything here runs on the loop thread.
extension LoopCore {
    func handle(wsi: OpaquePointer, reason: lws_callback_reasons, input: UnsafeMutableRawPointer?, length: Int) -> Int32 {
        switch reason {
        case LWS_CALLBACK_EVENT_WAIT_CANCELLED:
            drainInbox()
            return 0
        case LWS_CALLBACK_CLIENT_CONNECTION_ERROR:
            guard let connection = current(wsi, adopting: true), connection.phase == .connecting else { return 0 }
            let message = input.map { String(cString: $0.assumingMemoryBound(to: CChar.self)) } ?? "connection failed"
            connection.wsi = nil
            ended(connection, ConnectionEnding(kind: .failedToConnect, reason: message))
            return 0
        case LWS_CALLBACK_CLIENT_ESTABLISHED:
            guard let connection = current(wsi, adopting: true), connection.phase == .connecting else { return -1 }
            connection.phase = .open
            releaseConnectSlot(connection)
            for frame in connection.owner.loopOpened() { connection.enqueue(frame) }
            refill(connection)
            if connection.hasQueued { lws_callback_on_writable(wsi) }
            return 0
        case LWS_CALLBACK_CLIENT_RECEIVE:
            guard let connection = current(wsi), connection.phase == .open else { return -1 }
            return receive(connection, wsi: wsi, input: input, length: length)
        case LWS_CALLBACK_CLIENT_WRITEABLE:
            guard let connection = current(wsi), connection.phase == .open else { return -1 }
            return write(connection, wsi: wsi)
        case LWS_CALLBACK_WS_PEER_INITIATED_CLOSE:
            guard let connection = current(wsi) else { return 0 }
            connection.peerClose = parseClose(input, length)
            return 0
        case LWS_CALLBACK_CLIENT_CLOSED, LWS_CALLBACK_WSI_DESTROY:
            guard let connection = current(wsi), connection.phase != .waiting else { return 0 }
            let ending: ConnectionEnding
            if connection.phase == .connecting {
                ending = ConnectionEnding(kind: .failedToConnect, reason: "connection closed during the handshake")
            } else if let peer = connection.peerClose {
                ending = ConnectionEnding(kind: .closedByServer, code: peer.code, reason: peer.reason)
            } else if let local = connection.closeRequest {
                ending = ConnectionEnding(kind: .closedLocally, code: local.code, reason: local.reason)
            } else {
                ending = ConnectionEnding(kind: .lost, reason: "connection lost")
            }
            connection.wsi = nil
            ended(connection, ending)
            return 0
        default:
            return 0
        }
    }

    /// The connection this wsi belongs to, if it is that connection's current attempt. With
    /// `adopting`, a wsi not yet recorded (callbacks from inside `lws_client_connect_via_info`)
    /// becomes the current one.
    private func current(_ wsi: OpaquePointer, adopting: Bool = false) -> LoopConnection? {
        guard let (id, tag) = LoopConnection.decode(opaque: lws_get_opaque_user_data(wsi)),
              let connection = connections[id], connection.attemptTag == tag
        else { return nil }
        if connection.wsi == nil && adopting && connection.phase == .connecting { connection.wsi = wsi }
        return connection.wsi == wsi ? connection : nil
    }

    private func parseClose(_ input: UnsafeMutableRawPointer?, _ length: Int) -> (code: UInt16, reason: String) {
        guard let input, length >= 2 else { return (1005, "") }
        let bytes = UnsafeRawBufferPointer(start: input, count: length)
        let code = UInt16(bytes[0]) << 8 | UInt16(bytes[1])
        let reason = String(decoding: bytes[2...], as: UTF8.self)
        return (code, reason)
    }

    // MARK: commands

    private func drainInbox() {
        inbox.take(into: &commands)
        defer { commands.removeAll(keepingCapacity: true) }
        for command in commands {
            switch command {
            case .open(let id, let owner, let url, let subprotocol, let backoff, let allowSelfSigned):
                guard !stopping else {
                    _ = owner.loopClosed(ConnectionEnding(kind: .closedLocally, reason: "client loop stopped"))
                    owner.loopForgotten()
                    continue
                }
                let connection = LoopConnection(
                    id: id, owner: owner, url: url, subprotocol: subprotocol, backoff: backoff,
                    allowSelfSigned: allowSelfSigned)
                connections[id] = connection
                connect(connection)
            case .flush(let id):
                guard let connection = connections[id], connection.phase == .open, let wsi = connection.wsi else { continue }
                refill(connection)
                if connection.hasQueued { lws_callback_on_writable(wsi) }
            case .reconnect(let id):
                guard let connection = connections[id] else { continue }
                switch connection.phase {
                case .open: requestClose(connection, code: 1000, reason: "reconnecting")
                case .connecting: break  // already on its way
                case .waiting:
                    connection.attempt = 0
                    connect(connection)
                }
            case .close(let id, let code, let reason):
                guard let connection = connections[id] else { continue }
                connection.closingForGood = true
                switch connection.phase {
                case .open: requestClose(connection, code: code, reason: reason)
                case .connecting:
                    if let wsi = connection.wsi {
                        lws_set_timeout(wsi, PENDING_TIMEOUT_CLOSE_SEND, LWS_TO_KILL_ASYNC)
                    } else {
                        finish(connection, ConnectionEnding(kind: .closedLocally, code: code, reason: reason))
                    }
                case .waiting:
                    finish(connection, ConnectionEnding(kind: .closedLocally, code: code, reason: reason))
                }
            case .drop(let id):
                guard let connection = connections[id], let wsi = connection.wsi else { continue }
                let fd = lws_get_socket_fd(wsi)
                if fd >= 0 { shutdown(fd, Int32(SHUT_RDWR)) }
            case .stop:
                stopping = true
                let deadline = ContinuousClock.now + options.closeGrace
                stopDeadline = deadline
                for connection in Array(connections.values) {
                    connection.closingForGood = true
                    switch connection.phase {
                    case .open: requestClose(connection, code: 1001, reason: "client shutting down")
                    case .connecting:
                        if let wsi = connection.wsi {
                            lws_set_timeout(wsi, PENDING_TIMEOUT_CLOSE_SEND, LWS_TO_KILL_ASYNC)
                        } else {
                            finish(connection, ConnectionEnding(kind: .closedLocally, reason: "client loop stopped"))
                        }
                    case .waiting:
                        finish(connection, ConnectionEnding(kind: .closedLocally, reason: "client loop stopped"))
                    }
                }
                // Wake the loop at the deadline even if no socket does (id 0 names no connection).
                timers.push(.init(deadline: deadline, id: 0, tag: 0))
                armTimer()
            }
        }
    }

    private func requestClose(_ connection: LoopConnection, code: UInt16, reason: String) {
        guard let wsi = connection.wsi, connection.closeRequest == nil else { return }
        connection.closeRequest = (code, reason)
        lws_callback_on_writable(wsi)
    }

    // MARK: connecting and ending

    private func connect(_ connection: LoopConnection) {
        connection.resetSocketState()
        connection.attemptTag &+= 1
        connection.owner.loopConnecting(attempt: connection.attempt)
        if options.maxConcurrentConnects > 0 && connectsInFlight >= options.maxConcurrentConnects {
            // Wait for a slot (phase `.waiting`; the tag voids the entry if anything else happens).
            connection.phase = .waiting
            connectQueue.append((connection.id, connection.attemptTag))
            return
        }
        connectsInFlight += 1
        connection.holdsConnectSlot = true
        connection.phase = .connecting
        let tag = connection.attemptTag

        var info = lws_client_connect_info()
        info.context = context
        info.address = UnsafePointer(connection.cAddress)
        info.port = Int32(connection.url.port)
        info.path = UnsafePointer(connection.cPath)
        info.host = UnsafePointer(connection.cHost)
        // No Origin header: this is not a browser page (servers refuse origins they do not allow).
        info.protocol = UnsafePointer(connection.cProtocol)
        info.opaque_user_data = connection.opaqueTag
        var flags: Int32 = 0
        if connection.url.usesTLS {
            flags |= Int32(LCCSCF_USE_SSL.rawValue)
            if connection.allowSelfSigned {
                flags |= Int32(LCCSCF_ALLOW_SELFSIGNED.rawValue | LCCSCF_SKIP_SERVER_CERT_HOSTNAME_CHECK.rawValue
                    | LCCSCF_ALLOW_INSECURE.rawValue | LCCSCF_ALLOW_EXPIRED.rawValue)
            }
        }
        info.ssl_connection = flags
        let wsi = lws_client_connect_via_info(&info)
        // A failure may already have been reported from inside the call (and a retry scheduled).
        guard connection.attemptTag == tag, connection.phase == .connecting, connections[connection.id] === connection
        else { return }
        if let wsi {
            if connection.wsi == nil { connection.wsi = wsi }
        } else {
            ended(connection, ConnectionEnding(kind: .failedToConnect, reason: "could not start connecting"))
        }
    }

    /// The current attempt ended: ask the owner what next and do it.
    private func ended(_ connection: LoopConnection, _ ending: ConnectionEnding) {
        releaseConnectSlot(connection)
        connection.resetSocketState()
        connection.phase = .waiting
        let next = connection.owner.loopClosed(ending)
        if connection.closingForGood || stopping {
            forget(connection)
            return
        }
        switch next {
        case .stop:
            forget(connection)
        case .reconnectNow:
            connection.attempt = 0
            connection.refusedInARow = 0
            schedule(connection, after: .zero)
        case .retry, .retryAfterRefusal:
            if case .retryAfterRefusal = next {
                connection.refusedInARow += 1
                connection.attempt = max(connection.attempt, connection.refusedInARow - 1)
            } else {
                connection.refusedInARow = 0
            }
            connection.attempt += 1
            let delay = connection.backoff.delay(attempt: connection.attempt)
            connection.owner.loopWaiting(attempt: connection.attempt, delay: delay)
            schedule(connection, after: delay)
        }
    }

    /// Ends a connection that has no socket now, for good.
    private func finish(_ connection: LoopConnection, _ ending: ConnectionEnding) {
        connection.attemptTag &+= 1  // its timers are void
        connection.resetSocketState()
        _ = connection.owner.loopClosed(ending)
        forget(connection)
    }

    private func forget(_ connection: LoopConnection) {
        releaseConnectSlot(connection)
        connection.attemptTag &+= 1
        connection.releaseStrings()
        connections[connection.id] = nil
        connection.owner.loopForgotten()
    }

    // MARK: connect slots

    /// A connection leaves the TCP/TLS/upgrade phase: its slot goes to the next queued one.
    private func releaseConnectSlot(_ connection: LoopConnection) {
        guard connection.holdsConnectSlot else { return }
        connection.holdsConnectSlot = false
        connectsInFlight -= 1
        startQueuedConnects()
    }

    /// Starts queued connections while slots are free. Not re-entered: a connect that fails at
    /// once releases its slot into the loop already running here, not into a deeper call.
    private func startQueuedConnects() {
        guard !startingQueued else { return }
        startingQueued = true
        defer { startingQueued = false }
        while connectsInFlight < options.maxConcurrentConnects, connectQueueHead < connectQueue.count, !stopping {
            let (id, tag) = connectQueue[connectQueueHead]
            connectQueueHead += 1
            guard let connection = connections[id], connection.phase == .waiting, connection.attemptTag == tag
            else { continue }
            connect(connection)
        }
        if connectQueueHead == connectQueue.count {
            connectQueue.removeAll(keepingCapacity: true)
            connectQueueHead = 0
        } else if connectQueueHead > 1024 && connectQueueHead * 2 > connectQueue.count {
            connectQueue.removeFirst(connectQueueHead)
            connectQueueHead = 0
        }
    }

    // MARK: timers

    private func schedule(_ connection: LoopConnection, after delay: Duration) {
        connection.attemptTag &+= 1
        timers.push(.init(deadline: .now + delay, id: connection.id, tag: connection.attemptTag))
        armTimer()
    }

    /// Points the single lws timer at the earliest deadline.
    private func armTimer() {
        guard let first = timers.first else { return }
        if let armed = timerArmedFor, armed <= first.deadline { return }
        timerArmedFor = first.deadline
        timer.schedule(after: max(.zero, first.deadline - .now))
    }

    func runDueTimers() {
        timerArmedFor = nil
        let now = ContinuousClock.now + .milliseconds(1)
        while let first = timers.first, first.deadline <= now {
            _ = timers.pop()
            if first.retry {
                // Held ops go again on the open connection; when there is none, the next Welcome sends them.
                guard !stopping, let connection = connections[first.id], connection.phase == .open,
                      let wsi = connection.wsi, connection.owner.loopRetryDue()
                else { continue }
                refill(connection)
                if connection.hasQueued { lws_callback_on_writable(wsi) }
                continue
            }
            guard !stopping, let connection = connections[first.id], connection.phase == .waiting,
                  connection.attemptTag == first.tag
            else { continue }
            connect(connection)
        }
        armTimer()
    }

    // MARK: reading and writing

    private func receive(_ connection: LoopConnection, wsi: OpaquePointer, input: UnsafeMutableRawPointer?, length: Int) -> Int32 {
        let bytes = UnsafeRawBufferPointer(start: input, count: input == nil ? 0 : length)
        let whole = lws_is_final_fragment(wsi) != 0 && lws_remaining_packet_payload(wsi) == 0
        if connection.receiveBuffer.isEmpty && whole {
            return deliver(connection, wsi: wsi, Array(bytes))
        }
        if connection.receiveBuffer.count + bytes.count > options.maxMessageBytes {
            connection.closeRequest = (1009, "message too big")
            lws_close_reason(wsi, LWS_CLOSE_STATUS_MESSAGE_TOO_LARGE, nil, 0)
            return -1
        }
        connection.receiveBuffer.append(contentsOf: bytes)
        guard whole else { return 0 }
        let message = connection.receiveBuffer
        connection.receiveBuffer = []
        return deliver(connection, wsi: wsi, message)
    }

    private func deliver(_ connection: LoopConnection, wsi: OpaquePointer, _ message: [UInt8]) -> Int32 {
        connection.receivedSomething = true
        connection.attempt = 0
        let verdict = connection.owner.loopReceived(message)
        if let delay = connection.owner.loopTakeRetryRequest() {
            timers.push(.init(deadline: .now + delay, id: connection.id, tag: 0, retry: true))
            armTimer()
        }
        switch verdict {
        case .keep:
            refill(connection)
            if connection.hasQueued { lws_callback_on_writable(wsi) }
        case .close(let code, let reason):
            requestClose(connection, code: code, reason: reason)
        }
        return 0
    }

    /// Moves the owner's waiting frames into the send queue, up to the queue's byte bound.
    private func refill(_ connection: LoopConnection) {
        guard connection.closeRequest == nil else { return }
        let budget = options.maxQueuedBytes - connection.queuedBytes
        guard budget > 0 else { return }
        for frame in connection.owner.loopTakeOutgoing(budget: budget) { connection.enqueue(frame) }
    }

    private func write(_ connection: LoopConnection, wsi: OpaquePointer) -> Int32 {
        if let close = connection.closeRequest {
            var reason = Array(close.reason.utf8.prefix(120))
            reason.withUnsafeMutableBufferPointer { buffer in
                lws_close_reason(wsi, lws_close_status(rawValue: UInt32(close.code)), buffer.baseAddress, buffer.count)
            }
            return -1
        }
        if !connection.hasQueued { refill(connection) }
        // Several writes per callback while the socket takes them (NOTES.md: much faster on
        // HTTP/1 WebSockets); lws buffers a partial send itself and calls back when drained.
        while connection.hasQueued {
            let frame = connection.queue[connection.queueHead]
            if writer.write(frame, binary: connection.binary, to: wsi) < frame.count { return -1 }
            connection.dequeue()
            if !connection.hasQueued { refill(connection) }
            if lws_send_pipe_choked(wsi) != 0 { break }
        }
        if connection.hasQueued { lws_callback_on_writable(wsi) }
        return 0
    }
}
