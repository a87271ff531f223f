import CLibwebsockets
import Foundation
import Logging
import TabsyncCore
import TabsyncLoop
import TabsyncProto
import TabsyncServerCore
import TabsyncStore

/// The event loop thread's driver of the ``ServerCore``: owns the lws context, turns lws callbacks,
/// store answers, token checks and the core's deadline into core events, and carries out the core's
/// actions (queue and write frames, close, store calls on the server's store executor, token
/// checks, HTTP answers). It makes no protocol decision of its own (docs/architecture.md).
///
/// Must be used on the event loop thread only (the thread that created it, which runs the
/// ``TabsyncLoop/EventLoop``); lws callbacks reach it as the event loop's owner. Not `Sendable`.
final class LoopDriver {
    let server: Server
    let configuration: Server.Configuration
    let logger: Logger
    let clock = ContinuousClock()
    /// The event loop thread: the one that created the driver (checked in debug builds).
    private let ownerThread = pthread_self()

    /// Every decision; fed one event at a time by ``dispatch(_:)``.
    var core: ServerCore
    /// The driver's own counts (writes, refusals, reloads), rendered with the core's at `/metrics`.
    var metrics = DriverMetrics()
    /// Carries out the core's store and holder-registry actions (on the store executor only).
    let storeTurn: StoreTurn
    /// The core's actions for the event being carried out (kept to reuse its storage).
    private var actions: [ServerCore.Action] = []
    /// Events raised while carrying out actions (a send queue over its bound): handled after.
    private var raised: [ServerCore.Event] = []
    private var dispatching = false

    /// The lws context and the loop it runs on; nil before ``createContext(address:)`` succeeds and
    /// after ``destroyContext()``.
    private(set) var eventLoop: TabsyncLoop.EventLoop?
    /// Set when the loop should stop running iterations.
    private(set) var finished = false

    var connections: [Int: Connection] = [:]
    /// Connections that queued frames during this loop iteration (``flushQueued()``), and the list
    /// being flushed (swapped, so neither allocates in steady state).
    var flushList: [Connection] = []
    var flushing: [Connection] = []
    /// Sends connections' queued frames, several in one write where allowed.
    let writer = BatchedWriter()
    private var nextId = 1
    /// HTTP requests the core has not answered yet, by request id (in lws per-session memory).
    var pendingHTTP: [Int: PendingHTTP] = [:]
    /// The request being routed: an answer the core gives at once is written in the same callback.
    var routing: Int?
    /// Open change feeds (`/events`, LoopDriver+Feed.swift), by request id.
    var feedStreams: [Int: FeedStream] = [:]
    /// The workspace each upgrade's path named (`/v1/workspaces/{id}/ws`), from its confirmed
    /// upgrade to its `ESTABLISHED` (or its end, if the handshake fails in between).
    var upgradeWorkspaces: [OpaquePointer: String] = [:]
    /// Connections accepted and not yet destroyed (HTTP and WebSocket).
    private(set) var openConnections = 0
    /// When the graceful stop began (nil: running).
    private(set) var shutdownStarted: ContinuousClock.Instant?
    private var refusedConnectionsLogged: ContinuousClock.Instant?
    /// Per-address limits and the origin policy (LoopDriver+Admission.swift).
    var admission: Admission

    /// An HTTP request waiting for the core's answer.
    struct PendingHTTP {
        var wsi: OpaquePointer
        var response: HTTPResponse?
        /// An admin API call whose body is being read (``LoopDriver/handleHTTP``).
        var admin: PendingAdmin? = nil
    }

    /// An admin call as it came: method, path, query, and its body so far.
    struct PendingAdmin {
        var method: String
        var path: String
        var query: String
        var body: [UInt8] = []
        var tooLarge = false
        /// The most body bytes taken: ``AdminRequest/maxBodyBytes``, or the frame limit for a write.
        var limit = AdminRequest.maxBodyBytes
    }

