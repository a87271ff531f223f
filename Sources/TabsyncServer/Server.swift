import Dispatch
import Foundation
import Logging
import TabsyncCore
import TabsyncLock
import TabsyncLoop
import TabsyncStore
@_exported import TabsyncServerCore

/// The tabsync server: WebSocket (`tabsync.v1.json`, `tabsync.v1.proto`) and HTTP on one
/// libwebsockets context, one vhost, one port.
///
/// One event loop thread runs the ``LoopDriver``, which feeds the socket-free ``ServerCore`` (every
/// decision) and carries out its actions; nothing on it takes a lock on the hot path or waits on
/// disk or network. Store calls run on ``storeExecutor`` (one serial queue per server); other
/// threads (the store executor, the token verifier, the commit feed, callers of ``shutdown()``)
/// hand work over through ``inbox`` (a `LoopInbox`: a `Lock` queue plus `lws_cancel_service`).
/// All public methods are safe from any thread (docs/architecture.md).
public final class Server: Sendable {
    let configuration: Configuration
    /// The store and its history and admin capabilities, as typed values.
    let stores: StoreCapabilities
    let logger: Logger
    /// The one way into the event loop thread; drained in `LWS_CALLBACK_EVENT_WAIT_CANCELLED`.
    let inbox = LoopInbox<Inbound>()
    /// The store executor: every store call of this server, one at a time, off the loop.
    let storeExecutor = DispatchQueue(label: "tabsync.store")
    private let lifecycle = Lock<Lifecycle>(.idle)
    /// The admin log as read at start (revocations in force), for the core.
    let startupAdminLog = Lock<[AdminEntry]>([])
    /// This node's name in session ids the admin API gives: the holder registry's node name with a
    /// shared store, else a random one per process.
    let nodeName: String
    private let stoppedSignal = DispatchSemaphore(value: 0)
    /// Sends webhooks while the server runs (a store that keeps webhooks only).
    let deliverer: WebhookDeliverer?
    /// The extra CAs webhook deliveries trust (`webhookCAFile`), read when the server is made;
    /// ``start()`` refuses a file that failed to load.
    private let webhookTrust: Result<WebhookTrust?, WebhookTrust.LoadError>

    private enum Lifecycle {
        case idle, running(port: Int), stopped
    }

    /// Why the server could not start.
    public enum Error: Swift.Error, Sendable, Equatable, CustomStringConvertible {
        /// `start()` was called twice.
        case alreadyStarted
        /// The host is neither an address literal nor a name that resolves.
        case badHost(String)
        /// lws could not create the context or bind the port (in use, no permission).
        case listenFailed(String)
        /// Asked to listen on a non-loopback address without authentication (and without
        /// `insecureNoAuth`): anyone who can reach the port could read and rewrite every workspace.
        case unauthenticatedExposure(host: String)
        /// The TLS certificate or key cannot be served (unreadable, not PEM, not a pair).
        case tlsUnusable(String)
        /// Tokens are on and the store's admin log (revocations) cannot be read: serving without
        /// it would let revoked tokens in.
        case adminLogUnreadable(String)
        /// The webhook CA file cannot be used (unreadable, a broken PEM block, no certificate).
        case webhookCAUnusable(String)

        public var description: String {
            switch self {
            case .alreadyStarted: "the server was already started"
            case .badHost(let host): "cannot resolve host \(host)"
            case .listenFailed(let why): "cannot listen: \(why)"
            case .unauthenticatedExposure(let host):
                "refusing to listen on \(host) without authentication (anyone who can reach it could read and "
                    + "rewrite every workspace): give --auth-key-file, bind 127.0.0.1, or pass --insecure-no-auth"
            case .tlsUnusable(let why): "cannot serve TLS: \(why)"
            case .adminLogUnreadable(let why): "cannot read the admin log (revocations): \(why)"
            case .webhookCAUnusable(let why): "cannot use \(why)"
            }
        }
    }

