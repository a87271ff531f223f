import TabsyncCore
import TabsyncStore
import TabsyncServerCore

extension Server {
    /// Everything a server is started with. The defaults are docs/design.md's ('Limits and defaults').
    public struct Configuration: Sendable {
        /// The address to listen on: an IPv4 or IPv6 literal, or a name resolved once at start.
        /// Exactly this address is bound (never all interfaces unless `0.0.0.0` or `::` is asked).
        public var host: String
        /// The TCP port; 0 picks a free one (``Server/start()`` returns the real one).
        public var port: Int
        /// Limits core and the server enforce; the first four are told to clients in `Welcome`.
        public var limits: Limits
        /// Open connections (HTTP and WebSocket) at most; more are refused at accept.
        public var maxConnections: Int
        /// Time a new WebSocket session has to send its `Hello`.
        public var helloTimeout: Duration
        /// A connection heard nothing from (no frame, no pong) for this long is closed (its presence
        /// goes with it); the core pings it after 0.75 to 0.9 of it (ServerCore+Keepalive.swift).
        public var idleTimeout: Duration
        /// Presence broadcasts per workspace are at least this far apart.
        public var presenceInterval: Duration
        /// Consecutive seconds over the op rate limit after which a connection is closed 1008.
        public var rateLimitStrikes: Int
        /// A workspace with no session for this long leaves memory once its last commit is stored;
        /// the next Hello (or HTTP read) loads it again. Zero: as soon as it is idle. A workspace
        /// with nothing stored (never written) leaves at once whatever this says.
        public var idleUnload: Duration
        /// The event loop libwebsockets runs on.
        public var eventLoop: LoopBackend
        /// Serve the browser page (`GET /`, `/w/{workspace}`, `/web/…`); off: those paths are 404.
        public var serveWeb: Bool
        /// A connection closed 1013 for reading too slowly gets this long for its close frame to
        /// leave, behind what lws and the kernel already hold for it; past it the socket is dropped
        /// (the peer, still not reading, sees no close frame). Counted from the moment its queue
        /// passed `maxSendQueueBytes`; rounded up to whole seconds (lws' timeouts count seconds).
        public var slowCloseGrace: Duration = .seconds(5)
        /// Serve the diagnostics echo subprotocol `tabsync.echo` on `/` (the Autobahn testsuite's
        /// target): every message is sent back whole with its opcode, nothing else happens on such
        /// a connection. Off by default.
        public var diagnosticsEcho: Bool = false
        /// Peers a presence list names at most; the workspace's other sessions are counted in
        /// `Presence.othersCount` (proto/README.md#presence).
        public var maxPresencePeers: Int = 128
        /// A change feed silent this long gets a comment line (docs/design.md, "The change feed").
        public var feedKeepAlive: Duration = .seconds(15)
        /// Webhook deliveries may connect to loopback, private and link-local addresses
        /// (``WebhookTargetPolicy``); off: those are refused at connect time.
        public var webhookAllowPrivate = false
        /// A PEM bundle of certificate authorities `https` webhook targets may chain to beside the
        /// system's (a receiver with a private CA); read once at start (``Server/start()`` fails with
        /// ``Server/Error/webhookCAUnusable(_:)`` when it holds no certificate). Host names are
        /// verified whatever it holds.
        public var webhookCAFile: String? = nil
        /// A hook whose oldest pending delivery has failed for this long is disabled (docs/design.md,
        /// "Webhooks"); an admin enables it again.
        public var webhookGiveUpAfter: Duration = .seconds(24 * 3600)
        /// How long a graceful stop may take: commits drain for at most 70% of it, then every
        /// session is closed 1001 and the close frames get the rest but 10% (the executable's
        /// `--shutdown-timeout`; its process deadline is the whole of it).
        public var shutdownTimeout: Duration = .seconds(5)
        /// Operators' quotas per sub and per workspace (docs/design.md, "Quotas"); all off by default.
        public var quotas = Quotas()

        // MARK: transport security (TLS, origins, per-IP limits, the refusal to run open)