    // C memory alive as long as the context.
    private let protocols: UnsafeMutablePointer<lws_protocols>
    private var cStrings: [UnsafeMutablePointer<CChar>] = []
    private let retryPolicy: UnsafeMutablePointer<lws_retry_bo_t>
    /// The payload of every keepalive ping (``pingPayloadBytes`` of "tabsync!"), after lws'
    /// `LWS_PRE` headroom for its header.
    let pingBuffer: UnsafeMutablePointer<UInt8>
    static let pingPayloadBytes = 8
    /// The one timer: ``ServerCore/nextDeadline``, armed after every dispatch (``armDeadline()``),
    /// made with the context. A Dispatch timer that posts ``ServerCore/Event/timeout`` through the
    /// inbox rather than an lws one: on libev, lws 4.1.6 does not move its own timer earlier while
    /// it waits (``TabsyncLoop/LoopTimer``), and the core's deadline often moves earlier (a batch
    /// lingering a few milliseconds while the next deadline is a heartbeat seconds away).
    private var deadlineTimer: DispatchSourceTimer?
    /// The deadline ``deadlineTimer`` is armed for (nil: none).
    private var armedDeadline: ContinuousClock.Instant?
    /// lws' own deadlines (handshake timeouts, a closing connection's grace) run only when lws'
    /// libev timer fires, and lws 4.1.6 does not move that timer earlier while it waits
    /// (``TabsyncLoop/LoopTimer``): a deadline added while the loop waits for a later one, or for
    /// none, would wait with it. This lws timer, re-armed every ``lwsServiceInterval``, bounds how
    /// late they run; the core's deadlines (keepalive included) do not depend on it.
    private var lwsServiceTimer: LoopTimer?
    /// A quarter of the idle timeout, at most a second.
    private var lwsServiceInterval: Duration {
        min(.seconds(1), max(.milliseconds(100), configuration.idleTimeout / 4))
    }
    /// Messages taken from the inbox, being handled (kept to reuse its storage).
    private var inboxMessages: [Server.Inbound] = []

    /// Index of each protocol in `protocols`.
    static let httpProtocol = 0
    /// The diagnostics echo subprotocol (`--diagnostics-echo`), the target of WebSocket
    /// conformance suites (scripts/autobahn): each message comes back whole as one frame.
    static let echoSubprotocol = "tabsync.echo"
    /// Its index in the protocol list: after `http` and the wire formats.
    static var echoProtocol: Int { 1 + WireFormat.allCases.count }

    init(server: Server) {
        self.server = server
        configuration = server.configuration
        logger = server.logger
        var settings = server.configuration.coreSettings(storeEpoch: server.stores.store.epoch)
        settings.nodeName = server.nodeName
        settings.adminLog = server.startupAdminLog.withLock { $0 }
        core = ServerCore(settings: settings, logger: server.logger, now: .now)
        storeTurn = StoreTurn(stores: server.stores, holders: server.configuration.sharedStore?.holders, logger: server.logger)
        admission = Admission(configuration: server.configuration, loopbackBind: true)
        // http, the wire formats, the diagnostics echo (named only when on), the terminator.
        protocols = .allocate(capacity: 1 + WireFormat.allCases.count + 2)
        protocols.initialize(repeating: lws_protocols(), count: 1 + WireFormat.allCases.count + 2)
        retryPolicy = .allocate(capacity: 1)
        retryPolicy.initialize(to: lws_retry_bo_t())
        pingBuffer = .allocate(capacity: clws_pre() + Self.pingPayloadBytes)
        pingBuffer.initialize(repeating: 0, count: clws_pre())
        (pingBuffer + clws_pre()).initialize(from: Array("tabsync!".utf8), count: Self.pingPayloadBytes)
    }

    deinit {
        protocols.deallocate()
        retryPolicy.deallocate()
        pingBuffer.deallocate()
        for s in cStrings { free(s) }
    }

    /// The bytes lws holds for each WebSocket connection's incoming frames (docs/architecture.md,
    /// "An idle connection's memory"): enough for most ops in one piece.
    static let receiveBufferBytes = 1_024
    /// The most lws writes to a WebSocket connection's socket at once (the rest waits for the next
    /// writable callback): lws' service buffer, as before the receive buffer shrank.
    static let sendPieceBytes = 4_096

    func cString(_ s: String) -> UnsafeMutablePointer<CChar> {
        let p = strdup(s)!
        cStrings.append(p)
        return p
    }

