import CLibwebsockets
import Foundation
import Logging
import TabsyncCore
import TabsyncLoop
import TabsyncProto
import TabsyncStore

extension Server {
    /// Everything the event loop thread owns: the lws context, sessions, workspaces, the commit
    /// pipeline and metrics.
    ///
    /// Must be used on the event loop thread only (the thread that created it, which runs the
    /// ``TabsyncLoop/EventLoop``); lws callbacks reach it as the event loop's owner. Not `Sendable`.
    final class Loop {
        let server: Server
        let configuration: Configuration
        let limits: Limits
        let logger: Logger
        let store: any WorkspaceStore
        let clock = ContinuousClock()
        /// The event loop thread: the one that created the loop (checked in debug builds).
        private let ownerThread = pthread_self()

        /// The lws context and the loop it runs on; nil before ``createContext(address:)`` succeeds
        /// and after ``destroyContext()``.
        private(set) var eventLoop: TabsyncLoop.EventLoop?
        /// Set when the loop should stop running iterations.
        private(set) var finished = false

        var metrics = Metrics()
        var sessions: [Int: Session] = [:]
        /// Sessions that queued frames during this loop iteration (``flushQueued()``), and the
        /// list being flushed (swapped, so neither allocates in steady state).
        var flushList: [Session] = []
        var flushing: [Session] = []
        /// Sends sessions' queued frames, several in one write where allowed.
        let writer = BatchedWriter()
        private var nextSessionId = 1
        /// HTTP requests waiting for a workspace load, by request id (in lws per-session memory).
        var pendingHTTP: [Int: PendingHTTP] = [:]
        /// Connections accepted and not yet destroyed (HTTP and WebSocket).
        private(set) var openConnections = 0
        /// When the graceful stop began (nil: running).
        private(set) var shutdownStarted: ContinuousClock.Instant?
        private var refusedConnectionsLogged: ContinuousClock.Instant?

        var workspaces: [String: WorkspaceEntry] = [:]
        /// Workspaces whose peer list changed since their last presence broadcast.
        var presenceDirty: Set<String> = []
        /// Loaded workspaces that became idle (no session, nothing to store), and since when.
        var idleSince: [String: ContinuousClock.Instant] = [:]
        /// When ``unloadIdleWorkspaces(now:)`` last scanned `idleSince`.
        var lastIdleScan = ContinuousClock.now
        var commits = CommitPipeline()
        /// Workspaces whose read back failed, and when to read them again (``retryReloads(now:)``).
        var reloadRetries: [String: ContinuousClock.Instant] = [:]
        /// A shared store: catching up on other nodes' commits (Server+Catchup.swift).
        var catchUps = CatchUpState()
        /// Per-address limits and the origin policy (Server+Admission.swift).
        var admission: Server.Admission

        var shutdown: ShutdownState = .running

        enum ShutdownState {
            case running
            /// Not accepting; waiting for commits to finish (until `closeBy`), then closing every
            /// session 1001 (`closed`), then stopping once none is left (or at `finishBy`).
            case draining(closeBy: ContinuousClock.Instant, finishBy: ContinuousClock.Instant, closed: Bool)
        }

        /// An HTTP request answered once a workspace load finishes.
        struct PendingHTTP {
            var wsi: OpaquePointer
            var workspaceId: String
            var response: HTTPResponse?
            /// Its bearer token is being checked: no answer yet, whatever happens to the workspace.
            var authorizing = false
        }

        // C memory alive as long as the context.
        private let protocols: UnsafeMutablePointer<lws_protocols>
        private var cStrings: [UnsafeMutablePointer<CChar>] = []
        private let retryPolicy: UnsafeMutablePointer<lws_retry_bo_t>
        /// The periodic tick (``tick()``), made with the context.
        private var tickTimer: LoopTimer?
        private static var tickInterval: Duration { .milliseconds(50) }
        /// Tasks taken from the inbox, being handled (kept to reuse its storage).
        private var inboxTasks: [Server.Task] = []