    public init(configuration: Configuration, stores: StoreCapabilities, logger: Logger) {
        self.configuration = configuration
        self.stores = stores
        self.logger = logger
        nodeName = configuration.sharedStore?.nodeName ?? String(UInt32.random(in: .min ... .max), radix: 36)
        let (executor, node) = (storeExecutor, nodeName)
        webhookTrust = Result { () throws(WebhookTrust.LoadError) in try configuration.webhookCAFile.map(WebhookTrust.load(file:)) }
        let trust = try? webhookTrust.get()
        deliverer = stores.webhooks.map {
            WebhookDeliverer(
                store: $0, executor: executor, allowPrivate: configuration.webhookAllowPrivate, trust: trust,
                tuning: .init(
                    rescanInterval: configuration.sharedStore == nil ? nil : WebhookDeliverer.sharedRescanInterval,
                    giveUpAfter: configuration.webhookGiveUpAfter, node: node),
                logger: logger)
        }
    }

    /// A server on a store tabsync ships (it keeps history, the admin log and webhooks).
    public convenience init(configuration: Configuration, store: some HistoryStore & WebhookStore, logger: Logger) {
        self.init(configuration: configuration, stores: StoreCapabilities(store), logger: logger)
    }

    /// Starts the event loop thread and returns once the port is bound: the real port (the asked
    /// one, or the one picked for port 0). Raises `RLIMIT_NOFILE` to its hard limit first and asks
    /// lws for errors and warnings in the log (notices too at `debug`; see `LWSLog`).
    public func start() throws(Server.Error) -> Int {
        let claimed = lifecycle.withLock { state -> Bool in
            guard case .idle = state else { return false }
            state = .running(port: 0)
            return true
        }
        guard claimed else { throw .alreadyStarted }

        let address = try Self.resolve(configuration.host)
        do throws(Server.Error) {  // transport security, and the webhooks' CAs
            try Self.checkTransportSecurity(configuration, address: address)
            if case .failure(let error) = webhookTrust { throw .webhookCAUnusable(error.description) }
        } catch {
            lifecycle.withLock { $0 = .stopped }
            throw error
        }
        if configuration.accessTokens != nil, let admin = stores.admin {
            do throws(StoreError) {
                let entries = try admin.adminEntries(after: 0)
                startupAdminLog.withLock { $0 = entries }
            } catch {
                lifecycle.withLock { $0 = .stopped }
                throw .adminLogUnreadable(error.description)
            }
        }
        FileLimit.raise()
        LWSLog.request(LWSLog.errorsAndWarnings | (logger.logLevel <= .debug ? LWSLog.notices : 0))

        let started = StartResult()
        let ready = DispatchSemaphore(value: 0)
        let thread = Thread { [self] in
            self.runLoop(address: address, started: started, ready: ready)
        }
        thread.name = "tabsync-loop"
        thread.stackSize = 8 << 20
        thread.start()
        ready.wait()
        let result = started.value.withLock { $0! }
        switch result {
        case .success(let port):
            lifecycle.withLock { $0 = .running(port: port) }
            return port
        case .failure(let error):
            lifecycle.withLock { $0 = .stopped }
            throw error
        }
    }

    /// The bound port while running, nil otherwise.
    public var port: Int? {
        lifecycle.withLock { state in
            if case .running(let port) = state, port != 0 { return port }
            return nil
        }
    }

    /// Graceful stop: `/healthz` answers 503 `draining` and new sessions are closed 1001 at once,
    /// lets the batch being stored finish (its acks go out), closes
    /// every client with 1001, and returns once the loop has exited (within about 5 s).
    /// Safe to call from any thread, more than once; returns at once when not running.
    public func shutdown() {
        let running = lifecycle.withLock { state -> Bool in
            if case .running = state { return true }
            return false
        }
        guard running else { return }
        inbox.post(.event(.shutdown))
        waitUntilStopped()
    }

    /// Blocks until the loop has exited (after ``shutdown()`` from another thread).
    public func waitUntilStopped() {
        let alreadyStopped = lifecycle.withLock { state -> Bool in
            if case .stopped = state { return true }
            return false
        }
        if alreadyStopped { return }
        stoppedSignal.wait()
        stoppedSignal.signal()  // let any other waiter through too
    }

    // MARK: event loop thread