    /// Creates the context and its one vhost, bound to exactly `address`, on the configured event
    /// loop (poll() when epoll is unavailable); returns the bound port. The inbox wakes the loop
    /// from here on.
    func createContext(address: Server.ResolvedHost) -> Result<Int, Server.Error> {
        let names = ["http"] + WireFormat.allCases.map(\.subprotocol)
            + (configuration.diagnosticsEcho ? [Self.echoSubprotocol] : [])
        for (i, name) in names.enumerated() {
            protocols[i].name = UnsafePointer(cString(name))
            protocols[i].callback = lwsCallback
            protocols[i].per_session_data_size = MemoryLayout<Int>.stride
            // A WebSocket connection's receive buffer is allocated at its upgrade and held for its
            // life: lws' default (the 4 KiB service buffer) was most of an idle connection's RSS.
            // A frame longer than the buffer arrives in pieces, which the driver joins.
            protocols[i].rx_buffer_size = i == 0 ? 0 : Self.receiveBufferBytes
            // lws caps each send at tx_packet_size, or at rx_buffer_size when that is 0: named, so
            // the small receive buffer does not cut sends (a large snapshot would take a writable
            // round trip per KiB). 4 KiB is what it was before.
            protocols[i].tx_packet_size = i == 0 ? 0 : Self.sendPieceBytes
            protocols[i].id = UInt32(i)
        }
        // Liveness is the core's (ServerCore+Keepalive.swift): a policy with no hangup turns lws'
        // validity timers off (without one lws would use its own, 300 s / 310 s). Those timers sat
        // in lws' sorted per-thread list, one per connection, re-sorted on every ping, pong and
        // frame: idle CPU grew with the square of the connections (issue 40).
        retryPolicy.pointee.secs_since_valid_ping = 0
        retryPolicy.pointee.secs_since_valid_hangup = 0

        var info = lws_context_creation_info()
        info.port = Int32(configuration.port)
        info.iface = UnsafePointer(cString(address.address))
        info.protocols = UnsafePointer(protocols)
        info.vhost_name = UnsafePointer(cString("tabsync"))
        info.options = clws_option_validate_utf8() | (address.isIPv6 ? 0 : clws_option_disable_ipv6())
        info.retry_and_idle_policy = UnsafePointer(retryPolicy)
        info.timeout_secs = 10
        // Transport security: TLS from the configuration, admission policies for this bind.
        prepareTransportSecurity(&info, address: address)
        let wanted: TabsyncLoop.EventLoop.Backend = configuration.eventLoop == .epoll ? .epoll : .poll
        let eventLoop: TabsyncLoop.EventLoop
        do {
            eventLoop = try TabsyncLoop.EventLoop(info, backend: wanted, fallbackToPoll: true, owner: self)
        } catch {
            return .failure(.listenFailed("lws_create_context failed for \(address.address):\(configuration.port)"))
        }
        if eventLoop.backend != wanted {
            // Most likely lws' libev plugin is missing (Debian: libwebsockets-evlib-ev).
            logger.warning("the epoll event loop is unavailable (is libwebsockets-evlib-ev installed?): using poll()")
        }
        guard let vhost = lws_get_vhost_by_name(eventLoop.context, "tabsync") else {
            eventLoop.destroy()
            return .failure(.listenFailed("no vhost"))
        }
        let port = Int(lws_get_vhost_listen_port(vhost))
        guard port > 0 else {
            eventLoop.destroy()
            return .failure(.listenFailed("could not bind \(address.address):\(configuration.port)"))
        }
        self.eventLoop = eventLoop
        server.inbox.attach(eventLoop)
        let timer = DispatchSource.makeTimerSource(queue: .global())
        let inbox = server.inbox
        timer.setEventHandler { inbox.post(.event(.timeout)) }
        timer.activate()
        deadlineTimer = timer
        armDeadline()
        let service = LoopTimer(on: eventLoop) { [unowned self] in
            self.lwsServiceTimer?.schedule(after: self.lwsServiceInterval)
        }
        service.schedule(after: lwsServiceInterval)
        lwsServiceTimer = service
        return .success(port)
    }

    /// After ``run()``: closes the inbox, then destroys the context (lws closes what is still open,
    /// with callbacks into this driver) and forgets every connection.
    func destroyContext() {
        server.inbox.close()
        deadlineTimer?.cancel()
        deadlineTimer = nil
        lwsServiceTimer?.cancel()
        lwsServiceTimer = nil
        eventLoop?.destroy()
        eventLoop = nil
        connections.removeAll()
        pendingHTTP.removeAll()
    }

    /// Runs the event loop until ``finished``: one wakeup's ready events per iteration.
    func run() {
        guard let eventLoop else { return }
        while !finished {
            eventLoop.runOnce()
            flushQueued()
        }
    }

    // MARK: the core