        /// Index of each protocol in `protocols`.
        static let httpProtocol = 0

        init(server: Server) {
            self.server = server
            configuration = server.configuration
            limits = server.configuration.limits
            logger = server.logger
            store = server.store
            admission = Server.Admission(configuration: server.configuration, loopbackBind: true)
            // http, the wire formats, the diagnostics echo (named only when on), the terminator.
            protocols = .allocate(capacity: 1 + WireFormat.allCases.count + 2)
            protocols.initialize(repeating: lws_protocols(), count: 1 + WireFormat.allCases.count + 2)
            retryPolicy = .allocate(capacity: 1)
            retryPolicy.initialize(to: lws_retry_bo_t())
        }

        deinit {
            protocols.deallocate()
            retryPolicy.deallocate()
            for s in cStrings { free(s) }
        }

        func cString(_ s: String) -> UnsafeMutablePointer<CChar> {
            let p = strdup(s)!
            cStrings.append(p)
            return p
        }

        /// Creates the context and its one vhost, bound to exactly `address`, on the configured
        /// event loop (poll() when epoll is unavailable); returns the bound port. The inbox wakes
        /// the loop from here on.
        func createContext(address: ResolvedHost) -> Result<Int, Server.Error> {
            let names = ["http"] + WireFormat.allCases.map(\.subprotocol)
                + (configuration.diagnosticsEcho ? [Self.echoSubprotocol] : [])
            for (i, name) in names.enumerated() {
                protocols[i].name = UnsafePointer(cString(name))
                protocols[i].callback = lwsCallback
                protocols[i].per_session_data_size = MemoryLayout<Int>.stride
                protocols[i].rx_buffer_size = 0
                protocols[i].id = UInt32(i)
            }
            // Liveness: a ping after half the idle timeout without a valid pong, hang up at the timeout.
            let idleSeconds = max(2, min(Int(configuration.idleTimeout.components.seconds), 65_535))
            retryPolicy.pointee.secs_since_valid_ping = UInt16(max(1, idleSeconds / 2))
            retryPolicy.pointee.secs_since_valid_hangup = UInt16(idleSeconds)

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
            tickTimer = LoopTimer(on: eventLoop) { [unowned self] in self.tick() }
            tickTimer?.schedule(after: Self.tickInterval)
            server.inbox.attach(eventLoop)
            return .success(port)
        }

