import TabsyncCore
import CLibwebsockets
import Foundation
import TabsyncLoop
import TabsyncProto

/// The lws callback of every bench connection: finds the generator through its event loop's owner.
/// Runs on the thread inside the generator's phases.
private func benchCallback(
    wsi: OpaquePointer?, reason: lws_callback_reasons, user: UnsafeMutableRawPointer?,
    input: UnsafeMutableRawPointer?, length: Int
) -> Int32 {
    guard let wsi, let generator = TabsyncLoop.EventLoop.owner(of: wsi, as: LoadGenerator.self) else { return 0 }
    return generator.handle(wsi: wsi, reason: reason, input: input, length: length)
}

/// Drives every connection of a bench on one libwebsockets client context, on the thread that calls
/// its phases (``connectAll()``, ``load(rate:warmup:duration:)``, ``closeAll()``): connects at the
/// ramp rate, sends ops by the clock (open loop: it never waits for answers), and measures answers
/// against one monotonic clock.
///
/// This file is the transport, and the only code of the bench that touches libwebsockets: the
/// context and its event loop, the callbacks, connecting, reassembling received messages, writing
/// and closing. The rest does no I/O: the phases and the tick (`LoadGenerator+Phases.swift`), what is
/// sent and how answers count (`LoadGenerator+Traffic.swift`), when things are due (``Schedule``),
/// the figures (``Measurement``) and each connection's state (``BenchConnection``).
///
/// Thread rule: everything, lws callbacks included, runs on the thread inside a phase; the object
/// is never shared with another thread.
final class LoadGenerator {
    let configuration: BenchConfiguration
    let progress: (@Sendable (BenchProgress) -> Void)?

    // MARK: the bench (no lws)

    /// nil in mirror mode.
    let format: WireFormat?
    var connections: [BenchConnection] = []
    var models: [WorkspaceModel]
    var random: SplitMix64
    let workspaceNames: [String]
    var schedule: Schedule
    var measurement = Measurement()
    var meter = BenchProgress.Meter()
    /// Called on this thread when the measured window starts and ends (server samples).
    var measureStartHook: (() -> Void)?
    var measureEndHook: (() -> Void)?

    // MARK: the transport (lws)

    /// The context on libev (epoll, `--event-loop epoll`) or lws' poll() loop.
    private var eventLoop: TabsyncLoop.EventLoop!
    private var tickTimer: LoopTimer!
    private let protocols: UnsafeMutablePointer<lws_protocols>
    private let scratch = ScratchWriter(capacity: 64 << 10)
    private var cStrings: [UnsafeMutablePointer<CChar>] = []
    /// Per server (``BenchConfiguration/servers``): the address to connect to and the Host header.
    private var cAddresses: [UnsafeMutablePointer<CChar>?] = []
    private var cHosts: [UnsafeMutablePointer<CChar>?] = []
    private var cProtocol: UnsafeMutablePointer<CChar>?
    private var cPaths: [UnsafeMutablePointer<CChar>?] = []

