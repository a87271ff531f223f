import Foundation
import Logging
import TabsyncCore
import TabsyncServer
import TabsyncStore

/// A flag or environment variable whose value the server cannot use. The message names where the
/// value came from (`--port` or `TABSYNC_PORT`), the value, and what is expected.
struct SettingError: Error, CustomStringConvertible {
    /// `--port` for a flag, `TABSYNC_PORT` for an environment variable.
    let source: String
    /// The value as given.
    let value: String
    /// What would have been accepted.
    let expected: String

    var description: String {
        let shown = source.hasPrefix("--") ? "\(source) \"\(value)\"" : "\(source)=\"\(value)\""
        return "invalid \(shown): expected \(expected)"
    }
}

/// Every server setting, each resolved once from its flag, else its `TABSYNC_*` environment
/// variable, else its default.
///
/// Guarantees: a value is used only when it parses and is in range; a bad flag or a bad variable
/// is a ``SettingError`` naming it, never a silent fallback to the default. An empty variable
/// counts as unset; a variable is not read at all when its flag is given.
struct ServerSettings {
    var host: String
    var port: Int
    var dataDir: String
    var memory: Bool
    var sync: SQLiteStore.Options.Sync
    var idleUnload: Duration
    var logLevel: Logger.Level
    var limits: Limits
    var maxConnections: Int
    var helloTimeout: Double
    var idleTimeout: Double
    var eventLoop: Server.Configuration.LoopBackend
    /// Serve the browser page (off with `--no-web`).
    var serveWeb: Bool
    /// PEM certificate chain and key (both or neither): the port then serves `wss://` and `https://`.
    var tlsCertificateFile: String?
    var tlsKeyFile: String?
    /// Browser origins allowed to open a WebSocket (empty: the policy the bind implies).
    var allowedOrigins: [String]
    /// Listen beyond loopback without authentication anyway.
    var insecureNoAuth: Bool
    /// Per-address limits as given (nil: the default for the bind).
    var maxConnectionsPerIP: Int?
    var maxHandshakesPerSecondPerIP: Double?
    /// Key files access tokens are checked with (empty: no access control). Read when the server
    /// starts (``AuthKey/load(file:)``), not here.
    var authKeyFiles: [String]
    /// Where the SQLite store's WAL checkpoints run, the WAL bound, and its trace file.
    var checkpoint: SQLiteStore.Options.Checkpoint
    var walLimitBytes: Int64
    var storeTrace: String?
    /// A PostgreSQL store shared with other nodes (`postgres://…` or `postgresql://…`); nil: the
    /// embedded store (`dataDir`, or memory). It wins over `dataDir`; with `memory` it is refused.
    var storeURL: String?
    /// With a shared store: how often loaded workspaces' stored versions are polled (zero: never).
    var storePollInterval: Duration
    /// Time a connection closed 1013 for reading too slowly has for its close frame to leave.
    var slowCloseGrace: Duration
    /// How long a SIGTERM/SIGINT stop may take in all (drain, closing, the store) before the
    /// process exits anyway, status 1.
    var shutdownTimeout: Duration
    /// Serve the diagnostics echo subprotocol `tabsync.echo` (for the Autobahn testsuite).
    var diagnosticsEcho: Bool
    /// Peers a presence list names at most (the rest are counted).
    var maxPresencePeers: Int

    /// The defaults, as `--help` shows them.
    enum Default {
        static let host = "127.0.0.1"
        static let port = 7070
        static let dataDir = "./data"
        static let sync = SQLiteStore.Options.Sync.normal
        static let idleUnload = "5m"
        static let logLevel = Logger.Level.info
        static let maxConnections = 10_000
        static let helloTimeout = 10.0
        static let idleTimeout = 60.0
        static let eventLoop = Server.Configuration.LoopBackend.epoll
        static let checkpoint = SQLiteStore.Options.Checkpoint.background
        static let walLimit = "64M"
        static let storePollInterval = "1.5s"
        static let slowCloseGrace = "5s"
        static let shutdownTimeout = "15s"
        static let maxPresencePeers = 128
    }