        /// PEM certificate chain and private key: when both are set the port serves `wss://` and
        /// `https://` only (TLS 1.2 or newer). ``Server/reloadCertificates()`` (SIGHUP in the
        /// executable) reads both files again.
        public var tlsCertificateFile: String? = nil
        public var tlsKeyFile: String? = nil
        /// Browser origins (`https://app.example.com`, or `*`) allowed to open a WebSocket; a
        /// handshake with another `Origin` gets HTTP 403. Empty: see ``OriginPolicy``.
        public var allowedOrigins: [String] = []
        /// True when clients must authenticate: ``accessTokens`` is set (at least one
        /// `--auth-key-file`). Without it the server listens only on a loopback address, unless
        /// ``insecureNoAuth``.
        public var authEnabled: Bool { accessTokens != nil }
        /// Listen on a non-loopback address without authentication anyway.
        public var insecureNoAuth: Bool = false
        /// Per peer address limits on connections and handshakes. Nil: none on a loopback bind (every
        /// peer is this machine, or a reverse proxy in front), ``PerIPLimits/exposed`` on any other.
        public var perIPLimits: PerIPLimits? = nil

        // MARK: access control (tokens)

        /// When set, every WebSocket session and `GET /v1/workspaces/{id}` needs a token this
        /// verifier accepts, for that workspace (`Error UNAUTHORIZED` and close 4401, or HTTP 401,
        /// otherwise), and its role decides which ops it may submit. Nil: no access control.
        public var accessTokens: TokenVerifier? = nil

        // MARK: several nodes on one store

        /// Set when other servers write the same store (PostgreSQL): every batch states the stored
        /// versions it builds on, a node that finds itself behind catches up and re-sequences what it
        /// has not acknowledged, and other nodes' commits are read as they are announced or polled
        /// (CommitPipeline.swift, ServerCore+CatchUp.swift). Nil: this server is the store's only writer.
        public var sharedStore: SharedStore? = nil

        /// How a node learns of the commits of the other nodes writing its store.
        public struct SharedStore: Sendable {
            /// How often the stored version of every loaded workspace is read, to catch up on a commit
            /// whose notification was lost; zero: never.
            public var pollInterval: Duration
            /// Where other nodes' commits are announced (for PostgreSQL, ``PostgresCommitFeed``);
            /// nil: no feed (poll only).
            public var feed: (any CommitFeed)?
            /// Which nodes hold which workspaces (for PostgreSQL, the ``PostgresStore`` itself): this
            /// node registers before it loads a workspace, releases it when it unloads it, and beats
            /// while it runs, so other nodes' commits notify it only for what it holds; nil: every
            /// commit is taken as announced to every node (docs/design.md, "Several nodes").
            public var holders: (any HolderRegistry)?
            /// This node's name in ``holders`` (for PostgreSQL, ``PostgresStore/node``), also the
            /// node part of the session ids the admin API gives; nil: a random one per process.
            public var nodeName: String?
            /// With ``holders``: a workspace split across nodes is sent home (the node holding it
            /// longest closes its sessions 4307 "moved"); off, splits stay until their sessions end.
            public var movesSplitWorkspaces = true
            /// How long a small commit may wait for more records when more are coming
            /// (``ServerCore/Settings/commitLinger``): a PostgreSQL commit costs round trips and a
            /// flush whatever its size, so bigger ones cost less per op; zero: never waits.
            public var commitLinger: Duration = .milliseconds(5)

            public init(pollInterval: Duration = .milliseconds(1500), feed: (any CommitFeed)?, holders: (any HolderRegistry)? = nil) {
                self.pollInterval = pollInterval
                self.feed = feed
                self.holders = holders
            }
        }

        /// Which event loop libwebsockets runs on.
        public enum LoopBackend: String, Sendable, CaseIterable {
            /// libev (epoll): a wakeup costs the connections that are ready, not all of them.
            case epoll
            /// lws' default poll() loop: every wakeup scans every connection (kept for comparison).
            case poll
        }