    init(configuration: BenchConfiguration, progress: (@Sendable (BenchProgress) -> Void)?) throws(BenchError) {
        self.configuration = configuration
        self.progress = progress
        switch configuration.mode {
        case .json: format = .json
        case .proto: format = .proto
        case .mirror: format = nil
        }
        models = Array(repeating: WorkspaceModel(), count: configuration.workspaces)
        random = SplitMix64(seed: configuration.seed)
        workspaceNames = (0..<configuration.workspaces).map { "\(configuration.workspacePrefix)-\($0)" }
        schedule = Schedule(ramp: configuration.ramp, timeLimit: configuration.timeLimit, drainSeconds: configuration.drainTimeout)
        protocols = .allocate(capacity: 2)
        protocols.initialize(repeating: lws_protocols(), count: 2)
        protocols[0].name = UnsafePointer(strdup("tabsync-bench"))
        protocols[0].callback = benchCallback

        FileLimit.raise()
        LWSLog.request(Int32(LLL_ERR))
        var info = lws_context_creation_info()
        info.port = clws_port_no_listen()
        info.protocols = UnsafePointer(protocols)
        info.gid = -1
        info.uid = -1
        info.timeout_secs = 20
        info.connect_timeout_secs = 20
        do throws(TabsyncLoop.EventLoop.Error) {
            eventLoop = try TabsyncLoop.EventLoop(
                info, backend: configuration.eventLoop == .epoll ? .epoll : .poll, fallbackToPoll: false)
        } catch {
            free(UnsafeMutableRawPointer(mutating: protocols[0].name))
            protocols.deallocate()
            throw .cannotStart("\(error)")
        }

        for server in configuration.servers {
            cAddresses.append(keep(server.host))
            let bracketed = server.host.contains(":") ? "[\(server.host)]" : server.host
            cHosts.append(keep("\(bracketed):\(server.port)"))
        }
        cProtocol = keep(configuration.mode.subprotocol)
        // A session connects on its workspace's path, so that a proxy routes it by workspace
        // (docs/design.md, "The protocol in brief"); the mirror names its workspace in the query.
        cPaths = workspaceNames.map { name in
            keep(configuration.mode == .mirror ? "/?mirror=\(name)" : "/v1/workspaces/\(name)/ws")
        }
        for workspace in 0..<configuration.workspaces {
            for _ in 0..<configuration.clientsPerWorkspace {
                // Round-robin over the servers by connection, so every workspace spans them.
                let index = connections.count
                connections.append(BenchConnection(
                    index: index, workspace: workspace, node: index % configuration.servers.count))
            }
        }
        tickTimer = LoopTimer(on: eventLoop) { [unowned self] in self.tick() }
        eventLoop.setOwner(self)
    }

    deinit {
        // The timer first (it cancels through the context), then the context, which closes every
        // connection with callbacks into this generator, still alive here.
        tickTimer = nil
        eventLoop?.destroy()
        cStrings.forEach { free($0) }
        free(UnsafeMutableRawPointer(mutating: protocols[0].name))
        protocols.deallocate()
    }

    private func keep(_ text: String) -> UnsafeMutablePointer<CChar>? {
        guard let copy = strdup(text) else { return nil }
        cStrings.append(copy)
        return copy
    }

    // MARK: the loop

    /// Runs the event loop (callbacks and ticks) until `done` holds.
    func service(until done: () -> Bool) {
        while !done() {
            if !eventLoop.runOnce() { break }
        }
    }

    /// Runs ``tick()`` in a millisecond.
    func armTick() {
        tickTimer.schedule(after: .milliseconds(1))
    }

    // MARK: connecting and closing

    /// Starts `connection`'s connect (its state becomes `.connecting`, or `.closed` when it cannot start).
    func open(_ connection: BenchConnection, now: UInt64) {
        connection.state = .connecting
        connection.connectStart = now
        var info = lws_client_connect_info()
        info.context = eventLoop.context
        info.address = UnsafePointer(cAddresses[connection.node])
        info.port = Int32(configuration.servers[connection.node].port)
        info.path = UnsafePointer(cPaths[connection.workspace])
        info.host = UnsafePointer(cHosts[connection.node])
        // No Origin header: this is not a browser page (servers refuse origins they do not allow).
        info.protocol = UnsafePointer(cProtocol)
        info.opaque_user_data = UnsafeMutableRawPointer(bitPattern: connection.index + 1)
        let wsi = lws_client_connect_via_info(&info)
        if wsi == nil && connection.state == .connecting {
            connectFailed(connection, reason: "could not start connecting")
        } else if connection.state == .connecting, connection.wsi == nil {
            connection.wsi = wsi
        }
    }

    /// Closes `connection` (1000, "bench done") from its next writable callback.
    func requestClose(_ connection: BenchConnection) {
        connection.closing = true
        lws_callback_on_writable(connection.wsi)
    }

    /// Drops `connection`'s socket without a close handshake (a connection given up on).
    func abandon(_ connection: BenchConnection) {
        if let wsi = connection.wsi { lws_set_timeout(wsi, PENDING_TIMEOUT_CLOSE_SEND, LWS_TO_KILL_ASYNC) }
    }

    // MARK: callbacks

    private func connection(of wsi: OpaquePointer) -> BenchConnection? {
        let bits = Int(bitPattern: lws_get_opaque_user_data(wsi))
        guard bits >= 1, bits <= connections.count else { return nil }
        return connections[bits - 1]
    }

