import TabsyncCore
import CLibwebsockets
import Foundation
import TabsyncLoop
import TabsyncProto

/// The lws callback of every churn connection: finds the generator through its event loop's owner.
private func churnCallback(
    wsi: OpaquePointer?, reason: lws_callback_reasons, user: UnsafeMutableRawPointer?,
    input: UnsafeMutableRawPointer?, length: Int
) -> Int32 {
    guard let wsi, let generator = TabsyncLoop.EventLoop.owner(of: wsi, as: ChurnGenerator.self) else { return 0 }
    return generator.handle(wsi: wsi, reason: reason, input: input, length: length)
}

/// Drives the churn bench's clients on one libwebsockets client context, on the thread that calls
/// ``run(until:)``: connects them, drops their sockets abruptly (no close frame), stalls some
/// readers, reconnects with back-off and resumes (`ChurnGenerator+Traffic.swift` holds what is sent
/// and how answers count; ``ChurnLedger`` the record they are checked against).
///
/// This file is the transport: the context, the callbacks, connecting, reassembling, writing,
/// dropping and pausing reads.
///
/// Thread rule: everything, lws callbacks included, runs on the thread inside ``run(until:)``.
final class ChurnGenerator {
    let configuration: ChurnConfiguration
    let format: WireFormat
    var clients: [ChurnClient] = []
    let workspaceNames: [String]
    var ledger: ChurnLedger
    var random: SplitMix64
    var stats = ChurnStats()
    /// What the tick does: churn (drops, stalls, ops), settle (reconnect and answer everything),
    /// verify (a snapshot per workspace).
    var phase = ChurnPhase.churn
    var phaseStart: UInt64 = 0
    var opsDue = 0.0
    var lastTick: UInt64 = 0
    var lastReport: UInt64 = 0
    let log: (String) -> Void
    /// Every Welcome, when `--welcome-log` names a file.
    let welcomeLog: WelcomeLog?

    private var eventLoop: TabsyncLoop.EventLoop!
    private var tickTimer: LoopTimer!
    private let protocols: UnsafeMutablePointer<lws_protocols>
    /// The context's retry and idle policy (lws keeps a pointer to it for the context's life).
    private let retryPolicy: UnsafeMutablePointer<lws_retry_bo_t>
    private let scratch = ScratchWriter(capacity: 64 << 10)
    private var cStrings: [UnsafeMutablePointer<CChar>] = []
    private var cAddress: UnsafeMutablePointer<CChar>?
    private var cHost: UnsafeMutablePointer<CChar>?
    private var cProtocol: UnsafeMutablePointer<CChar>?
    /// Each workspace's session path, `/v1/workspaces/{name}/ws` (docs/design.md, "The protocol in brief").
    private var cPaths: [UnsafeMutablePointer<CChar>?] = []

    init(configuration: ChurnConfiguration, log: @escaping (String) -> Void) throws(BenchError) {
        self.configuration = configuration
        self.log = log
        welcomeLog = try configuration.welcomeLogPath.map { path throws(BenchError) in try WelcomeLog(path: path) }
        let base = configuration.base
        format = base.mode == .json ? .json : .proto
        workspaceNames = (0..<base.workspaces).map { "\(base.workspacePrefix)-\($0)" }
        ledger = ChurnLedger(workspaces: base.workspaces)
        random = SplitMix64(seed: base.seed)
        protocols = .allocate(capacity: 2)
        protocols.initialize(repeating: lws_protocols(), count: 2)
        retryPolicy = .allocate(capacity: 1)
        retryPolicy.initialize(to: lws_retry_bo_t())
        protocols[0].name = UnsafePointer(strdup("tabsync-churn"))
        protocols[0].callback = churnCallback
        // Room for the receive buffer of a snapshot with many tabs (reassembled anyway).
        protocols[0].rx_buffer_size = 0

        FileLimit.raise()
        LWSLog.request(Int32(LLL_ERR))
        var info = lws_context_creation_info()
        info.port = clws_port_no_listen()
        info.protocols = UnsafePointer(protocols)
        info.gid = -1
        info.uid = -1
        info.timeout_secs = 20
        info.connect_timeout_secs = 10
        // No validity timers (lws' default policy pings after 300 s): each sat in lws' sorted
        // per-thread timer list and was moved on every frame received, so a bench holding 19,000
        // clients spent its loop walking that list and, in a reconnect storm, sent no Hello within
        // the server's 10 s (docs/architecture.md, "Keepalive is the core's"). The server pings.
        retryPolicy.pointee.secs_since_valid_ping = 0
        retryPolicy.pointee.secs_since_valid_hangup = 0
        info.retry_and_idle_policy = UnsafePointer(retryPolicy)
        do throws(TabsyncLoop.EventLoop.Error) {
            eventLoop = try TabsyncLoop.EventLoop(
                info, backend: base.eventLoop == .epoll ? .epoll : .poll, fallbackToPoll: false)
        } catch {
            free(UnsafeMutableRawPointer(mutating: protocols[0].name))
            protocols.deallocate()
            retryPolicy.deallocate()
            throw .cannotStart("\(error)")
        }
        cAddress = keep(base.host)
        let bracketed = base.host.contains(":") ? "[\(base.host)]" : base.host
        cHost = keep("\(bracketed):\(base.port)")
        cProtocol = keep(base.mode.subprotocol)
        cPaths = workspaceNames.map { keep("/v1/workspaces/\($0)/ws") }
        for workspace in 0..<base.workspaces {
            for _ in 0..<base.clientsPerWorkspace {
                clients.append(ChurnClient(index: clients.count, workspace: workspace))
            }
        }
        tickTimer = LoopTimer(on: eventLoop) { [unowned self] in self.tick() }
        eventLoop.setOwner(self)
    }

