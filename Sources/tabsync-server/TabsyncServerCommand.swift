import ArgumentParser
import Dispatch
import Foundation
import Logging
import TabsyncCore
import TabsyncServer
import TabsyncServerSettings
import TabsyncLock
import TabsyncStore

/// The tabsync server executable: flags and their `TABSYNC_*` variables (declared in ``SettingTable``,
/// resolved by ``ServerSettings``) to a ``Server/Configuration``, a store, signal handling and the
/// one "listening on" line.
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
            `tabsync-server backup --data-dir DIR --to FILE`: copy a served SQLite store, checked, and exit.
            `tabsync-server admin --help`: list workspaces and sessions, kick, revoke tokens, delete workspaces.
            """,
        version: TabsyncVersion.current
    )

    /// Every server flag, as ``SettingTable`` declares it.
    @OptionGroup var options: ServerOptions

    /// `tabsync-server token …` runs ``TokenCommand`` (not an ArgumentParser subcommand: this
    /// command's own `--auth-key-file` would take that option from it); anything else serves.
    static func main() {
        let arguments = Array(CommandLine.arguments.dropFirst())
        if arguments.first == "token" {
            run(TokenCommand.self, Array(arguments.dropFirst()))
        } else if arguments.first == "migrate" {
            run(MigrateCommand.self, Array(arguments.dropFirst()))
        } else if arguments.first == "backup" {
            run(BackupCommand.self, Array(arguments.dropFirst()))
        } else if arguments.first == "admin" {
            run(AdminCommand.self, Array(arguments.dropFirst()))
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
        do throws(SettingError) {
            return try ServerSettings(options: options, environment: ProcessInfo.processInfo.environment)
        } catch {
            throw ValidationError(error.description)
        }
    }

    func validate() throws {
        _ = try resolvedSettings()
    }

    /// The store the flags ask for; an unusable data file ends the process (its path named, the
    /// file untouched), exit status 1.
    /// With a PostgreSQL store, also its commit feed (a listener on the same URL and channel that
    /// skips this store connection's own notifications), its holder registry (the store itself)
    /// and this node's name in it.
    private func openStore(
        _ settings: ServerSettings, logger: Logger
    ) throws -> (StoreCapabilities, SQLiteStore?, Server.Configuration.SharedStore?) {
        if let url = settings.storeURL {
            do throws(PostgresStore.OpenError) {
                let store = try PostgresStore(url: url, options: settings.postgresOptions)
                logger.info("store: postgresql, shared with other nodes", metadata: [
                    "url": "\(SettingValue.redacted(url))", "epoch": "\(store.epoch)",
                    "poll": "\(settings.storePollInterval)",
                ])
                if settings.dataDirGiven {
                    logger.notice("\(SettingTable.dataDir.option) is not used with \(SettingTable.store.option)")
                }
                var shared = settings.configuration.sharedStore
                shared?.feed = PostgresCommitFeed(url: url, store: PostgresStore.Options(), ownBackend: { store.backendPID })
                shared?.holders = store
                shared?.nodeName = store.node
                return (StoreCapabilities(store), nil, shared)
            } catch {
                let line = Array("tabsync-server: \(error.description)\n".utf8)
                line.withUnsafeBytes { _ = write(2, $0.baseAddress, $0.count) }
                throw ExitCode(1)
            }
        }
        if settings.memory {
            logger.info("store: memory (nothing survives a restart)")
            return (StoreCapabilities(MemoryStore(history: settings.historyRetention)), nil, nil)
        }
        let mode = settings.sync
        do throws(SQLiteStore.OpenError) {
            let store = try SQLiteStore(dataDirectory: settings.dataDir, options: settings.sqliteOptions)
            logger.info("store: sqlite", metadata: [
                "path": "\(store.path)", "sync": "\(mode.rawValue)", "epoch": "\(store.epoch)",
                "checkpoint": "\(settings.checkpoint.rawValue)",
            ])
            return (StoreCapabilities(store), store, nil)
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

    /// Blocks SIGINT, SIGTERM and SIGHUP in this thread before any other thread exists, so every
    /// thread inherits the block and the signal sources in `run` (libdispatch reads the signals
    /// with signalfd) are the only way they are taken. A thread that did not block them could be
    /// handed one by the kernel, and libdispatch's handler, which does nothing, would eat it: the
    /// stop would never start. That happened to a first SIGTERM now and then on a loaded machine
    /// (the store's and the loop's threads were made before the sources blocked the signals in
    /// libdispatch's own thread only). Tests/thirdparty/test_signals.py reads every thread's mask.
    private static func blockStopSignals() {
        var signals = sigset_t()
        sigemptyset(&signals)
        for number in [SIGINT, SIGTERM, SIGHUP] { sigaddset(&signals, number) }
        pthread_sigmask(SIG_BLOCK, &signals, nil)
    }

    /// Ends the process at once, status 1, with one line on stderr saying why (a stop that
    /// overran its deadline, or a second signal). Written with write(2): no lock is taken.
    private static func exitNow(_ why: String) -> Never {
        let line = Array("tabsync-server: exiting without finishing the stop: \(why)\n".utf8)
        line.withUnsafeBytes { _ = write(2, $0.baseAddress, $0.count) }
        _exit(1)
    }

    func run() throws {
        Self.blockStopSignals()
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
        let (stores, sqlite, shared) = try openStore(settings, logger: logger)
        configuration.sharedStore = shared
        let server = Server(configuration: configuration, stores: stores, logger: logger)

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
