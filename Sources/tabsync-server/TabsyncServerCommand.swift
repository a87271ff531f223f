import ArgumentParser
import Dispatch
import Foundation
import Logging
import TabsyncCore
import TabsyncServer
import TabsyncLock
import TabsyncStore

/// The tabsync server executable: flags and their `TABSYNC_*` variables (resolved by ``ServerSettings``) to a
/// ``Server/Configuration``, a store, signal handling and the one "listening on" line.
@main
struct TabsyncServerCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tabsync-server",
        abstract: "The tabsync real-time tab workspace server (WebSocket + HTTP on one port).",
        discussion: """
            Prints `listening on ws://HOST:PORT` (wss:// with --tls-cert) on stdout once ready. \
            SIGINT/SIGTERM stop it gracefully: no new connections, pending commits finish, every \
            client is closed 1001, the store is closed, exit 0 (within 5 s when nothing is stuck; after \
            --shutdown-timeout the process exits anyway with status 1, as on a second signal). SIGHUP reads the TLS \
            certificate and key again. Data lives in --data-dir (SQLite) unless --memory; a data file \
            that is not a readable tabsync store is named on stderr and left untouched, exit 1.

            Every option falls back to the environment variable named in its help, then to its \
            default: a flag given on the command line wins, an empty variable counts as unset, and \
            a variable whose value is not valid (TABSYNC_PORT=abc) is refused like a bad flag: its \
            name and value on stderr, exit 2.

            `tabsync-server token --help`: mint an access token (see --auth-key-file).
            `tabsync-server migrate --store URL`: create or migrate a PostgreSQL store's schema and exit.
            """,
        version: TabsyncVersion.current
    )

    @Option(help: "Address to listen on (exactly this one). [env: TABSYNC_HOST] (default: \(Default.host))")
    var host: String?

    @Option(help: "TCP port; 0 picks a free one. [env: TABSYNC_PORT] (default: \(Default.port))")
    var port: String?

    @Option(help: ArgumentHelp(
        "Directory of the embedded SQLite store (file tabsync.sqlite3), created when missing. "
            + "[env: TABSYNC_DATA_DIR] (default: \(Default.dataDir))", valueName: "path"))
    var dataDir: String?

    @Flag(help: "Keep everything in memory instead (nothing survives a restart). [env: TABSYNC_MEMORY=1]")
    var memory: Bool = false

    @Option(help: ArgumentHelp(
        "normal: a commit survives a killed process; full: it also survives a power loss (fsync per "
            + "commit). [env: TABSYNC_SYNC] (default: \(Default.sync.rawValue))", valueName: "normal|full"))
    var sync: String?

    @Option(help: ArgumentHelp(
        "A workspace with no session for this long leaves memory after its last commit: seconds, or "
            + "a duration such as 300s, 5m, 1h, 500ms; 0 unloads at once. [env: TABSYNC_IDLE_UNLOAD] "
            + "(default: \(Default.idleUnload))",
        valueName: "duration"))
    var idleUnload: String?

    @Option(help: "trace, debug, info, notice, warning, error or critical. [env: TABSYNC_LOG_LEVEL] (default: \(Default.logLevel.rawValue))")
    var logLevel: String?

    @Option(help: "Tabs per workspace. [env: TABSYNC_MAX_TABS] (default: \(Limits.default.maxTabs))")
    var maxTabs: String?

    @Option(help: "Bytes of one client message, all fragments together (over it: close 1009). [env: TABSYNC_MAX_FRAME_BYTES] (default: \(Limits.default.maxFrameBytes))")
    var maxFrameBytes: String?

    @Option(help: "Ops per second per connection before RATE_LIMITED. [env: TABSYNC_MAX_OPS_PER_SECOND] (default: \(Limits.default.maxOpsPerSecond))")
    var maxOpsPerSecond: String?

    @Option(help: "Most missed ops a resume sends instead of a snapshot. [env: TABSYNC_MAX_RESUME_OPS] (default: \(Limits.default.maxResumeOps))")
    var maxResumeOps: String?

    @Option(help: "Ops kept per workspace log for resume and repeated answers. [env: TABSYNC_LOG_RETENTION] (default: \(Limits.default.logRetention))")
    var logRetention: String?

    @Option(help: "Bytes queued to one connection before it is closed 1013. [env: TABSYNC_MAX_SEND_QUEUE_BYTES] (default: \(Limits.default.maxSendQueueBytes))")
    var maxSendQueueBytes: String?

    @Option(help: "Open connections at most. [env: TABSYNC_MAX_CONNECTIONS] (default: \(Default.maxConnections))")
    var maxConnections: String?

    @Option(help: "Seconds a new connection has to send its Hello. [env: TABSYNC_HELLO_TIMEOUT] (default: \(Default.helloTimeout))")
    var helloTimeout: String?

    @Option(help: "Seconds without a pong before a connection is closed (pings at half of it). [env: TABSYNC_IDLE_TIMEOUT] (default: \(Default.idleTimeout))")
    var idleTimeout: String?

    @Option(help: "epoll (libev) or poll (libwebsockets' own loop, which scans every connection at every wakeup). [env: TABSYNC_EVENT_LOOP] (default: \(Default.eventLoop.rawValue))")
    var eventLoop: String?

    @Flag(help: "Do not serve the browser page (GET / and /w/WORKSPACE answer 404). [env: TABSYNC_NO_WEB=1]")
    var noWeb = false

    // MARK: transport security (TLS, origins, per-address limits, the refusal to run open)

    @Option(help: ArgumentHelp(
        "PEM certificate chain: the port serves wss:// and https:// only (TLS 1.2+), with --tls-key; "
            + "both are read again on SIGHUP. [env: TABSYNC_TLS_CERT]", valueName: "path"))
    var tlsCert: String?

    @Option(help: ArgumentHelp("PEM private key of --tls-cert. [env: TABSYNC_TLS_KEY]", valueName: "path"))
    var tlsKey: String?

    @Option(help: ArgumentHelp(
        "A browser origin allowed to open a WebSocket (repeatable; https://app.example.com, chrome-extension://ID, or *); "
            + "other origins get 403. Default: any when clients authenticate, loopback pages when auth is off "
            + "on a loopback bind, none otherwise. [env: TABSYNC_ALLOW_ORIGIN, comma-separated]",
        valueName: "origin"))
    var allowOrigin: [String] = []

    @Flag(help: ArgumentHelp(
        "Listen on a non-loopback address without authentication: anyone who can reach the port "
            + "can read and rewrite every workspace. [env: TABSYNC_INSECURE_NO_AUTH=1]"))
    var insecureNoAuth = false

    @Option(name: .customLong("max-connections-per-ip"), help: ArgumentHelp(
        "Open connections from one address at most; 0: no limit. Default: none on a loopback bind, 64 on "
            + "any other. [env: TABSYNC_MAX_CONNECTIONS_PER_IP]", valueName: "n"))
    var maxConnectionsPerIP: String?

    @Option(name: .customLong("max-handshakes-per-second-per-ip"), help: ArgumentHelp(
        "New connections per second from one address (bursts of twice as many); 0: no limit. Default: none "
            + "on a loopback bind, 10 on any other. [env: TABSYNC_MAX_HANDSHAKES_PER_SECOND_PER_IP]",
        valueName: "rate"))
    var maxHandshakesPerSecondPerIP: String?

    // MARK: access control (tokens)

    @Option(help: ArgumentHelp(
        "Turns access control on: tokens (JWT) are checked with the key in this file, an HS256 secret "
            + "(its bytes, a trailing newline stripped; 32 bytes or more) or an Ed25519/P-256 public key "
            + "(PEM). Repeat it to hold several keys (rotation); a key's kid is its file name without "
            + "extension. [env: TABSYNC_AUTH_KEY_FILE, comma-separated]",
        valueName: "file"))
    var authKeyFile: [String] = []

    // MARK: the SQLite store's checkpoints

    @Option(help: ArgumentHelp(
        "Where SQLite's WAL checkpoints run. background: on a thread of their own, never inside a "
            + "commit (commits pause only to restart a WAL past --wal-limit); inline: SQLite's default, inside "
            + "the commit that takes the WAL past 1000 pages. [env: TABSYNC_CHECKPOINT] "
            + "(default: \(Default.checkpoint.rawValue))", valueName: "background|inline"))
    var checkpoint: String?

    @Option(help: ArgumentHelp(
        "With background checkpoints, the WAL file size past which commits pause for a RESTART "
            + "checkpoint: bytes, or with K, M, G (KiB, MiB, GiB); 1M or more. [env: TABSYNC_WAL_LIMIT] "
            + "(default: \(Default.walLimit))", valueName: "size"))
    var walLimit: String?

    @Option(help: ArgumentHelp(
        "Append one line per SQLite commit and per checkpoint to this file (durations, batch sizes, WAL "
            + "frames), for measurements. [env: TABSYNC_STORE_TRACE] (default: none)", valueName: "file"))
    var storeTrace: String?

    // MARK: several nodes on one PostgreSQL

    @Option(help: ArgumentHelp(
        "A PostgreSQL store shared with other nodes instead of the embedded one: "
            + "postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?PARAMETERS] (libpq's URL). Wins over "
            + "--data-dir; refused with --memory. The schema is created or migrated at start. The URL is never "
            + "printed whole. [env: TABSYNC_STORE]", valueName: "url"))
    var store: String?

    @Option(help: ArgumentHelp(
        "With --store: how often the stored version of every loaded workspace is checked, in case a commit "
            + "notification was lost: seconds or a duration such as 1.5s, 500ms; 0: never. "
            + "[env: TABSYNC_STORE_POLL_INTERVAL] (default: \(Default.storePollInterval))", valueName: "duration"))
    var storePollInterval: String?

    // MARK: slow readers and diagnostics

    @Option(help: ArgumentHelp(
        "Time a connection closed 1013 for reading too slowly has for its close frame to leave before "
            + "it is dropped: seconds or 5s, 500ms. [env: TABSYNC_SLOW_CLOSE_GRACE] (default: \(Default.slowCloseGrace))",
        valueName: "duration"))
    var slowCloseGrace: String?

    @Option(help: ArgumentHelp(
        "How long SIGTERM or SIGINT may take to stop the server in all (closing every client 1001, "
            + "closing the store) before the process exits anyway with status 1: at least 5s. A second "
            + "signal exits at once. Acknowledged ops are stored either way. [env: TABSYNC_SHUTDOWN_TIMEOUT] "
            + "(default: \(Default.shutdownTimeout))",
        valueName: "duration"))
    var shutdownTimeout: String?

    @Flag(help: ArgumentHelp(
        "Serve the diagnostics echo subprotocol tabsync.echo on /: every message is sent back whole "
            + "(for the Autobahn testsuite, scripts/autobahn); off by default. [env: TABSYNC_DIAGNOSTICS_ECHO=1]"))
    var diagnosticsEcho = false

    @Option(help: ArgumentHelp(
        "Peers a presence list names at most; the other sessions of the workspace are only counted "
            + "(Presence.othersCount). [env: TABSYNC_MAX_PRESENCE_PEERS] (default: \(Default.maxPresencePeers))",
        valueName: "n"))
    var maxPresencePeers: String?

    private typealias Default = ServerSettings.Default

    /// `tabsync-server token …` runs ``TokenCommand`` (not an ArgumentParser subcommand: this
    /// command's own `--auth-key-file` would take that option from it); anything else serves.
    static func main() {
        let arguments = Array(CommandLine.arguments.dropFirst())
        if arguments.first == "token" {
            run(TokenCommand.self, Array(arguments.dropFirst()))
        } else if arguments.first == "migrate" {
            run(MigrateCommand.self, Array(arguments.dropFirst()))
        } else {
            run(Self.self, arguments)
        }
    }

    /// Parses `arguments` as `command` and runs it; every usage error (a bad flag, a bad
    /// `TABSYNC_*` value) exits 2 with its message, as `tabsync` does.
    private static func run<Command: ParsableCommand>(_ command: Command.Type, _ arguments: [String]) {
        do {
            var parsed = try command.parseAsRoot(arguments)
            try parsed.run()
        } catch {
            if command.exitCode(for: error) == .validationFailure {
                let line = Array((command.fullMessage(for: error) + "\n").utf8)
                line.withUnsafeBytes { _ = write(2, $0.baseAddress, $0.count) }
                Foundation.exit(2)
            }
            command.exit(withError: error)
        }
    }

    /// The flags, the environment and the defaults resolved into one set of settings.
    func resolvedSettings() throws -> ServerSettings {
        var flags = ServerSettings.Flags(
            host: host, port: port, dataDir: dataDir, memory: memory, sync: sync, idleUnload: idleUnload,
            logLevel: logLevel, maxTabs: maxTabs, maxFrameBytes: maxFrameBytes, maxOpsPerSecond: maxOpsPerSecond,
            maxResumeOps: maxResumeOps, logRetention: logRetention, maxSendQueueBytes: maxSendQueueBytes,
            maxConnections: maxConnections, helloTimeout: helloTimeout, idleTimeout: idleTimeout, eventLoop: eventLoop,
            noWeb: noWeb, tlsCert: tlsCert, tlsKey: tlsKey, allowOrigin: allowOrigin, insecureNoAuth: insecureNoAuth,
            maxConnectionsPerIP: maxConnectionsPerIP, maxHandshakesPerSecondPerIP: maxHandshakesPerSecondPerIP,
            authKeyFile: authKeyFile, store: store, storePollInterval: storePollInterval,
            slowCloseGrace: slowCloseGrace, shutdownTimeout: shutdownTimeout, diagnosticsEcho: diagnosticsEcho, maxPresencePeers: maxPresencePeers)
        flags.checkpoint = checkpoint
        flags.walLimit = walLimit
        flags.storeTrace = storeTrace
        do throws(SettingError) {
            return try ServerSettings(flags: flags, environment: ProcessInfo.processInfo.environment)
        } catch {
            throw ValidationError(error.description)
        }
    }

    func validate() throws {
        _ = try resolvedSettings()
    }

    /// The store the flags ask for; an unusable data file ends the process (its path named, the
    /// file untouched), exit status 1.
    /// With a PostgreSQL store, also its commit feed: a listener on the same URL and channel that
    /// skips this store connection's own notifications.
    private func openStore(
        _ settings: ServerSettings, logger: Logger
    ) throws -> (any WorkspaceStore, SQLiteStore?, (any CommitFeed)?) {
        if let url = settings.storeURL {
            do throws(PostgresStore.OpenError) {
                let store = try PostgresStore(url: url)
                logger.info("store: postgresql, shared with other nodes", metadata: [
                    "url": "\(ServerSettings.redacted(url))", "epoch": "\(store.epoch)",
                    "poll": "\(settings.storePollInterval)",
                ])
                if dataDir != nil || !(ProcessInfo.processInfo.environment["TABSYNC_DATA_DIR"] ?? "").isEmpty {
                    logger.notice("--data-dir is not used with --store")
                }
                let feed = PostgresCommitFeed(url: url, store: PostgresStore.Options(), ownBackend: { store.backendPID })
                return (store, nil, feed)
            } catch {
                let line = Array("tabsync-server: \(error.description)\n".utf8)
                line.withUnsafeBytes { _ = write(2, $0.baseAddress, $0.count) }
                throw ExitCode(1)
            }
        }
        if settings.memory {
            logger.info("store: memory (nothing survives a restart)")
            return (MemoryStore(), nil, nil)
        }
        let mode = settings.sync
        do throws(SQLiteStore.OpenError) {
            let store = try SQLiteStore(dataDirectory: settings.dataDir, options: settings.sqliteOptions)
            logger.info("store: sqlite", metadata: [
                "path": "\(store.path)", "sync": "\(mode.rawValue)", "epoch": "\(store.epoch)",
                "checkpoint": "\(settings.checkpoint.rawValue)",
            ])
            return (store, store, nil)
        } catch {
            let line = Array("tabsync-server: \(error.description)\n".utf8)
            line.withUnsafeBytes { _ = write(2, $0.baseAddress, $0.count) }
            throw ExitCode(1)
        }
    }

    /// The token verifier the key files make, nil when none is given. A key file that cannot be
    /// used (unreadable, too short, not a key) ends the process: its path or kid and the reason on
    /// stderr, never its content, exit status 1 (as a TLS file that cannot be served).
    private func loadAccessTokens(_ settings: ServerSettings) throws -> TokenVerifier? {
        guard !settings.authKeyFiles.isEmpty else { return nil }
        do throws(AuthKeyError) {
            return try TokenVerifier(keys: settings.authKeyFiles.map { path throws(AuthKeyError) in
                try AuthKey.load(file: path)
            })
        } catch {
            let line = Array("tabsync-server: \(error.description)\n".utf8)
            line.withUnsafeBytes { _ = write(2, $0.baseAddress, $0.count) }
            throw ExitCode(1)
        }
    }

    /// Ends the process at once, status 1, with one line on stderr saying why (a stop that
    /// overran its deadline, or a second signal). Written with write(2): no lock is taken.
    private static func exitNow(_ why: String) -> Never {
        let line = Array("tabsync-server: exiting without finishing the stop: \(why)\n".utf8)
        line.withUnsafeBytes { _ = write(2, $0.baseAddress, $0.count) }
        _exit(1)
    }

    func run() throws {
        let settings = try resolvedSettings()
        let level = settings.logLevel
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        var logger = Logger(label: "tabsync.server")
        logger.logLevel = level

        var configuration = settings.configuration
        configuration.accessTokens = try loadAccessTokens(settings)
        if let verifier = configuration.accessTokens {
            logger.info("access control on", metadata: ["keys": "\(verifier.keys.map(\.description).joined(separator: ", "))"])
        }
        let (store, sqlite, feed) = try openStore(settings, logger: logger)
        configuration.sharedStore?.feed = feed
        let server = Server(configuration: configuration, store: store, logger: logger)

        // Signals: handled on a dispatch queue, never in a signal handler.
        signal(SIGINT, SIG_IGN)
        signal(SIGTERM, SIG_IGN)
        signal(SIGPIPE, SIG_IGN)
        let signalQueue = DispatchQueue(label: "tabsync.signals")
        // The first SIGINT/SIGTERM starts the graceful stop (on another queue: it blocks until the
        // loop has stopped) and a deadline; a second signal, or the deadline, ends the process at
        // once, status 1. Acknowledged ops are stored before their ack, so neither loses one.
        let stopRequested = TabsyncLock.Lock<ContinuousClock.Instant?>(nil)
        let shutdownTimeout = settings.shutdownTimeout
        let sources = [SIGINT, SIGTERM].map { number in
            let source = DispatchSource.makeSignalSource(signal: number, queue: signalQueue)
            source.setEventHandler {
                let now = ContinuousClock.now
                if let first = stopRequested.withLock({ state in
                    defer { if state == nil { state = now } }
                    return state
                }) {
                    Self.exitNow("a second signal \(number) \(first.duration(to: now)) after the first")
                }
                logger.info("signal received", metadata: ["signal": "\(number)"])
                DispatchQueue.global().async { server.shutdown() }
                let (seconds, attoseconds) = shutdownTimeout.components
                let timeout = DispatchTimeInterval.milliseconds(Int(seconds) * 1000 + Int(attoseconds / 1_000_000_000_000_000))
                signalQueue.asyncAfter(deadline: .now() + timeout) {
                    Self.exitNow("the stop took more than --shutdown-timeout \(shutdownTimeout)")
                }
            }
            source.resume()
            return source
        }
        // SIGHUP: read the TLS certificate and key again (the loop thread does it).
        signal(SIGHUP, SIG_IGN)
        let reload = DispatchSource.makeSignalSource(signal: SIGHUP, queue: signalQueue)
        reload.setEventHandler {
            logger.info("signal received: reloading certificates", metadata: ["signal": "\(SIGHUP)"])
            server.reloadCertificates()
        }
        reload.resume()

        let boundPort: Int
        do {
            boundPort = try server.start()
        } catch {
            // One plain line saying why (for a refusal to run unsafely as for a port in use).
            let line = Array("tabsync-server: \(error.description)\n".utf8)
            line.withUnsafeBytes { _ = write(2, $0.baseAddress, $0.count) }
            sqlite?.close()
            throw ExitCode(1)
        }
        let shownHost = settings.host.contains(":") ? "[\(settings.host)]" : settings.host
        let scheme = settings.tlsCertificateFile == nil ? "ws" : "wss"
        let line = Array("listening on \(scheme)://\(shownHost):\(boundPort)\n".utf8)
        line.withUnsafeBytes { _ = write(1, $0.baseAddress, $0.count) }

        server.waitUntilStopped()
        // After the last commit: close waits for a commit still running on the store thread (they
        // share the connection's lock), then checkpoints the WAL into the file.
        let storeClosing = ContinuousClock.now
        sqlite?.close()
        if let started = stopRequested.withLock({ $0 }) {
            logger.notice("store closed; exiting", metadata: [
                "store_close": "\(storeClosing.duration(to: .now))", "since_signal": "\(started.duration(to: .now))",
            ])
        }
        withExtendedLifetime((sources, reload)) {}
    }
}