    deinit {
        tickTimer = nil
        eventLoop?.destroy()
        cStrings.forEach { free($0) }
        free(UnsafeMutableRawPointer(mutating: protocols[0].name))
        protocols.deallocate()
        retryPolicy.deallocate()
    }

    private func keep(_ text: String) -> UnsafeMutablePointer<CChar>? {
        guard let copy = strdup(text) else { return nil }
        cStrings.append(copy)
        return copy
    }

    /// Runs the event loop and the tick (every 5 ms) until `done` holds.
    func run(until done: () -> Bool) {
        tickTimer.schedule(after: .milliseconds(5))
        while !done() {
            if !eventLoop.runOnce() { break }
        }
    }

    /// Ends the current wait, so ``run(until:)`` checks its condition again.
    func wake() {
        eventLoop.wake()
    }

    func armTick() {
        tickTimer.schedule(after: .milliseconds(5))
    }

    // MARK: connecting, dropping, pausing

    /// Starts `client`'s connect (a new generation).
    func open(_ client: ChurnClient, now: UInt64) {
        client.generation &+= 1
        client.resetTransport()
        client.state = .connecting
        stats.connects += 1
        var info = lws_client_connect_info()
        info.context = eventLoop.context
        info.address = UnsafePointer(cAddress)
        info.port = Int32(configuration.base.port)
        info.path = UnsafePointer(cPaths[client.workspace])
        info.host = UnsafePointer(cHost)
        info.protocol = UnsafePointer(cProtocol)
        let bits = Int(client.generation & 0x7FF) << 20 | (client.index + 1)
        info.opaque_user_data = UnsafeMutableRawPointer(bitPattern: bits)
        let generation = client.generation
        let wsi = lws_client_connect_via_info(&info)
        guard client.generation == generation else { return }  // failed inside, already handled
        if wsi == nil {
            if client.state == .connecting { connectFailed(client, reason: "could not start connecting", now: now) }
        } else if client.wsi == nil {
            client.wsi = wsi
        }
    }

    /// Closes `client`'s socket without a close frame (the peer sees the TCP stream end) and
    /// forgets it: no callback of that socket reaches the client again.
    func drop(_ client: ChurnClient) {
        if let wsi = client.wsi {
            let fd = lws_get_socket_fd(wsi)
            if fd >= 0 { shutdown(fd, Int32(SHUT_RDWR)) }
            lws_set_timeout(wsi, PENDING_TIMEOUT_CLOSE_SEND, LWS_TO_KILL_ASYNC)
        }
        client.generation &+= 1
        client.resetTransport()
        client.state = .waiting
    }

    /// Stops (`paused`) or resumes reading `client`'s socket.
    func setReading(_ client: ChurnClient, paused: Bool) {
        guard let wsi = client.wsi else { return }
        lws_rx_flow_control(wsi, paused ? 0 : 1)
        client.stalled = paused
    }

    // MARK: callbacks