        public init(
            host: String = "127.0.0.1",
            port: Int = 7070,
            limits: Limits = .default,
            maxConnections: Int = 10_000,
            helloTimeout: Duration = .seconds(10),
            idleTimeout: Duration = .seconds(60),
            presenceInterval: Duration = .milliseconds(100),
            rateLimitStrikes: Int = 5,
            idleUnload: Duration = .seconds(300),
            eventLoop: LoopBackend = .epoll,
            serveWeb: Bool = true
        ) {
            self.host = host
            self.port = port
            self.limits = limits
            self.maxConnections = maxConnections
            self.helloTimeout = helloTimeout
            self.idleTimeout = idleTimeout
            self.presenceInterval = presenceInterval
            self.rateLimitStrikes = rateLimitStrikes
            self.idleUnload = idleUnload
            self.eventLoop = eventLoop
            self.serveWeb = serveWeb
        }
    }
}


extension Server.Configuration {
    /// Limits applied to each peer address (IPv4, or IPv6) at accept, before any TLS work.
    public struct PerIPLimits: Sendable, Equatable {
        /// Open connections (HTTP and WebSocket) from one address at most; 0: no limit.
        public var maxConnections: Int
        /// New connections from one address per second, sustained (each one is a TLS and/or
        /// WebSocket handshake); 0: no limit.
        public var handshakesPerSecond: Double
        /// New connections one address may open at once before the rate applies.
        public var handshakeBurst: Int

        public init(maxConnections: Int, handshakesPerSecond: Double, handshakeBurst: Int) {
            self.maxConnections = maxConnections
            self.handshakesPerSecond = handshakesPerSecond
            self.handshakeBurst = handshakeBurst
        }

        /// The default on a non-loopback bind.
        public static let exposed = PerIPLimits(maxConnections: 64, handshakesPerSecond: 10, handshakeBurst: 20)
        /// No per-address limit (the default on a loopback bind).
        public static let unlimited = PerIPLimits(maxConnections: 0, handshakesPerSecond: 0, handshakeBurst: 0)
    }
}

extension Server.Configuration {
    /// Operators' limits (each nil: no limit).
    public struct Quotas: Sendable, Equatable {
        public var maxConnectionsPerSubject: Int?
        public var maxOpsPerSecondPerSubject: Int?
        public var maxConnectionsPerWorkspace: Int?

        public init(maxConnectionsPerSubject: Int? = nil, maxOpsPerSecondPerSubject: Int? = nil, maxConnectionsPerWorkspace: Int? = nil) {
            self.maxConnectionsPerSubject = maxConnectionsPerSubject
            self.maxOpsPerSecondPerSubject = maxOpsPerSecondPerSubject
            self.maxConnectionsPerWorkspace = maxConnectionsPerWorkspace
        }
    }

    /// What the core decides with, from this configuration and the store's epoch.
    func coreSettings(storeEpoch: String) -> ServerCore.Settings {
        var settings = ServerCore.Settings(
            limits: limits, helloTimeout: helloTimeout, presenceInterval: presenceInterval,
            rateLimitStrikes: rateLimitStrikes, idleUnload: idleUnload, maxPresencePeers: maxPresencePeers,
            slowCloseGrace: slowCloseGrace, accessControl: accessTokens != nil,
            sharedStorePollInterval: sharedStore?.pollInterval, storeEpoch: storeEpoch, shutdownTimeout: shutdownTimeout)
        settings.idleTimeout = idleTimeout
        settings.feedKeepAlive = feedKeepAlive
        settings.holderRegistry = sharedStore?.holders.map { .init(heartbeatInterval: $0.heartbeatInterval) }
        settings.yieldsSplitWorkspaces = sharedStore.map { $0.holders != nil && $0.movesSplitWorkspaces } ?? false
        settings.jitterSeed = UInt64.random(in: .min ... .max)
        settings.commitLinger = sharedStore?.commitLinger ?? .zero
        if let poll = sharedStore?.pollInterval, poll > .zero { settings.adminPollInterval = poll }
        settings.quotas = .init(
            maxConnectionsPerSubject: quotas.maxConnectionsPerSubject, maxOpsPerSecondPerSubject: quotas.maxOpsPerSecondPerSubject,
            maxConnectionsPerWorkspace: quotas.maxConnectionsPerWorkspace)
        return settings
    }
}
