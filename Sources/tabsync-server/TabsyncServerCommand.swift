import ArgumentParser
import Dispatch
import Foundation
import Logging
import TabsyncCore
import TabsyncServer
import TabsyncStore

/// The value of a `TABSYNC_*` environment variable, or nil.
private func env(_ name: String) -> String? {
    ProcessInfo.processInfo.environment[name].flatMap { $0.isEmpty ? nil : $0 }
}

private func envInt(_ name: String, _ fallback: Int) -> Int { env(name).flatMap(Int.init) ?? fallback }
private func envDouble(_ name: String, _ fallback: Double) -> Double { env(name).flatMap(Double.init) ?? fallback }

/// The tabsync server executable: flags (each with a `TABSYNC_*` environment fallback) to a
/// ``Server/Configuration``, a store, signal handling and the one "listening on" line.
@main
struct TabsyncServerCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tabsync-server",
        abstract: "The tabsync real-time tab workspace server (WebSocket + HTTP on one port).",
        discussion: """
            Prints `listening on ws://HOST:PORT` on stdout once ready. SIGINT/SIGTERM stop it \
            gracefully: no new connections, pending commits finish, every client is closed 1001, \
            the store is closed, exit 0 within 5 s. Data lives in --data-dir (SQLite) unless --memory; \
            a data file that is not a readable tabsync store is named on stderr and left untouched, \
            exit 1. Every option falls back to the environment variable named in its help.
            """
    )

    @Option(help: "Address to listen on (exactly this one). [env: TABSYNC_HOST]")
    var host: String = env("TABSYNC_HOST") ?? "127.0.0.1"

    @Option(help: "TCP port; 0 picks a free one. [env: TABSYNC_PORT]")
    var port: Int = envInt("TABSYNC_PORT", 7070)

    @Option(help: ArgumentHelp(
        "Directory of the embedded SQLite store (file tabsync.sqlite3), created when missing. "
            + "[env: TABSYNC_DATA_DIR]", valueName: "path"))
    var dataDir: String = env("TABSYNC_DATA_DIR") ?? "./data"

    @Flag(help: "Keep everything in memory instead (nothing survives a restart). [env: TABSYNC_MEMORY=1]")
    var memory: Bool = env("TABSYNC_MEMORY").map { ["1", "true", "yes"].contains($0.lowercased()) } ?? false

    @Option(help: ArgumentHelp(
        "normal: a commit survives a killed process; full: it also survives a power loss (fsync per "
            + "commit). [env: TABSYNC_SYNC]", valueName: "normal|full"))
    var sync: String = env("TABSYNC_SYNC") ?? "normal"

    @Option(help: ArgumentHelp(
        "A workspace with no session for this long leaves memory after its last commit: seconds, or "
            + "a duration such as 300s, 5m, 1h, 500ms; 0 unloads at once. [env: TABSYNC_IDLE_UNLOAD]",
        valueName: "duration"))
    var idleUnload: String = env("TABSYNC_IDLE_UNLOAD") ?? "5m"

    @Option(help: "trace, debug, info, notice, warning, error or critical. [env: TABSYNC_LOG_LEVEL]")
    var logLevel: String = env("TABSYNC_LOG_LEVEL") ?? "info"

    @Option(help: "Tabs per workspace. [env: TABSYNC_MAX_TABS]")
    var maxTabs: Int = envInt("TABSYNC_MAX_TABS", Limits.default.maxTabs)

    @Option(help: "Bytes of one client message, all fragments together (over it: close 1009). [env: TABSYNC_MAX_FRAME_BYTES]")
    var maxFrameBytes: Int = envInt("TABSYNC_MAX_FRAME_BYTES", Limits.default.maxFrameBytes)

    @Option(help: "Ops per second per connection before RATE_LIMITED. [env: TABSYNC_MAX_OPS_PER_SECOND]")
    var maxOpsPerSecond: Int = envInt("TABSYNC_MAX_OPS_PER_SECOND", Limits.default.maxOpsPerSecond)

    @Option(help: "Most missed ops a resume sends instead of a snapshot. [env: TABSYNC_MAX_RESUME_OPS]")
    var maxResumeOps: Int = envInt("TABSYNC_MAX_RESUME_OPS", Limits.default.maxResumeOps)

    @Option(help: "Ops kept per workspace log for resume and repeated answers. [env: TABSYNC_LOG_RETENTION]")
    var logRetention: Int = envInt("TABSYNC_LOG_RETENTION", Limits.default.logRetention)

    @Option(help: "Bytes queued to one connection before it is closed 1013. [env: TABSYNC_MAX_SEND_QUEUE_BYTES]")
    var maxSendQueueBytes: Int = envInt("TABSYNC_MAX_SEND_QUEUE_BYTES", Limits.default.maxSendQueueBytes)

    @Option(help: "Open connections at most. [env: TABSYNC_MAX_CONNECTIONS]")
    var maxConnections: Int = envInt("TABSYNC_MAX_CONNECTIONS", 10_000)

    @Option(help: "Seconds a new connection has to send its Hello. [env: TABSYNC_HELLO_TIMEOUT]")
    var helloTimeout: Double = envDouble("TABSYNC_HELLO_TIMEOUT", 10)

    @Option(help: "Seconds without a pong before a connection is closed (pings at half of it). [env: TABSYNC_IDLE_TIMEOUT]")
    var idleTimeout: Double = envDouble("TABSYNC_IDLE_TIMEOUT", 60)

    @Option(help: "epoll (libev, the default) or poll (libwebsockets' own loop, which scans every connection at every wakeup). [env: TABSYNC_EVENT_LOOP]")
    var eventLoop: String = env("TABSYNC_EVENT_LOOP") ?? "epoll"

    @Flag(help: "Do not serve the browser page (GET / and /w/WORKSPACE answer 404). [env: TABSYNC_NO_WEB=1]")
    var noWeb: Bool = env("TABSYNC_NO_WEB").map { ["1", "true", "yes"].contains($0.lowercased()) } ?? false

    func validate() throws {
        guard Server.Configuration.EventLoop(rawValue: eventLoop) != nil else {
            throw ValidationError("--event-loop must be epoll or poll")
        }
        guard (0...65_535).contains(port) else { throw ValidationError("--port must be 0-65535") }
        guard Logger.Level(rawValue: logLevel.lowercased()) != nil else {
            throw ValidationError("--log-level must be one of trace, debug, info, notice, warning, error, critical")
        }
        for (name, value) in [
            ("max-tabs", maxTabs), ("max-frame-bytes", maxFrameBytes), ("max-ops-per-second", maxOpsPerSecond),
            ("max-resume-ops", maxResumeOps), ("log-retention", logRetention),
            ("max-send-queue-bytes", maxSendQueueBytes), ("max-connections", maxConnections),
        ] where value < 1 {
            throw ValidationError("--\(name) must be 1 or more")
        }
        guard helloTimeout > 0, idleTimeout >= 2 else {
            throw ValidationError("--hello-timeout must be over 0 and --idle-timeout at least 2")
        }
        guard SQLiteStore.Options.Sync(rawValue: sync.lowercased()) != nil else {
            throw ValidationError("--sync must be normal or full")
        }
        guard Self.parseDuration(idleUnload) != nil else {
            throw ValidationError("--idle-unload must be seconds or a duration such as 300s, 5m, 1h, 500ms")
        }
    }

    /// A duration from plain seconds (`300`, `0.5`) or a number with a unit (`ms`, `s`, `m`, `h`).
    static func parseDuration(_ text: String) -> Duration? {
        let trimmed = text.trimmingCharacters(in: .whitespaces).lowercased()
        let units: [(String, Double)] = [("ms", 0.001), ("s", 1), ("m", 60), ("h", 3600)]
        var number = Substring(trimmed)
        var scale = 1.0
        for (suffix, factor) in units where trimmed.hasSuffix(suffix) {
            number = trimmed.dropLast(suffix.count)
            scale = factor
            break
        }
        guard let value = Double(number), value >= 0, value.isFinite else { return nil }
        return .milliseconds(Int64((value * scale * 1000).rounded()))
    }

    /// The store the flags ask for; an unusable data file ends the process (its path named, the
    /// file untouched), exit status 1.
    private func openStore(logger: Logger) throws -> (any WorkspaceStore, SQLiteStore?) {
        if memory {
            logger.info("store: memory (nothing survives a restart)")
            return (MemoryStore(), nil)
        }
        let mode = SQLiteStore.Options.Sync(rawValue: sync.lowercased()) ?? .normal
        do throws(SQLiteStore.OpenError) {
            let store = try SQLiteStore(dataDirectory: dataDir, options: .init(sync: mode))
            logger.info("store: sqlite", metadata: ["path": "\(store.path)", "sync": "\(mode.rawValue)", "epoch": "\(store.epoch)"])
            return (store, store)
        } catch {
            let line = Array("tabsync-server: \(error.description)\n".utf8)
            line.withUnsafeBytes { _ = write(2, $0.baseAddress, $0.count) }
            throw ExitCode(1)
        }
    }

    func run() throws {
        let level = Logger.Level(rawValue: logLevel.lowercased()) ?? .info
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        var logger = Logger(label: "tabsync.server")
        logger.logLevel = level

        let configuration = Server.Configuration(
            host: host, port: port,
            limits: Limits(
                maxTabs: maxTabs, maxFrameBytes: maxFrameBytes, maxOpsPerSecond: maxOpsPerSecond,
                maxResumeOps: maxResumeOps, logRetention: logRetention, maxSendQueueBytes: maxSendQueueBytes),
            maxConnections: maxConnections,
            helloTimeout: .milliseconds(Int64(helloTimeout * 1000)),
            idleTimeout: .milliseconds(Int64(idleTimeout * 1000)),
            idleUnload: Self.parseDuration(idleUnload) ?? .seconds(300),
            eventLoop: Server.Configuration.EventLoop(rawValue: eventLoop) ?? .epoll,
            serveWeb: !noWeb)
        let (store, sqlite) = try openStore(logger: logger)
        let server = Server(configuration: configuration, store: store, logger: logger)

        // Signals: handled on a dispatch queue, never in a signal handler.
        signal(SIGINT, SIG_IGN)
        signal(SIGTERM, SIG_IGN)
        signal(SIGPIPE, SIG_IGN)
        let signalQueue = DispatchQueue(label: "tabsync.signals")
        let sources = [SIGINT, SIGTERM].map { number in
            let source = DispatchSource.makeSignalSource(signal: number, queue: signalQueue)
            source.setEventHandler {
                logger.info("signal received", metadata: ["signal": "\(number)"])
                server.shutdown()
            }
            source.resume()
            return source
        }

        let boundPort: Int
        do {
            boundPort = try server.start()
        } catch {
            logger.critical("cannot start", metadata: ["error": "\(error)"])
            sqlite?.close()
            throw ExitCode(1)
        }
        let shownHost = host.contains(":") ? "[\(host)]" : host
        let line = Array("listening on ws://\(shownHost):\(boundPort)\n".utf8)
        line.withUnsafeBytes { _ = write(1, $0.baseAddress, $0.count) }

        server.waitUntilStopped()
        // After the last commit: close waits for a commit still running on the store thread (they
        // share the connection's lock), then checkpoints the WAL into the file.
        sqlite?.close()
        withExtendedLifetime(sources) {}
    }
}