    /// The flags as typed (nil: not given).
    struct Flags {
        var host: String?
        var port: String?
        var dataDir: String?
        var memory: Bool
        var sync: String?
        var idleUnload: String?
        var logLevel: String?
        var maxTabs: String?
        var maxFrameBytes: String?
        var maxOpsPerSecond: String?
        var maxResumeOps: String?
        var logRetention: String?
        var maxSendQueueBytes: String?
        var maxConnections: String?
        var helloTimeout: String?
        var idleTimeout: String?
        var eventLoop: String?
        var noWeb: Bool = false
        var tlsCert: String? = nil
        var tlsKey: String? = nil
        /// Every `--allow-origin` given, in order (empty: not given).
        var allowOrigin: [String] = []
        var insecureNoAuth: Bool = false
        var maxConnectionsPerIP: String? = nil
        var maxHandshakesPerSecondPerIP: String? = nil
        /// Every `--auth-key-file` given, in order (empty: not given).
        var authKeyFile: [String] = []
        var checkpoint: String? = nil
        var walLimit: String? = nil
        var storeTrace: String? = nil
        var store: String? = nil
        var storePollInterval: String? = nil
        var slowCloseGrace: String? = nil
        var shutdownTimeout: String? = nil
        var diagnosticsEcho: Bool = false
        var maxPresencePeers: String? = nil
    }