    /// Hands one event to the core and carries out its actions, in order; events those actions
    /// raise are handled after them, never inside them.
    func dispatch(_ event: ServerCore.Event) {
        raised.append(event)
        guard !dispatching else { return }
        dispatching = true
        defer { dispatching = false }
        var next = 0
        while next < raised.count {
            let event = raised[next]
            next += 1
            core.handle(event, now: clock.now, into: &actions)
            for action in actions { perform(action) }
            actions.removeAll(keepingCapacity: true)
        }
        raised.removeAll(keepingCapacity: true)
        armDeadline()
    }

    /// Arms the one timer for the core's next deadline, when it moved (a timeout re-arms it even
    /// when it did not: ``drainInbox()``).
    private func armDeadline() {
        guard let timer = deadlineTimer, core.nextDeadline != armedDeadline else { return }
        armedDeadline = core.nextDeadline
        guard let deadline = armedDeadline else { return timer.schedule(deadline: .distantFuture) }
        let (seconds, attoseconds) = max(.zero, clock.now.duration(to: deadline)).components
        let micros = seconds * 1_000_000 + (attoseconds + 999_999_999_999) / 1_000_000_000_000
        timer.schedule(deadline: .now() + .microseconds(Int(min(micros, Int64(Int32.max)))))
    }

    /// Carries out one action of the core.
    private func perform(_ action: ServerCore.Action) {
        switch action {
        case .send(let id, let message):
            guard let connection = connections[id], connection.isOpen else { return }
            queue(OutFrame(bytes: connection.format.encode(message), isBinary: !connection.format.usesTextFrames), to: connection)
        case .broadcast(let ids, let message):
            var proto: OutFrame?
            var json: OutFrame?
            for id in ids {
                guard let connection = connections[id], connection.isOpen else { continue }
                switch connection.format {
                case .proto:
                    if proto == nil { proto = OutFrame(bytes: WireFormat.proto.encode(message), isBinary: true) }
                    queue(proto!, to: connection)
                case .json:
                    if json == nil { json = OutFrame(bytes: WireFormat.json.encode(message), isBinary: false) }
                    queue(json!, to: connection)
                }
            }
        case .ping(let id):
            guard let connection = connections[id], connection.isOpen else { return }
            if !connection.awaitingWritable, connection.queue.isEmpty, connection.ownsConnection,
               BatchedWriter.mayWrite(connection.wsi) {
                // Nothing waits ahead of it: written at once, without a round trip through
                // SERVER_WRITEABLE (BatchedWriter: a write outside it is fine under the same check).
                if !writePing(connection) {
                    close(connection, code: CloseReason.writeFailed.code, reason: CloseReason.writeFailed.text, flush: false)
                }
                return
            }
            connection.pingPending = true
            if !connection.awaitingWritable {
                connection.awaitingWritable = true
                lws_callback_on_writable(connection.wsi)
            }
        case .echo(let id, let bytes, let binary):
            guard let connection = connections[id], connection.isOpen else { return }
            queue(OutFrame(bytes: bytes, isBinary: binary), to: connection)
        case .close(let id, let reason, let grace):
            guard let connection = connections[id] else { return }
            if reason.isLoggedEachTime {
                logger.log(level: reason.logLevel, "session closed", metadata: [
                    "session": "\(id)", "code": "\(reason.code)", "reason": "\(reason.text)",
                ])
            }
            close(connection, code: reason.code, reason: reason.text, flush: reason.flushesQueue, grace: grace)
        case .hold, .load, .commit, .readChanges, .pollVersions, .release, .checkHolders, .heartbeat, .admin, .readHistory:
            // One store turn on the store executor (serial: store calls never overlap); its answer
            // comes back to the loop as an event through the inbox.
            let (turn, inbox, deliverer) = (storeTurn, server.inbox, server.deliverer)
            server.storeExecutor.async {
                let event = turn.answer(action)
                if let deliverer, let event { WebhookDeliverer.wake(deliverer, after: action, answered: event) }
                if let event { inbox.post(.event(event)) }
            }
        case .verifyToken(let request, let token):
            guard let verifier = configuration.accessTokens else {
                return raised.append(.tokenVerified(request, .failure(.missingToken)))
            }
            let inbox = server.inbox
            verifier.verify(token, now: Date()) { result in inbox.post(.event(.tokenVerified(request, result))) }
        case .feedOpen(let id):
            guard let pending = pendingHTTP.removeValue(forKey: id) else { return }
            feedStreams[id] = FeedStream(wsi: pending.wsi)
            lws_callback_on_writable(pending.wsi)
        case .feedWrite(let id, let bytes):
            queueFeed(id, bytes, raised: &raised)
        case .feedClose(let id):
            guard feedStreams[id] != nil else { return }
            feedStreams[id]!.ending = true
            lws_callback_on_writable(feedStreams[id]!.wsi)
        case .respond(let id, let response):
            guard pendingHTTP[id] != nil else { return }
            pendingHTTP[id]!.response = response
            if routing != id { lws_callback_on_writable(pendingHTTP[id]!.wsi) }
        case .stop:
            finished = true
            eventLoop?.wake()
        }
    }

