import Foundation
import Logging
import TabsyncCore
import TabsyncServer
import TabsyncStore

/// Every server setting, each resolved once from its flag, else its `TABSYNC_*` environment
/// variable, else its default, as its ``SettingTable`` entry says.
///
/// Guarantees: a value is used only when it parses and is in range; a bad flag or a bad variable
/// is a ``SettingError`` naming it, never a silent fallback to the default. An empty variable
/// counts as unset; a variable is not read at all when its flag is given. Settings that only make
/// sense together are checked together (a TLS certificate with its key; a store URL without
/// `--memory`).
public struct ServerSettings: Sendable {
    public var host: String
    public var port: Int
    public var dataDir: String
    public var memory: Bool
    public var sync: SQLiteStore.Options.Sync
    public var idleUnload: Duration
    public var logLevel: Logger.Level
    public var limits: Limits
    public var maxConnections: Int
    public var helloTimeout: Duration
    public var idleTimeout: Duration
    public var eventLoop: Server.Configuration.LoopBackend
    /// Serve the browser page (off with `--no-web`).
    public var serveWeb: Bool
    /// PEM certificate chain and key (both or neither): the port then serves `wss://` and `https://`.
    public var tlsCertificateFile: String?
    public var tlsKeyFile: String?
    /// Browser origins allowed to open a WebSocket (empty: the policy the bind implies).
    public var allowedOrigins: [String]
    /// Listen beyond loopback without authentication anyway.
    public var insecureNoAuth: Bool
    /// Per-address limits as given (nil: the default for the bind).
    public var maxConnectionsPerIP: Int?
    /// Operators' quotas (docs/design.md, "Quotas"); nil: no limit.
    public var maxConnectionsPerSub: Int?
    public var maxOpsPerSecondPerSub: Int?
    public var maxConnectionsPerWorkspace: Int?
    public var maxHandshakesPerSecondPerIP: Double?
    /// Key files access tokens are checked with (empty: no access control). Read when the server
    /// starts (``AuthKey/load(file:)``), not here.
    public var authKeyFiles: [String]
    /// Where the SQLite store's WAL checkpoints run, the WAL bound, and its trace file.
    public var checkpoint: SQLiteStore.Options.Checkpoint
    public var walLimitBytes: Int64
    public var storeTrace: String?
    /// How long every store keeps history (docs/design.md, "History").
    public var historyRetention: HistoryRetention
    /// A PostgreSQL store shared with other nodes (`postgres://…` or `postgresql://…`); nil: the
    /// embedded store (`dataDir`, or memory). It wins over `dataDir`; with `memory` it is refused.
    public var storeURL: String?
    /// With a shared store: how often loaded workspaces' stored versions are polled (zero: never).
    public var storePollInterval: Duration
    public var storeCommitLinger: Duration
    /// Time a connection closed 1013 for reading too slowly has for its close frame to leave.
    public var slowCloseGrace: Duration
    /// How long a SIGTERM/SIGINT stop may take in all (drain, closing, the store) before the
    /// process exits anyway, status 1.
    public var shutdownTimeout: Duration
    /// Serve the diagnostics echo subprotocol `tabsync.echo` (for the Autobahn testsuite).
    public var diagnosticsEcho: Bool
    /// Peers a presence list names at most (the rest are counted).
    public var maxPresencePeers: Int
    public var feedKeepAlive: Duration
    /// Webhooks may reach loopback, private and link-local addresses.
    public var webhookAllowPrivate: Bool
    /// Extra CAs trusted for https webhook targets (a PEM bundle); read when the server starts.
    public var webhookCAFile: String?
    /// A webhook failing this long is disabled.
    public var webhookGiveUpAfter: Duration
    /// `--data-dir` or `TABSYNC_DATA_DIR` was given (with a store URL it is not used, and the
    /// server says so).
    public var dataDirGiven: Bool