    private func runLoop(address: ResolvedHost, started: StartResult, ready: DispatchSemaphore) {
        let loop = LoopDriver(server: self)
        let created = loop.createContext(address: address)
        guard case .success(let port) = created else {
            if case .failure(let error) = created { started.value.withLock { $0 = .failure(error) } }
            ready.signal()
            return
        }
        started.value.withLock { $0 = .success(port) }
        logger.info("listening", metadata: ["host": "\(configuration.host)", "port": "\(port)"])
        let feed = startCommitFeed()
        deliverer?.start()
        ready.signal()

        withExtendedLifetime(loop) {
            loop.run()
            feed?.stop()  // the loop has stopped: no event is wanted any more
            deliverer?.stop()
            leaveHolderRegistry()
            let left = loop.openConnections
            let stopped = ContinuousClock.now
            logger.info("event loop stopped; closing the connections left", metadata: ["connections": "\(left)"])
            loop.destroyContext()
            logger.notice("stopped", metadata: [
                "drain": "\(loop.shutdownStarted.map { $0.duration(to: stopped) } ?? .zero)",
                "connections_left": "\(left)", "closing_them": "\(stopped.duration(to: .now))",
            ])
        }
        lifecycle.withLock { $0 = .stopped }
        stoppedSignal.signal()
    }

    // MARK: start-up helpers

    /// After the stop's drain: this node holds nothing any more, so other nodes' commits stop
    /// notifying it at once (not after its heartbeat expires). On the store executor, after the
    /// last commit.
    private func leaveHolderRegistry() {
        guard let holders = configuration.sharedStore?.holders else { return }
        storeExecutor.sync { holders.leave() }
    }

    /// A shared store with a commit feed: started, its events go to the core through the inbox
    /// (ServerCore+CatchUp.swift).
    private func startCommitFeed() -> (any CommitFeed)? {
        guard let feed = configuration.sharedStore?.feed else { return nil }
        let inbox = self.inbox
        feed.start { event in inbox.post(.event(.heard(event))) }
        return feed
    }

    /// What the loop thread reports back to `start()`.
    private final class StartResult: Sendable {
        let value = Lock<Result<Int, Server.Error>?>(nil)
    }

    /// A host resolved to one address literal and its family.
    struct ResolvedHost: Sendable {
        var address: String
        var isIPv6: Bool
    }

    /// Resolves a host to an address literal. lws 4.1.6 with IPv6 compiled in copies an IPv4
    /// literal into the wrong bytes of its IPv6 sockaddr and so binds `::` (all interfaces);
    /// the server therefore binds IPv4 addresses with IPv6 disabled on the vhost.
    static func resolve(_ host: String) throws(Server.Error) -> ResolvedHost {
        var v4 = in_addr()
        var v6 = in6_addr()
        if inet_pton(AF_INET, host, &v4) == 1 { return ResolvedHost(address: host, isIPv6: false) }
        if inet_pton(AF_INET6, host, &v6) == 1 { return ResolvedHost(address: host, isIPv6: true) }
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, nil, &hints, &list) == 0, let first = list else { throw .badHost(host) }
        defer { freeaddrinfo(list) }
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        if first.pointee.ai_family == AF_INET6 {
            let sa = UnsafeRawPointer(first.pointee.ai_addr).assumingMemoryBound(to: sockaddr_in6.self)
            var a = sa.pointee.sin6_addr
            inet_ntop(AF_INET6, &a, &buffer, socklen_t(buffer.count))
            return ResolvedHost(address: String(nulTerminated: buffer), isIPv6: true)
        }
        let sa = UnsafeRawPointer(first.pointee.ai_addr).assumingMemoryBound(to: sockaddr_in.self)
        var a = sa.pointee.sin_addr
        inet_ntop(AF_INET, &a, &buffer, socklen_t(buffer.count))
        return ResolvedHost(address: String(nulTerminated: buffer), isIPv6: false)
    }
}

extension Server {
    /// What other threads hand to the event loop thread (through ``Server/inbox``).
    enum Inbound: Sendable {
        /// An event for the core: a store answer, a token check, a commit of another node, a stop.
        case event(ServerCore.Event)
        /// Read the TLS certificate and key files again (``Server/reloadCertificates()``).
        case reloadCertificates
    }
}