    private func client(of wsi: OpaquePointer) -> ChurnClient? {
        let bits = Int(bitPattern: lws_get_opaque_user_data(wsi))
        let index = (bits & 0xFFFFF) - 1
        guard index >= 0, index < clients.count else { return nil }
        let client = clients[index]
        guard UInt32(bits >> 20) == client.generation & 0x7FF, client.state != .waiting else { return nil }
        return client
    }

    fileprivate func handle(wsi: OpaquePointer, reason: lws_callback_reasons, input: UnsafeMutableRawPointer?, length: Int) -> Int32 {
        switch reason {
        case LWS_CALLBACK_CLIENT_CONNECTION_ERROR:
            guard let client = client(of: wsi) else { return 0 }
            let message = input.map { String(cString: $0.assumingMemoryBound(to: CChar.self)) } ?? "connection failed"
            client.wsi = nil
            connectFailed(client, reason: message, now: monotonicNanos())
            return 0
        case LWS_CALLBACK_CLIENT_ESTABLISHED:
            guard let client = client(of: wsi) else { return -1 }
            client.wsi = wsi
            client.state = .open
            send(hello(for: client), on: client)
            return 0
        case LWS_CALLBACK_CLIENT_RECEIVE:
            guard let client = client(of: wsi) else { return -1 }
            let bytes = UnsafeRawBufferPointer(start: input, count: input == nil ? 0 : length)
            let whole = lws_is_final_fragment(wsi) != 0 && lws_remaining_packet_payload(wsi) == 0
            client.receiveBuffer.append(contentsOf: bytes)
            if whole {
                let message = client.receiveBuffer
                client.receiveBuffer = []
                received(client, message)
            }
            return 0
        case LWS_CALLBACK_CLIENT_WRITEABLE:
            guard let client = client(of: wsi) else { return -1 }
            return write(client, wsi: wsi)
        case LWS_CALLBACK_WS_PEER_INITIATED_CLOSE:
            guard let client = client(of: wsi) else { return 0 }
            if let input, length >= 2 {
                let bytes = UnsafeRawBufferPointer(start: input, count: length)
                client.peerCloseCode = UInt16(bytes[0]) << 8 | UInt16(bytes[1])
            } else {
                client.peerCloseCode = 1005
            }
            return 0
        case LWS_CALLBACK_CLIENT_CLOSED:
            guard let client = client(of: wsi) else { return 0 }
            let code = client.peerCloseCode ?? 1006
            client.generation &+= 1
            client.resetTransport()
            serverClosed(client, code: code, now: monotonicNanos())
            return 0
        case LWS_CALLBACK_WSI_DESTROY:
            // A connect lws gave up on without CONNECTION_ERROR or CLIENT_CLOSED (seen while the
            // server restarted): the client would wait forever; it reconnects instead.
            guard let client = client(of: wsi), client.state == .connecting || client.state == .open else { return 0 }
            connectFailed(client, reason: "socket destroyed before ready", now: monotonicNanos())
            return 0
        default:
            return 0
        }
    }

    // MARK: writing

    /// Sends `frame` on `client` straight out when nothing waits before it, else after the queue.
    func send(_ frame: [UInt8], on client: ChurnClient) {
        guard let wsi = client.wsi else { return }
        if client.queueHead == client.queue.count && BatchedWriter.mayWrite(wsi) {
            if scratch.write(frame, binary: !format.usesTextFrames, to: wsi) < 0 {
                lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC)
            }
        } else {
            client.queue.append(frame)
            lws_callback_on_writable(wsi)
        }
    }

    private func write(_ client: ChurnClient, wsi: OpaquePointer) -> Int32 {
        while client.queueHead < client.queue.count, BatchedWriter.mayWrite(wsi) {
            if scratch.write(client.queue[client.queueHead], binary: !format.usesTextFrames, to: wsi) < 0 { return -1 }
            client.queueHead += 1
        }
        if client.queueHead == client.queue.count {
            client.queue.removeAll(keepingCapacity: true)
            client.queueHead = 0
        } else {
            lws_callback_on_writable(wsi)
        }
        return 0
    }
}

/// What the churn tick is doing.
enum ChurnPhase {
    /// Ops at the rate, drops, stalls, reconnects.
    case churn
    /// No new ops, no drops: every client reconnects and every pending op is answered.
    case settle
    /// One client per workspace reconnects asking for a snapshot, compared with the ledger.
    case verify
    case done
}