    /// Resolves every setting from `flags`, then `environment`, then the defaults.
    init(flags: Flags, environment: [String: String]) throws(SettingError) {
        let read = Reader(environment: environment)
        host = try read.value(flags.host, "--host", "TABSYNC_HOST", Default.host, "a host name or address") {
            $0.isEmpty ? nil : $0
        }
        port = try read.value(flags.port, "--port", "TABSYNC_PORT", Default.port, "an integer from 0 to 65535") {
            Int($0).flatMap { (0...65_535).contains($0) ? $0 : nil }
        }
        dataDir = try read.value(flags.dataDir, "--data-dir", "TABSYNC_DATA_DIR", Default.dataDir, "a directory path") {
            $0.isEmpty ? nil : $0
        }
        memory = try read.switchValue(flags.memory, "--memory", "TABSYNC_MEMORY")
        sync = try read.value(flags.sync, "--sync", "TABSYNC_SYNC", Default.sync, "normal or full") {
            SQLiteStore.Options.Sync(rawValue: $0.lowercased())
        }
        idleUnload = try read.value(
            flags.idleUnload, "--idle-unload", "TABSYNC_IDLE_UNLOAD", Self.parseDuration(Default.idleUnload)!,
            "seconds or a duration such as 300s, 5m, 1h, 500ms", parse: Self.parseDuration)
        logLevel = try read.value(
            flags.logLevel, "--log-level", "TABSYNC_LOG_LEVEL", Default.logLevel,
            "trace, debug, info, notice, warning, error or critical") { Logger.Level(rawValue: $0.lowercased()) }

        let positive = "an integer of 1 or more"
        let count: (String) -> Int? = { Int($0).flatMap { $0 >= 1 ? $0 : nil } }
        let d = Limits.default
        limits = Limits(
            maxTabs: try read.value(flags.maxTabs, "--max-tabs", "TABSYNC_MAX_TABS", d.maxTabs, positive, parse: count),
            maxFrameBytes: try read.value(
                flags.maxFrameBytes, "--max-frame-bytes", "TABSYNC_MAX_FRAME_BYTES", d.maxFrameBytes, positive, parse: count),
            maxOpsPerSecond: try read.value(
                flags.maxOpsPerSecond, "--max-ops-per-second", "TABSYNC_MAX_OPS_PER_SECOND", d.maxOpsPerSecond, positive,
                parse: count),
            maxResumeOps: try read.value(
                flags.maxResumeOps, "--max-resume-ops", "TABSYNC_MAX_RESUME_OPS", d.maxResumeOps, positive, parse: count),
            logRetention: try read.value(
                flags.logRetention, "--log-retention", "TABSYNC_LOG_RETENTION", d.logRetention, positive, parse: count),
            maxSendQueueBytes: try read.value(
                flags.maxSendQueueBytes, "--max-send-queue-bytes", "TABSYNC_MAX_SEND_QUEUE_BYTES", d.maxSendQueueBytes,
                positive, parse: count))
        maxConnections = try read.value(
            flags.maxConnections, "--max-connections", "TABSYNC_MAX_CONNECTIONS", Default.maxConnections, positive,
            parse: count)
        helloTimeout = try read.value(
            flags.helloTimeout, "--hello-timeout", "TABSYNC_HELLO_TIMEOUT", Default.helloTimeout,
            "seconds, more than 0") { Double($0).flatMap { $0 > 0 && $0.isFinite ? $0 : nil } }
        idleTimeout = try read.value(
            flags.idleTimeout, "--idle-timeout", "TABSYNC_IDLE_TIMEOUT", Default.idleTimeout,
            "seconds, 2 or more") { Double($0).flatMap { $0 >= 2 && $0.isFinite ? $0 : nil } }
        eventLoop = try read.value(flags.eventLoop, "--event-loop", "TABSYNC_EVENT_LOOP", Default.eventLoop, "epoll or poll") {
            Server.Configuration.LoopBackend(rawValue: $0.lowercased())
        }
        serveWeb = !(try read.switchValue(flags.noWeb, "--no-web", "TABSYNC_NO_WEB"))

        // Transport security.
        let path: (String) -> String? = { $0.isEmpty ? nil : $0 }
        tlsCertificateFile = try read.optionalValue(flags.tlsCert, "--tls-cert", "TABSYNC_TLS_CERT", "a file path", parse: path)
        tlsKeyFile = try read.optionalValue(flags.tlsKey, "--tls-key", "TABSYNC_TLS_KEY", "a file path", parse: path)
        // One without the other: named where it came from.
        if let cert = tlsCertificateFile, tlsKeyFile == nil {
            throw SettingError(
                source: flags.tlsCert == nil ? "TABSYNC_TLS_CERT" : "--tls-cert", value: cert,
                expected: "--tls-key (or TABSYNC_TLS_KEY) with it")
        }
        if let key = tlsKeyFile, tlsCertificateFile == nil {
            throw SettingError(
                source: flags.tlsKey == nil ? "TABSYNC_TLS_KEY" : "--tls-key", value: key,
                expected: "--tls-cert (or TABSYNC_TLS_CERT) with it")
        }
        allowedOrigins = try read.list(
            flags.allowOrigin, "--allow-origin", "TABSYNC_ALLOW_ORIGIN",
            "scheme://host[:port] (http or https), chrome-extension://ID, moz-extension://UUID, null, or *", valid: Server.Configuration.isValidAllowedOrigin)
        insecureNoAuth = try read.switchValue(flags.insecureNoAuth, "--insecure-no-auth", "TABSYNC_INSECURE_NO_AUTH")
        maxConnectionsPerIP = try read.optionalValue(
            flags.maxConnectionsPerIP, "--max-connections-per-ip", "TABSYNC_MAX_CONNECTIONS_PER_IP",
            "an integer of 0 or more (0: no limit)") { Int($0).flatMap { $0 >= 0 ? $0 : nil } }
        maxHandshakesPerSecondPerIP = try read.optionalValue(
            flags.maxHandshakesPerSecondPerIP, "--max-handshakes-per-second-per-ip",
            "TABSYNC_MAX_HANDSHAKES_PER_SECOND_PER_IP", "a number of 0 or more (0: no limit)") {
            Double($0).flatMap { $0 >= 0 && $0.isFinite ? $0 : nil }
        }

        // Access control.
        authKeyFiles = try read.list(flags.authKeyFile, "--auth-key-file", "TABSYNC_AUTH_KEY_FILE", "a file path") {
            !$0.trimmingCharacters(in: .whitespaces).isEmpty
        }

        // Several nodes on one PostgreSQL.
        storeURL = try Self.storeURL(flags.store, environment: environment)
        if let url = storeURL, memory {
            throw SettingError(
                source: flags.store == nil ? "TABSYNC_STORE" : "--store", value: Self.redacted(url),
                expected: "either --store or --memory (TABSYNC_MEMORY), not both")
        }
        storePollInterval = try read.value(
            flags.storePollInterval, "--store-poll-interval", "TABSYNC_STORE_POLL_INTERVAL",
            Self.parseDuration(Default.storePollInterval)!, "seconds or a duration such as 1.5s, 500ms; 0: no poll",
            parse: Self.parseDuration)

        // Slow readers and diagnostics.
        slowCloseGrace = try read.value(
            flags.slowCloseGrace, "--slow-close-grace", "TABSYNC_SLOW_CLOSE_GRACE",
            Self.parseDuration(Default.slowCloseGrace)!, "a duration of more than 0 such as 5, 5s, 500ms") {
            Self.parseDuration($0).flatMap { $0 > .zero ? $0 : nil }
        }
        shutdownTimeout = try read.value(
            flags.shutdownTimeout, "--shutdown-timeout", "TABSYNC_SHUTDOWN_TIMEOUT",
            Self.parseDuration(Default.shutdownTimeout)!, "a duration of at least 5s such as 15, 15s, 1m") {
            Self.parseDuration($0).flatMap { $0 >= .seconds(5) ? $0 : nil }
        }
        diagnosticsEcho = try read.switchValue(flags.diagnosticsEcho, "--diagnostics-echo", "TABSYNC_DIAGNOSTICS_ECHO")

        // Presence.
        maxPresencePeers = try read.value(
            flags.maxPresencePeers, "--max-presence-peers", "TABSYNC_MAX_PRESENCE_PEERS", Default.maxPresencePeers,
            positive, parse: count)

        // The SQLite store's checkpoints.
        checkpoint = try read.value(
            flags.checkpoint, "--checkpoint", "TABSYNC_CHECKPOINT", Default.checkpoint, "background or inline") {
            SQLiteStore.Options.Checkpoint(rawValue: $0.lowercased())
        }
        walLimitBytes = try read.value(
            flags.walLimit, "--wal-limit", "TABSYNC_WAL_LIMIT", Self.parseSize(Default.walLimit)!,
            "bytes, or a size such as 64M, 512K, 1G; at least 1M") { Self.parseSize($0).flatMap { $0 >= 1 << 20 ? $0 : nil } }
        storeTrace = try read.optionalValue(flags.storeTrace, "--store-trace", "TABSYNC_STORE_TRACE", "a file path", parse: path)
    }