    fileprivate func handle(wsi: OpaquePointer, reason: lws_callback_reasons, input: UnsafeMutableRawPointer?, length: Int) -> Int32 {
        switch reason {
        case LWS_CALLBACK_CLIENT_CONNECTION_ERROR:
            guard let connection = connection(of: wsi), connection.state != .closed else { return 0 }
            let message = input.map { String(cString: $0.assumingMemoryBound(to: CChar.self)) } ?? "connection failed"
            connection.wsi = nil
            connectFailed(connection, reason: message)
            return 0
        case LWS_CALLBACK_CLIENT_ESTABLISHED:
            guard let connection = connection(of: wsi) else { return -1 }
            connection.wsi = wsi
            if let hello = established(connection) {
                connection.queue.append(hello)
                lws_callback_on_writable(wsi)
            }
            return 0
        case LWS_CALLBACK_CLIENT_RECEIVE:
            guard let connection = connection(of: wsi) else { return -1 }
            let bytes = UnsafeRawBufferPointer(start: input, count: input == nil ? 0 : length)
            let whole = lws_is_final_fragment(wsi) != 0 && lws_remaining_packet_payload(wsi) == 0
            if connection.receiveBuffer.isEmpty && whole {
                received(connection, bytes)
            } else {
                connection.receiveBuffer.append(contentsOf: bytes)
                if whole {
                    let message = connection.receiveBuffer
                    connection.receiveBuffer = []
                    message.withUnsafeBytes { received(connection, $0) }
                }
            }
            return 0
        case LWS_CALLBACK_CLIENT_WRITEABLE:
            guard let connection = connection(of: wsi) else { return -1 }
            return write(connection, wsi: wsi)
        case LWS_CALLBACK_WS_PEER_INITIATED_CLOSE:
            guard let connection = connection(of: wsi) else { return 0 }
            if let input, length >= 2 {
                let bytes = UnsafeRawBufferPointer(start: input, count: length)
                connection.peerCloseCode = UInt16(bytes[0]) << 8 | UInt16(bytes[1])
            } else {
                connection.peerCloseCode = 1005
            }
            return 0
        case LWS_CALLBACK_CLIENT_CLOSED:
            guard let connection = connection(of: wsi), connection.state != .closed else { return 0 }
            closed(connection, code: connection.peerCloseCode ?? 1006)
            connection.wsi = nil
            return 0
        default:
            return 0
        }
    }

    // MARK: writing

    /// Sends `frame` on `connection`: straight out when nothing waits before it (no writable round
    /// trip through the loop), else after the frames queued before it. A refused write drops the
    /// connection; without a socket nothing is sent.
    func send(_ frame: [UInt8], on connection: BenchConnection) {
        guard let wsi = connection.wsi else { return }
        if connection.queueHead == connection.queue.count && BatchedWriter.mayWrite(wsi) {
            if !writeFrame(frame, wsi: wsi) { lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC) }
        } else {
            connection.queue.append(frame)
            lws_callback_on_writable(wsi)
        }
    }

    private func write(_ connection: BenchConnection, wsi: OpaquePointer) -> Int32 {
        if connection.closing {
            var reason = Array("bench done".utf8)
            reason.withUnsafeMutableBufferPointer { buffer in
                lws_close_reason(wsi, LWS_CLOSE_STATUS_NORMAL, buffer.baseAddress, buffer.count)
            }
            return -1
        }
        while connection.queueHead < connection.queue.count, BatchedWriter.mayWrite(wsi) {
            if !writeFrame(connection.queue[connection.queueHead], wsi: wsi) { return -1 }
            connection.queueHead += 1
        }
        if connection.queueHead == connection.queue.count {
            connection.queue.removeAll(keepingCapacity: true)
            connection.queueHead = 0
        } else {
            lws_callback_on_writable(wsi)
        }
        return 0
    }

    /// One `lws_write` of a frame through the scratch buffer (which has lws' headroom); false when
    /// lws refused it. What the socket does not take at once, lws keeps and sends on POLLOUT.
    private func writeFrame(_ frame: [UInt8], wsi: OpaquePointer) -> Bool {
        scratch.write(frame, binary: !(format?.usesTextFrames ?? true), to: wsi) >= 0
    }
}