    /// Resolves every setting from `options`, then `environment`, then the defaults.
    public init(options flags: ServerOptions, environment: [String: String]) throws(SettingError) {
        typealias T = SettingTable
        let env = environment
        host = try T.host.resolve(flag: flags.host, environment: env)
        port = try T.port.resolve(flag: flags.port, environment: env)
        dataDir = try T.dataDir.resolve(flag: flags.dataDir, environment: env)
        dataDirGiven = flags.dataDir != nil || !(env[T.dataDir.variable] ?? "").isEmpty
        memory = try T.memory.resolve(flag: flags.memory, environment: env)
        sync = try T.sync.resolve(flag: flags.sync, environment: env)
        idleUnload = try T.idleUnload.resolve(flag: flags.idleUnload, environment: env)
        logLevel = try T.logLevel.resolve(flag: flags.logLevel, environment: env)
        limits = Limits(
            maxTabs: try T.maxTabs.resolve(flag: flags.maxTabs, environment: env),
            maxGroups: try T.maxGroups.resolve(flag: flags.maxGroups, environment: env),
            maxFrameBytes: try T.maxFrameBytes.resolve(flag: flags.maxFrameBytes, environment: env),
            maxOpsPerSecond: try T.maxOpsPerSecond.resolve(flag: flags.maxOpsPerSecond, environment: env),
            maxResumeOps: try T.maxResumeOps.resolve(flag: flags.maxResumeOps, environment: env),
            logRetention: try T.logRetention.resolve(flag: flags.logRetention, environment: env),
            maxSendQueueBytes: try T.maxSendQueueBytes.resolve(flag: flags.maxSendQueueBytes, environment: env))
        maxConnections = try T.maxConnections.resolve(flag: flags.maxConnections, environment: env)
        helloTimeout = try T.helloTimeout.resolve(flag: flags.helloTimeout, environment: env)
        idleTimeout = try T.idleTimeout.resolve(flag: flags.idleTimeout, environment: env)
        eventLoop = try T.eventLoop.resolve(flag: flags.eventLoop, environment: env)
        serveWeb = !(try T.noWeb.resolve(flag: flags.noWeb, environment: env))

        // Transport security.
        tlsCertificateFile = try T.tlsCert.resolve(flag: flags.tlsCert, environment: env)
        tlsKeyFile = try T.tlsKey.resolve(flag: flags.tlsKey, environment: env)
        // One without the other: named where it came from.
        if let cert = tlsCertificateFile, tlsKeyFile == nil {
            throw SettingError(
                source: flags.tlsCert == nil ? T.tlsCert.variable : T.tlsCert.option, value: cert,
                expected: "\(T.tlsKey.option) (or \(T.tlsKey.variable)) with it")
        }
        if let key = tlsKeyFile, tlsCertificateFile == nil {
            throw SettingError(
                source: flags.tlsKey == nil ? T.tlsKey.variable : T.tlsKey.option, value: key,
                expected: "\(T.tlsCert.option) (or \(T.tlsCert.variable)) with it")
        }
        allowedOrigins = try T.allowOrigin.resolve(flag: flags.allowOrigin, environment: env)
        insecureNoAuth = try T.insecureNoAuth.resolve(flag: flags.insecureNoAuth, environment: env)
        maxConnectionsPerIP = try T.maxConnectionsPerIP.resolve(flag: flags.maxConnectionsPerIP, environment: env)
        maxConnectionsPerSub = try T.maxConnectionsPerSub.resolve(flag: flags.maxConnectionsPerSub, environment: env)
        maxOpsPerSecondPerSub = try T.maxOpsPerSecondPerSub.resolve(flag: flags.maxOpsPerSecondPerSub, environment: env)
        maxConnectionsPerWorkspace = try T.maxConnectionsPerWorkspace.resolve(
            flag: flags.maxConnectionsPerWorkspace, environment: env)
        maxHandshakesPerSecondPerIP = try T.maxHandshakesPerSecondPerIP.resolve(
            flag: flags.maxHandshakesPerSecondPerIP, environment: env)

        // Access control.
        authKeyFiles = try T.authKeyFile.resolve(flag: flags.authKeyFile, environment: env)

        // Several nodes on one PostgreSQL.
        storeURL = try T.store.resolve(flag: flags.store, environment: env)
        if let url = storeURL, memory {
            throw SettingError(
                source: flags.store == nil ? T.store.variable : T.store.option, value: SettingValue.redacted(url),
                expected: "either \(T.store.option) or \(T.memory.option) (\(T.memory.variable)), not both")
        }
        storePollInterval = try T.storePollInterval.resolve(flag: flags.storePollInterval, environment: env)
        storeCommitLinger = try T.storeCommitLinger.resolve(flag: flags.storeCommitLinger, environment: env)

        // Slow readers and diagnostics.
        slowCloseGrace = try T.slowCloseGrace.resolve(flag: flags.slowCloseGrace, environment: env)
        shutdownTimeout = try T.shutdownTimeout.resolve(flag: flags.shutdownTimeout, environment: env)
        diagnosticsEcho = try T.diagnosticsEcho.resolve(flag: flags.diagnosticsEcho, environment: env)

        // Presence.
        maxPresencePeers = try T.maxPresencePeers.resolve(flag: flags.maxPresencePeers, environment: env)
        feedKeepAlive = try T.feedKeepAlive.resolve(flag: flags.feedKeepAlive, environment: env)
        webhookAllowPrivate = try T.webhookAllowPrivate.resolve(flag: flags.webhookAllowPrivate, environment: env)
        webhookCAFile = try T.webhookCAFile.resolve(flag: flags.webhookCAFile, environment: env)
        webhookGiveUpAfter = try T.webhookGiveUpAfter.resolve(flag: flags.webhookGiveUpAfter, environment: env)

        // The SQLite store's checkpoints.
        checkpoint = try T.checkpoint.resolve(flag: flags.checkpoint, environment: env)
        walLimitBytes = try T.walLimit.resolve(flag: flags.walLimit, environment: env)
        storeTrace = try T.storeTrace.resolve(flag: flags.storeTrace, environment: env)
        historyRetention = try T.historyRetention.resolve(flag: flags.historyRetention, environment: env)
    }