    /// The SQLite store's options these settings give.
    var sqliteOptions: SQLiteStore.Options {
        SQLiteStore.Options(sync: sync, checkpoint: checkpoint, walLimitBytes: walLimitBytes, tracePath: storeTrace)
    }

    /// A size from plain bytes (`1048576`) or a number with a binary unit (`K`, `M`, `G`, or `KiB`,
    /// `MiB`, `GiB`; any case).
    static func parseSize(_ text: String) -> Int64? {
        var trimmed = text.trimmingCharacters(in: .whitespaces).lowercased()
        if trimmed.hasSuffix("ib") { trimmed.removeLast(2) }
        let units: [(String, Int64)] = [("k", 1 << 10), ("m", 1 << 20), ("g", 1 << 30)]
        var scale: Int64 = 1
        for (suffix, factor) in units where trimmed.hasSuffix(suffix) {
            trimmed.removeLast()
            scale = factor
            break
        }
        guard let value = Int64(trimmed), value >= 0, value <= Int64.max / scale else { return nil }
        return value * scale
    }

    /// `--store`, else `TABSYNC_STORE`: a `postgres://` or `postgresql://` URL. A bad value is named
    /// without what could be a password (see ``redacted(_:)``).
    static func storeURL(_ flag: String?, environment: [String: String]) throws(SettingError) -> String? {
        let (given, source): (String?, String) =
            flag != nil ? (flag, "--store") : (environment["TABSYNC_STORE"].flatMap { $0.isEmpty ? nil : $0 }, "TABSYNC_STORE")
        guard let given else { return nil }
        let lower = given.lowercased()
        let scheme = ["postgres://", "postgresql://"].first { lower.hasPrefix($0) }
        guard let scheme, given.count > scheme.count else {
            throw SettingError(
                source: source, value: redacted(given),
                expected: "a PostgreSQL URL, postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?PARAMETERS]")
        }
        return given
    }

