import CLibwebsockets
import Foundation
import Logging
import TabsyncCore
import TabsyncProto
import TabsyncStore

extension Server {
    /// Everything the event loop thread owns: the lws context, sessions, workspaces, the commit
    /// pipeline and metrics.
    ///
    /// Must be used on the event loop thread only (the thread that created it, which runs
    /// `lws_service`); lws callbacks reach it through the context's user pointer. Not `Sendable`.
    final class Loop {
        let server: Server
        let configuration: Configuration
        let limits: Limits
        let logger: Logger
        let store: any WorkspaceStore
        let clock = ContinuousClock()
        /// The event loop thread: the one that created the loop (checked in debug builds).
        private let ownerThread = pthread_self()

        private(set) var context: OpaquePointer?
        /// The libev (epoll) loop lws runs on (`EventLoop.epoll`); nil on lws' own poll() loop.
        private(set) var eventLoop: UnsafeMutableRawPointer?
        /// Set when the loop should stop calling `lws_service`.
        private(set) var finished = false

        var metrics = Metrics()
        var sessions: [Int: Session] = [:]
        /// Sessions that queued frames during this loop iteration (``flushQueued()``), and the
        /// list being flushed (swapped, so neither allocates in steady state).
        var flushList: [Session] = []
        var flushing: [Session] = []
        /// Scratch space for writing several frames in one send.
        var outBatch = OutBatch()
        private var nextSessionId = 1
        /// HTTP requests waiting for a workspace load, by request id (in lws per-session memory).
        var pendingHTTP: [Int: PendingHTTP] = [:]
        /// Connections accepted and not yet destroyed (HTTP and WebSocket).
        private var openConnections = 0
        private var refusedConnectionsLogged: ContinuousClock.Instant?

        var workspaces: [String: WorkspaceEntry] = [:]
        /// Workspaces whose peer list changed since their last presence broadcast.
        var presenceDirty: Set<String> = []
        /// Loaded workspaces that became idle (no session, nothing to store), and since when.
        var idleSince: [String: ContinuousClock.Instant] = [:]
        /// When ``unloadIdleWorkspaces(now:)`` last scanned `idleSince`.
        var lastIdleScan = ContinuousClock.now
        var commits = CommitPipeline()
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
        }

        // C memory alive as long as the context.
        private let protocols: UnsafeMutablePointer<lws_protocols>
        private var cStrings: [UnsafeMutablePointer<CChar>] = []
        private let retryPolicy: UnsafeMutablePointer<lws_retry_bo_t>
        /// An `lws_sorted_usec_list_t` followed by this loop's unretained pointer (for the tick).
        private let tickTimer: UnsafeMutableRawPointer
        private static var tickInterval: Int64 { 50_000 }

        /// Index of each protocol in `protocols`.
        static let httpProtocol = 0

        init(server: Server) {
            self.server = server
            configuration = server.configuration
            limits = server.configuration.limits
            logger = server.logger
            store = server.store
            admission = Server.Admission(configuration: server.configuration, loopbackBind: true)
            protocols = .allocate(capacity: 1 + WireFormat.allCases.count + 1)
            protocols.initialize(repeating: lws_protocols(), count: 1 + WireFormat.allCases.count + 1)
            retryPolicy = .allocate(capacity: 1)
            retryPolicy.initialize(to: lws_retry_bo_t())
            let tickSize = MemoryLayout<lws_sorted_usec_list_t>.stride + MemoryLayout<UnsafeMutableRawPointer>.stride
            tickTimer = .allocate(byteCount: tickSize, alignment: 16)
            tickTimer.initializeMemory(as: UInt8.self, repeating: 0, count: tickSize)
        }

        deinit {
            protocols.deallocate()
            retryPolicy.deallocate()
            tickTimer.deallocate()
            outBatch.deallocate()
            for s in cStrings { free(s) }
        }

        func cString(_ s: String) -> UnsafeMutablePointer<CChar> {
            let p = strdup(s)!
            cStrings.append(p)
            return p
        }

        /// Creates the context and its one vhost, bound to exactly `address`.
        func createContext(address: ResolvedHost) -> Result<(OpaquePointer, Int), Server.Error> {
            let names = ["http"] + WireFormat.allCases.map(\.subprotocol)
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
            info.user = Unmanaged.passUnretained(self).toOpaque()
            info.retry_and_idle_policy = UnsafePointer(retryPolicy)
            info.timeout_secs = 10
            // Transport security: TLS from the configuration, admission policies for this bind.
            prepareTransportSecurity(&info, address: address)
            // lws reads info.foreign_loops while creating the context: the slot outlives that call.
            let loopSlot = UnsafeMutablePointer<UnsafeMutableRawPointer?>.allocate(capacity: 1)
            defer { loopSlot.deallocate() }
            var created: OpaquePointer?
            if configuration.eventLoop == .epoll, let loop = clws_ev_loop_create() {
                eventLoop = loop
                var epollInfo = info
                clws_ev_use_loop(&epollInfo, loopSlot, loop)
                created = lws_create_context(&epollInfo)
                if created == nil {
                    // Most likely lws' libev plugin is missing (Debian: libwebsockets-evlib-ev).
                    releaseEventLoop()
                    logger.warning("the epoll event loop is unavailable (is libwebsockets-evlib-ev installed?): using poll()")
                }
            }
            if created == nil { created = lws_create_context(&info) }
            guard let context = created else {
                return .failure(.listenFailed("lws_create_context failed for \(address.address):\(configuration.port)"))
            }
            guard let vhost = lws_get_vhost_by_name(context, "tabsync") else {
                lws_context_destroy(context)
                releaseEventLoop()
                return .failure(.listenFailed("no vhost"))
            }
            let port = Int(lws_get_vhost_listen_port(vhost))
            guard port > 0 else {
                lws_context_destroy(context)
                releaseEventLoop()
                return .failure(.listenFailed("could not bind \(address.address):\(configuration.port)"))
            }
            self.context = context
            tickTimer.storeBytes(
                of: Unmanaged.passUnretained(self).toOpaque(),
                toByteOffset: MemoryLayout<lws_sorted_usec_list_t>.stride, as: UnsafeMutableRawPointer.self)
            scheduleTick()
            return .success((context, port))
        }