    /// The SQLite store's options these settings give.
    public var sqliteOptions: SQLiteStore.Options {
        var options = SQLiteStore.Options(sync: sync, checkpoint: checkpoint, walLimitBytes: walLimitBytes, tracePath: storeTrace)
        options.history = historyRetention
        options.loadWindow = limits.logRetention
        return options
    }

    /// The PostgreSQL store's options these settings give.
    public var postgresOptions: PostgresStore.Options {
        var options = PostgresStore.Options()
        options.history = historyRetention
        options.loadWindow = limits.logRetention
        return options
    }

    /// The server configuration these settings give.
    public var configuration: Server.Configuration {
        var configuration = Server.Configuration(
            host: host, port: port, limits: limits, maxConnections: maxConnections,
            helloTimeout: helloTimeout, idleTimeout: idleTimeout,
            idleUnload: idleUnload, eventLoop: eventLoop, serveWeb: serveWeb)
        configuration.tlsCertificateFile = tlsCertificateFile
        configuration.tlsKeyFile = tlsKeyFile
        configuration.allowedOrigins = allowedOrigins
        configuration.insecureNoAuth = insecureNoAuth
        if storeURL != nil {
            // Its commit feed is made with the store (by the executable), on the same URL.
            configuration.sharedStore = .init(pollInterval: storePollInterval, feed: nil)
            configuration.sharedStore?.commitLinger = storeCommitLinger
        }
        configuration.slowCloseGrace = slowCloseGrace
        configuration.diagnosticsEcho = diagnosticsEcho
        configuration.maxPresencePeers = maxPresencePeers
        configuration.feedKeepAlive = feedKeepAlive
        configuration.webhookAllowPrivate = webhookAllowPrivate
        configuration.webhookCAFile = webhookCAFile
        configuration.webhookGiveUpAfter = webhookGiveUpAfter
        configuration.shutdownTimeout = shutdownTimeout
        configuration.quotas = .init(
            maxConnectionsPerSubject: maxConnectionsPerSub, maxOpsPerSecondPerSubject: maxOpsPerSecondPerSub,
            maxConnectionsPerWorkspace: maxConnectionsPerWorkspace)
        if maxConnectionsPerIP != nil || maxHandshakesPerSecondPerIP != nil {
            // One of them given: the other keeps its non-loopback default.
            let exposed = Server.Configuration.PerIPLimits.exposed
            let rate = maxHandshakesPerSecondPerIP ?? exposed.handshakesPerSecond
            configuration.perIPLimits = .init(
                maxConnections: maxConnectionsPerIP ?? exposed.maxConnections, handshakesPerSecond: rate,
                handshakeBurst: max(1, Int((rate * 2).rounded(.up))))
        }
        return configuration
    }
}