    /// A store URL safe to print: the scheme, user, host, port and database, never a password (in
    /// the user part or a parameter) nor the parameters. A value that is not a URL shows as its
    /// scheme (or `…`).
    static func redacted(_ url: String) -> String {
        guard let schemeEnd = url.range(of: "://") else {
            // Not a URL: shown unless it could hold a password (`password=…`, `user:secret@host`).
            return url.contains("=") || url.contains("@") || url.contains(":") ? "…" : url
        }
        let scheme = url[..<schemeEnd.lowerBound]
        var rest = url[schemeEnd.upperBound...]
        if let query = rest.firstIndex(where: { $0 == "?" || $0 == "#" }) { rest = rest[..<query] }
        var user = ""
        if let at = rest.lastIndex(of: "@") {
            user = String(rest[..<at].prefix(while: { $0 != ":" })) + "@"
            rest = rest[rest.index(after: at)...]
        }
        return "\(scheme)://\(user)\(rest)"
    }

    /// The server configuration these settings give.
    var configuration: Server.Configuration {
        var configuration = Server.Configuration(
            host: host, port: port, limits: limits, maxConnections: maxConnections,
            helloTimeout: .milliseconds(Int64(helloTimeout * 1000)),
            idleTimeout: .milliseconds(Int64(idleTimeout * 1000)),
            idleUnload: idleUnload, eventLoop: eventLoop, serveWeb: serveWeb)
        configuration.tlsCertificateFile = tlsCertificateFile
        configuration.tlsKeyFile = tlsKeyFile
        configuration.allowedOrigins = allowedOrigins
        configuration.insecureNoAuth = insecureNoAuth
        if storeURL != nil {
            // Its commit feed is made with the store (TabsyncServerCommand.openStore), on the same URL.
            configuration.sharedStore = .init(pollInterval: storePollInterval, feed: nil)
        }
        configuration.slowCloseGrace = slowCloseGrace
        configuration.diagnosticsEcho = diagnosticsEcho
        configuration.maxPresencePeers = maxPresencePeers
        configuration.shutdownTimeout = shutdownTimeout
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

    /// Reads one setting: the flag when given, else the variable when set and not empty, else the default.
    private struct Reader {
        let environment: [String: String]

        func value<T>(
            _ flag: String?, _ flagName: String, _ variable: String, _ fallback: T, _ expected: String,
            parse: (String) -> T?
        ) throws(SettingError) -> T {
            if let flag {
                guard let value = parse(flag) else { throw SettingError(source: flagName, value: flag, expected: expected) }
                return value
            }
            if let text = environment[variable], !text.isEmpty {
                guard let value = parse(text) else { throw SettingError(source: variable, value: text, expected: expected) }
                return value
            }
            return fallback
        }

        /// A setting with no default: nil when neither the flag nor the variable is given.
        func optionalValue<T>(
            _ flag: String?, _ flagName: String, _ variable: String, _ expected: String, parse: (String) -> T?
        ) throws(SettingError) -> T? {
            try value(flag, flagName, variable, nil as T?, expected) { parse($0).map { Optional($0) } }
        }

        /// A repeatable flag: every value given, each checked; else the variable's comma-separated
        /// entries (blanks around them ignored, empty ones skipped); else empty. A bad entry names
        /// the flag and that entry, or the variable and its whole value.
        func list(
            _ flag: [String], _ flagName: String, _ variable: String, _ expected: String, valid: (String) -> Bool
        ) throws(SettingError) -> [String] {
            if !flag.isEmpty {
                if let bad = flag.first(where: { !valid($0) }) {
                    throw SettingError(source: flagName, value: bad, expected: expected)
                }
                return flag
            }
            guard let text = environment[variable], !text.isEmpty else { return [] }
            let entries = text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            guard !entries.isEmpty, entries.allSatisfy(valid) else { throw SettingError(source: variable, value: text, expected: expected) }
            return entries
        }

        /// A switch: on when its flag is given, else what the variable says (1, true, yes, on or
        /// 0, false, no, off; any case), else off.
        func switchValue(_ flag: Bool, _ flagName: String, _ variable: String) throws(SettingError) -> Bool {
            if flag { return true }
            return try value(nil, flagName, variable, false, "1, true, yes, on or 0, false, no, off") {
                switch $0.lowercased() {
                case "1", "true", "yes", "on": true
                case "0", "false", "no", "off": false
                default: nil
                }
            }
        }
    }
}