        /// Called after `lws_context_destroy` returned: every session is gone.
        func contextDestroyed() {
            context = nil
            releaseEventLoop()
            sessions.removeAll()
            pendingHTTP.removeAll()
        }

        /// Runs the event loop until ``finished``: one wakeup's ready events per iteration.
        func run() {
            guard let context else { return }
            if let eventLoop {
                while !finished {
                    clws_ev_run_once(eventLoop)
                    flushQueued()
                }
            } else {
                while !finished {
                    lws_service(context, 0)
                    flushQueued()
                }
            }
        }

        /// After the context is gone (or was never made): frees the libev loop.
        private func releaseEventLoop() {
            if let eventLoop { clws_ev_loop_destroy(eventLoop) }
            eventLoop = nil
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
            for task in server.inbox.drain() {
                switch task {
                case .shutdown:
                    beginShutdown()
                case .committed(let batch, let result, let duration):
                    commitFinished(batch: batch, result: result, duration: duration)
                case .loaded(let workspaceId, let result):
                    workspaceLoaded(workspaceId, result: result)
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

        private func scheduleTick() {
            guard let context else { return }
            lws_sul_schedule(
                context, 0, tickTimer.assumingMemoryBound(to: lws_sorted_usec_list_t.self), loopTick,
                Self.tickInterval)
        }

        /// Every 50 ms: coalesced presence broadcasts, idle workspaces unloaded, the shutdown deadline.
        fileprivate func tick() {
            assert(pthread_equal(pthread_self(), ownerThread) != 0, "Server.Loop used off its event loop thread")
            let now = clock.now
            flushPresence(now: now)
            unloadIdleWorkspaces(now: now)
            if case .draining = shutdown { continueShutdown(now: now) }
            if !finished { scheduleTick() }
        }

        // MARK: shutdown

        private func beginShutdown() {
            guard case .running = shutdown else { return }
            logger.info("shutting down", metadata: ["sessions": "\(sessions.count)"])
            // No new connections from here on: FILTER_NETWORK_CONNECTION refuses them (closed right
            // after accept). lws_context_deprecate would close the listen socket instead, but 4.1.6
            // reads the listen wsi after freeing it there (a crash seen here).
            let now = clock.now
            shutdown = .draining(closeBy: now + .milliseconds(3500), finishBy: now + .milliseconds(4500), closed: false)
            continueShutdown(now: now)
        }

        /// Called on every tick and commit while draining: once nothing is being stored (or at
        /// `closeBy`), closes every session 1001; once none is left (or at `finishBy`), stops the loop.
        func continueShutdown(now: ContinuousClock.Instant) {
            guard case .draining(let closeBy, let finishBy, let closed) = shutdown else { return }
            if !closed && (commits.isIdle || now >= closeBy) {
                shutdown = .draining(closeBy: closeBy, finishBy: finishBy, closed: true)
                for session in sessions.values {
                    close(session, code: 1001, reason: "server shutting down")
                }
            }
            guard case .draining(_, _, true) = shutdown else { return }
            if sessions.isEmpty || now >= finishBy {
                finished = true
                if let context { lws_cancel_service(context) }
            }
        }
    }
}

/// The one lws callback for every protocol (a C function pointer): finds the loop through the
/// context's user pointer. Runs on the event loop thread.
private func lwsCallback(
    _ wsi: OpaquePointer?, _ reason: lws_callback_reasons, _ user: UnsafeMutableRawPointer?,
    _ input: UnsafeMutableRawPointer?, _ length: Int
) -> Int32 {
    guard let wsi, let context = lws_get_context(wsi), let raw = lws_context_user(context) else {
        return lws_callback_http_dummy(wsi, reason, user, input, length)
    }
    let loop = Unmanaged<Server.Loop>.fromOpaque(raw).takeUnretainedValue()
    return loop.handle(wsi, reason, user, input, length)
}

/// The loop's periodic timer (a C function pointer). Runs on the event loop thread.
private func loopTick(_ sul: UnsafeMutablePointer<lws_sorted_usec_list_t>?) {
    guard let sul else { return }
    let raw = UnsafeMutableRawPointer(sul).load(
        fromByteOffset: MemoryLayout<lws_sorted_usec_list_t>.stride, as: UnsafeMutableRawPointer.self)
    Unmanaged<Server.Loop>.fromOpaque(raw).takeUnretainedValue().tick()
}