    // MARK: callback dispatch

    /// Every lws callback for this context lands here.
    func handle(
        _ wsi: OpaquePointer, _ reason: lws_callback_reasons, _ user: UnsafeMutableRawPointer?,
        _ input: UnsafeMutableRawPointer?, _ length: Int
    ) -> Int32 {
        assert(pthread_equal(pthread_self(), ownerThread) != 0, "LoopDriver used off its event loop thread")
        let protocolId = Int(lws_get_protocol(wsi)?.pointee.id ?? 0)
        switch reason {
        case LWS_CALLBACK_EVENT_WAIT_CANCELLED:
            drainInbox()
            return 0
        case LWS_CALLBACK_FILTER_NETWORK_CONNECTION:
            return acceptConnection() && admitPeer(user) ? 0 : 1
        case LWS_CALLBACK_WSI_CREATE:
            openConnections += 1
            peerConnectionCreated(wsi)
            return 0
        case LWS_CALLBACK_WSI_DESTROY:
            openConnections = max(0, openConnections - 1)
            peerConnectionDestroyed(wsi)
            upgradeWorkspaces[wsi] = nil
            return 0
        default:
            break
        }
        if protocolId == Self.httpProtocol {
            return handleHTTP(wsi, reason, user, input, length)
        }
        if protocolId == Self.echoProtocol {
            guard configuration.diagnosticsEcho else { return 0 }
            return handleWebSocket(wsi, .proto, reason, user, input, length, echo: true)
        }
        guard let format = WireFormat.allCases.dropFirst(protocolId - 1).first else { return 0 }
        return handleWebSocket(wsi, format, reason, user, input, length)
    }

    /// While draining, connections are still accepted, so that `/healthz` answers 503 `draining`
    /// and a proxy takes the node out of rotation; a WebSocket completed meanwhile is closed 1001
    /// at once (docs/design.md, "Durability": Shutdown).
    private func acceptConnection() -> Bool {
        guard openConnections >= configuration.maxConnections else { return true }
        metrics.connectionsRefused[.maxConnections, default: 0] += 1
        let now = clock.now
        if refusedConnectionsLogged.map({ now - $0 > .seconds(10) }) ?? true {
            refusedConnectionsLogged = now
            logger.warning("connection refused: at max-connections", metadata: ["max": "\(configuration.maxConnections)"])
        }
        return false
    }

    /// A fresh id for a connection or HTTP request (never 0).
    func makeId() -> Int {
        defer { nextId += 1 }
        return nextId
    }

    // MARK: cross-thread work

    private func drainInbox() {
        server.inbox.take(into: &inboxMessages)
        defer { inboxMessages.removeAll(keepingCapacity: true) }
        for message in inboxMessages {
            switch message {
            case .event(let event):
                // The timer fired: arm it again whatever the core now says (it may have fired a
                // little before the core's clock reached the deadline).
                if case .timeout = event { armedDeadline = nil }
                if case .shutdown = event, shutdownStarted == nil {
                    shutdownStarted = clock.now
                    logger.notice("shutting down", metadata: ["connections": "\(openConnections)"])
                }
                dispatch(event)
            case .reloadCertificates:
                reloadCertificates()
            }
        }
    }
}

/// The one lws callback for every protocol (a C function pointer): finds the driver as the event
/// loop's owner. Runs on the event loop thread.
private func lwsCallback(
    _ wsi: OpaquePointer?, _ reason: lws_callback_reasons, _ user: UnsafeMutableRawPointer?,
    _ input: UnsafeMutableRawPointer?, _ length: Int
) -> Int32 {
    guard let wsi, let driver = TabsyncLoop.EventLoop.owner(of: wsi, as: LoopDriver.self) else {
        return lws_callback_http_dummy(wsi, reason, user, input, length)
    }
    return driver.handle(wsi, reason, user, input, length)
}