        /// After ``run()``: closes the inbox, then destroys the context (lws closes what is still
        /// open, with callbacks into this loop) and forgets every session.
        func destroyContext() {
            server.inbox.close()
            tickTimer = nil
            eventLoop?.destroy()
            eventLoop = nil
            sessions.removeAll()
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

        // MARK: callback dispatch

        /// Every lws callback for this context lands here.
        func handle(
            _ wsi: OpaquePointer, _ reason: lws_callback_reasons, _ user: UnsafeMutableRawPointer?,
            _ input: UnsafeMutableRawPointer?, _ length: Int
        ) -> Int32 {
            assert(pthread_equal(pthread_self(), ownerThread) != 0, "Server.Loop used off its event loop thread")
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

        private func acceptConnection() -> Bool {
            if case .draining = shutdown { return false }
            guard openConnections >= configuration.maxConnections else { return true }
            metrics.connectionsRefused[.maxConnections, default: 0] += 1
            let now = clock.now
            if refusedConnectionsLogged.map({ now - $0 > .seconds(10) }) ?? true {
                refusedConnectionsLogged = now
                logger.warning("connection refused: at max-connections", metadata: [
                    "max": "\(configuration.maxConnections)",
                ])
            }
            return false
        }

        /// A fresh id for a session or pending HTTP request (never 0).
        func makeId() -> Int {
            defer { nextSessionId += 1 }
            return nextSessionId
        }

        // MARK: cross-thread work

        private func drainInbox() {
            server.inbox.take(into: &inboxTasks)
            defer { inboxTasks.removeAll(keepingCapacity: true) }
            for task in inboxTasks {
                switch task {
                case .shutdown:
                    beginShutdown()
                case .committed(let batch, let result, let duration):
                    commitFinished(batch: batch, result: result, duration: duration)
                case .loaded(let workspaceId, let result):
                    workspaceLoaded(workspaceId, result: result)
                case .caughtUp(let reads, let duration):
                    caughtUp(reads, duration: duration)
                case .polled(let result, let duration):
                    polled(result, duration: duration)
                case .storeEvent(let event):
                    storeEvent(event)
                case .authenticated(let request, let result):
                    authenticated(request, result)
                case .reloadCertificates:
                    reloadCertificates()
                }
            }
        }

        /// Runs `body` on the store thread, then `completion`'s task on the loop.
        func onStoreThread(_ body: @escaping @Sendable () -> Server.Task) {
            let inbox = server.inbox
            CommitPipeline.storeQueue.async {
                inbox.post(body())
            }
        }

        // MARK: timer

        /// Every 50 ms: coalesced presence broadcasts, idle workspaces unloaded, the shutdown deadline.
        fileprivate func tick() {
            assert(pthread_equal(pthread_self(), ownerThread) != 0, "Server.Loop used off its event loop thread")
            let now = clock.now
            flushPresence(now: now)
            unloadIdleWorkspaces(now: now)
            pollStoreIfDue(now: now)
            retryReloads(now: now)
            if case .draining = shutdown { continueShutdown(now: now) }
            if !finished { tickTimer?.schedule(after: Self.tickInterval) }
        }

        // MARK: shutdown

        private func beginShutdown() {
            guard case .running = shutdown else { return }
            logger.notice("shutting down", metadata: ["sessions": "\(sessions.count)", "connections": "\(openConnections)"])
            // No new connections from here on: FILTER_NETWORK_CONNECTION refuses them (closed right
            // after accept). lws_context_deprecate would close the listen socket instead, but 4.1.6
            // reads the listen wsi after freeing it there (a crash seen here).
            let now = clock.now
            shutdownStarted = now
            shutdown = .draining(closeBy: now + .milliseconds(3500), finishBy: now + .milliseconds(4500), closed: false)
            continueShutdown(now: now)
        }

        /// Called on every tick and commit while draining: once nothing is being stored (or at
        /// `closeBy`), closes every session 1001; once none is left (or at `finishBy`), stops the loop.
        func continueShutdown(now: ContinuousClock.Instant) {
            guard case .draining(let closeBy, let finishBy, let closed) = shutdown else { return }
            if !closed && (commits.isIdle || now >= closeBy) {
                shutdown = .draining(closeBy: closeBy, finishBy: finishBy, closed: true)
                logger.notice("closing every session 1001", metadata: [
                    "sessions": "\(sessions.count)", "connections": "\(openConnections)",
                    "since_stop": "\(shutdownStarted.map { $0.duration(to: now) } ?? .zero)",
                    "commits_idle": "\(commits.isIdle)",
                ])
                for session in sessions.values {
                    close(session, code: 1001, reason: "server shutting down")
                }
            }
            guard case .draining(_, _, true) = shutdown else { return }
            if sessions.isEmpty || now >= finishBy {
                finished = true
                eventLoop?.wake()
            }
        }
    }
}

/// The one lws callback for every protocol (a C function pointer): finds the loop as the event
/// loop's owner. Runs on the event loop thread.
private func lwsCallback(
    _ wsi: OpaquePointer?, _ reason: lws_callback_reasons, _ user: UnsafeMutableRawPointer?,
    _ input: UnsafeMutableRawPointer?, _ length: Int
) -> Int32 {
    guard let wsi, let loop = TabsyncLoop.EventLoop.owner(of: wsi, as: Server.Loop.self) else {
        return lws_callback_http_dummy(wsi, reason, user, input, length)
    }
    return loop.handle(wsi, reason, user, input, length)
}
