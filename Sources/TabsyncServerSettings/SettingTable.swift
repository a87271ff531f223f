import Foundation
import Logging
import TabsyncCore
import TabsyncServer
import TabsyncStore

/// Every setting of `tabsync-server`, each declared here once (flag, variable, default, doc,
/// accepted values), in `--help` order; ``all`` lists them for the table and its tests.
///
/// Guarantees: a default the server library already has (``Server/Configuration``,
/// ``SQLiteStore/Options``, ``Limits/default``) is taken from it, not restated; the rest (the
/// data directory, the log level, the executable's stop deadline) are stated here and nowhere else.
public enum SettingTable {
    /// The server library's defaults.
    private static let server = Server.Configuration()
    private static let sqlite = SQLiteStore.Options()
    private static let limits = Limits.default

    private static let positive = "an integer of 1 or more"
    private static let count: @Sendable (String) -> Int? = { SettingValue.integer($0, in: 1...) }

    public static let host = Setting<String>(
        "host", default: server.host, doc: "Address to listen on (exactly this one).",
        expected: "a host name or address", parse: SettingValue.nonEmpty)

    public static let port = Setting<Int>(
        "port", default: server.port, doc: "TCP port; 0 picks a free one.", expected: "an integer from 0 to 65535"
    ) { Int($0).flatMap { (0...65_535).contains($0) ? $0 : nil } }

    public static let dataDir = Setting<String>(
        "data-dir", default: "./data",
        doc: "Directory of the embedded SQLite store (file tabsync.sqlite3), created when missing.",
        valueName: "path", expected: "a directory path", parse: SettingValue.nonEmpty)

    public static let memory = Setting<Bool>(
        switch: "memory", doc: "Keep everything in memory instead (nothing survives a restart).")

    public static let sync = Setting<SQLiteStore.Options.Sync>(
        "sync", default: sqlite.sync, show: \.rawValue,
        doc: "normal: a commit survives a killed process; full: it also survives a power loss (fsync per commit).",
        valueName: "normal|full", expected: "normal or full"
    ) { SQLiteStore.Options.Sync(rawValue: $0.lowercased()) }

    public static let idleUnload = Setting<Duration>(
        duration: "idle-unload", default: server.idleUnload,
        doc: "A workspace with no session for this long leaves memory after its last commit: seconds, or "
            + "a duration such as 300s, 5m, 1h, 500ms; 0 unloads at once.",
        expected: "seconds or a duration such as 300s, 5m, 1h, 500ms")

    public static let logLevel = Setting<Logger.Level>(
        "log-level", default: .info, show: \.rawValue, doc: "trace, debug, info, notice, warning, error or critical.",
        expected: "trace, debug, info, notice, warning, error or critical") { Logger.Level(rawValue: $0.lowercased()) }

    public static let maxTabs = Setting<Int>(
        "max-tabs", default: limits.maxTabs, doc: "Tabs per workspace.", expected: positive, parse: count)

    public static let maxGroups = Setting<Int>(
        "max-groups", default: limits.maxGroups, doc: "Tab groups per workspace (over it: LIMIT_EXCEEDED).",
        expected: positive, parse: count)

    public static let maxFrameBytes = Setting<Int>(
        "max-frame-bytes", default: limits.maxFrameBytes,
        doc: "Bytes of one client message, all fragments together (over it: close 1009).", expected: positive, parse: count)

    public static let maxOpsPerSecond = Setting<Int>(
        "max-ops-per-second", default: limits.maxOpsPerSecond, doc: "Ops per second per connection before RATE_LIMITED; HTTP writes get as much per workspace and sub (429).",
        expected: positive, parse: count)

    public static let maxResumeOps = Setting<Int>(
        "max-resume-ops", default: limits.maxResumeOps, doc: "Most missed ops a resume sends instead of a snapshot.",
        expected: positive, parse: count)

    public static let logRetention = Setting<Int>(
        "log-retention", default: limits.logRetention,
        doc: "Ops kept per workspace log for resume and repeated answers.", expected: positive, parse: count)

    public static let maxSendQueueBytes = Setting<Int>(
        "max-send-queue-bytes", default: limits.maxSendQueueBytes,
        doc: "Bytes queued to one connection before it is closed 1013.", expected: positive, parse: count)

    public static let maxConnections = Setting<Int>(
        "max-connections", default: server.maxConnections, doc: "Open connections at most.", expected: positive,
        parse: count)

    public static let helloTimeout = Setting<Duration>(
        "hello-timeout", default: server.helloTimeout, show: SettingValue.secondsText,
        doc: "Seconds a new connection has to send its Hello.", expected: "seconds, more than 0"
    ) { SettingValue.seconds($0) { $0 > 0 } }

    public static let idleTimeout = Setting<Duration>(
        "idle-timeout", default: server.idleTimeout, show: SettingValue.secondsText,
        doc: "Seconds without a frame or a pong before a connection is closed (pings after 0.75 to 0.9 of it).", expected: "seconds, 2 or more"
    ) { SettingValue.seconds($0) { $0 >= 2 } }

    public static let eventLoop = Setting<Server.Configuration.LoopBackend>(
        "event-loop", default: server.eventLoop, show: \.rawValue,
        doc: "epoll (libev) or poll (libwebsockets' own loop, which scans every connection at every wakeup).",
        expected: "epoll or poll") { Server.Configuration.LoopBackend(rawValue: $0.lowercased()) }

    public static let noWeb = Setting<Bool>(
        switch: "no-web", doc: "Do not serve the browser page (GET / and /w/WORKSPACE answer 404).")

    // MARK: transport security (TLS, origins, per-address limits, the refusal to run open)

    public static let tlsCert = Setting<String?>(
        "tls-cert",
        doc: "PEM certificate chain: the port serves wss:// and https:// only (TLS 1.2+), with --tls-key; "
            + "both are read again on SIGHUP.",
        valueName: "path", expected: "a file path", parse: SettingValue.nonEmpty)

    public static let tlsKey = Setting<String?>(
        "tls-key", doc: "PEM private key of --tls-cert.", valueName: "path", expected: "a file path",
        parse: SettingValue.nonEmpty)

    public static let allowOrigin = Setting<[String]>(
        list: "allow-origin",
        doc: "A browser origin allowed to open a WebSocket (repeatable; https://app.example.com, chrome-extension://ID, "
            + "moz-extension://UUID, moz-extension://* for any Firefox extension, or *); "
            + "other origins get 403. Default: any when clients authenticate, loopback pages when auth is off "
            + "on a loopback bind, none otherwise.",
        valueName: "origin",
        expected: "scheme://host[:port] (http or https), chrome-extension://ID, moz-extension://UUID, moz-extension://*, null, or *",
        entry: Server.Configuration.isValidAllowedOrigin)

    public static let insecureNoAuth = Setting<Bool>(
        switch: "insecure-no-auth",
        doc: "Listen on a non-loopback address without authentication: anyone who can reach the port "
            + "can read and rewrite every workspace.")

    public static let maxConnectionsPerIP = Setting<Int?>(
        "max-connections-per-ip",
        doc: "Open connections from one address at most; 0: no limit. Default: none on a loopback bind, "
            + "\(Server.Configuration.PerIPLimits.exposed.maxConnections) on any other.",
        valueName: "n", expected: "an integer of 0 or more (0: no limit)") { SettingValue.integer($0, in: 0...) }

    public static let maxConnectionsPerSub = Setting<Int?>(
        "max-connections-per-sub",
        doc: "Sessions one token subject (`sub`) may hold open on this node at once; one more is refused "
            + "LIMIT_EXCEEDED and closed 4429. Needs tokens. Default: no limit.",
        valueName: "n", expected: "an integer of 1 or more") { SettingValue.integer($0, in: 1...) }

    public static let maxOpsPerSecondPerSub = Setting<Int?>(
        "max-ops-per-second-per-sub",
        doc: "Ops per second one token subject may submit across all its sessions on this node; more are "
            + "refused RATE_LIMITED (clients retry). Needs tokens. Default: no limit.",
        valueName: "n", expected: "an integer of 1 or more") { SettingValue.integer($0, in: 1...) }

    public static let maxConnectionsPerWorkspace = Setting<Int?>(
        "max-connections-per-workspace",
        doc: "Sessions one workspace may have open on this node at once; one more is refused LIMIT_EXCEEDED and "
            + "closed 4429. Default: no limit.",
        valueName: "n", expected: "an integer of 1 or more") { SettingValue.integer($0, in: 1...) }

    public static let maxHandshakesPerSecondPerIP = Setting<Double?>(
        "max-handshakes-per-second-per-ip",
        doc: "New connections per second from one address (bursts of twice as many); 0: no limit. Default: none "
            + "on a loopback bind, \(shortNumber(Server.Configuration.PerIPLimits.exposed.handshakesPerSecond)) on any other.",
        valueName: "rate", expected: "a number of 0 or more (0: no limit)"
    ) { Double($0).flatMap { $0 >= 0 && $0.isFinite ? $0 : nil } }

    // MARK: access control (tokens)

    public static let authKeyFile = Setting<[String]>(
        list: "auth-key-file",
        doc: "Turns access control on: tokens (JWT) are checked with the key in this file, an HS256 secret "
            + "(its bytes, a trailing newline stripped; 32 bytes or more) or an Ed25519/P-256 public key "
            + "(PEM). Repeat it to hold several keys (rotation); a key's kid is its file name without "
            + "extension.",
        valueName: "file", expected: "a file path") { !$0.trimmingCharacters(in: .whitespaces).isEmpty }

    // MARK: the SQLite store's checkpoints

    public static let checkpoint = Setting<SQLiteStore.Options.Checkpoint>(
        "checkpoint", default: sqlite.checkpoint, show: \.rawValue,
        doc: "Where SQLite's WAL checkpoints run. background: on a thread of their own, never inside a "
            + "commit (commits pause only to restart a WAL past --wal-limit); inline: SQLite's default, inside "
            + "the commit that takes the WAL past 1000 pages.",
        valueName: "background|inline", expected: "background or inline"
    ) { SQLiteStore.Options.Checkpoint(rawValue: $0.lowercased()) }

    public static let walLimit = Setting<Int64>(
        "wal-limit", default: sqlite.walLimitBytes, show: SettingValue.sizeText,
        doc: "With background checkpoints, the WAL file size past which commits pause for a RESTART "
            + "checkpoint: bytes, or with K, M, G (KiB, MiB, GiB); 1M or more.",
        valueName: "size", expected: "bytes, or a size such as 64M, 512K, 1G; at least 1M"
    ) { SettingValue.size($0).flatMap { $0 >= 1 << 20 ? $0 : nil } }

    public static let historyRetention = Setting<HistoryRetention>(
        "history-retention", default: .standard, show: { $0.description },
        doc: "How long history is kept: every op for the first duration, then one state per day with activity "
            + "for the second (30d,365d); units s, m, h, d. 0 turns history off (only the resume window is kept).",
        valueName: "ops[,days]", expected: "0, or durations such as 30d or 30d,365d (the second not shorter)"
    ) { HistoryRetention(parsing: $0) }

    public static let storeTrace = Setting<String?>(
        "store-trace", shownDefault: "none",
        doc: "Append one line per SQLite commit and per checkpoint to this file (durations, batch sizes, WAL "
            + "frames), for measurements.",
        valueName: "file", expected: "a file path", parse: SettingValue.nonEmpty)

    // MARK: several nodes on one PostgreSQL

    /// A refused value is shown without what could be a password (``SettingValue/redacted(_:)``).
    public static let store = Setting<String?>(
        "store",
        doc: "A PostgreSQL store shared with other nodes instead of the embedded one: "
            + "postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?PARAMETERS] (libpq's URL). Wins over "
            + "--data-dir; refused with --memory. The schema is created or migrated at start. The URL is never "
            + "printed whole.",
        valueName: "url", expected: "a PostgreSQL URL, postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?PARAMETERS]",
        shown: SettingValue.redacted, parse: SettingValue.postgresURL)

    public static let storePollInterval = Setting<Duration>(
        duration: "store-poll-interval", default: Server.Configuration.SharedStore(feed: nil).pollInterval,
        doc: "With --store: how often the stored version of every loaded workspace is checked, in case a commit "
            + "notification was lost: seconds or a duration such as 1.5s, 500ms; 0: never.",
        expected: "seconds or a duration such as 1.5s, 500ms; 0: no poll")

    public static let storeCommitLinger = Setting<Duration>(
        duration: "store-commit-linger", default: Server.Configuration.SharedStore(feed: nil).commitLinger,
        doc: "With --store: the longest a small commit waits for more ops when more are coming (a PostgreSQL "
            + "commit costs the same few round trips whatever its size): seconds or a duration such as 5ms; "
            + "0: never waits. A quiet node never waits, nor does a batch of 16 ops or more.",
        expected: "a duration from 0 to 1s such as 5ms, 0.005; 0: never waits"
    ) { $0 >= .zero && $0 <= .seconds(1) }

    // MARK: slow readers and diagnostics

    public static let slowCloseGrace = Setting<Duration>(
        duration: "slow-close-grace", default: server.slowCloseGrace,
        doc: "Time a connection closed 1013 for reading too slowly has for its close frame to leave before "
            + "it is dropped: seconds or 5s, 500ms.",
        expected: "a duration of more than 0 such as 5, 5s, 500ms"
    ) { $0 > .zero }

    /// The executable's deadline is longer than an in-process server's (``Server/Configuration``):
    /// a process has its store to close as well.
    public static let shutdownTimeout = Setting<Duration>(
        duration: "shutdown-timeout", default: .seconds(15),
        doc: "How long SIGTERM or SIGINT may take to stop the server in all (closing every client 1001, "
            + "closing the store) before the process exits anyway with status 1: at least 5s. A second "
            + "signal exits at once. Acknowledged ops are stored either way.",
        expected: "a duration of at least 5s such as 15, 15s, 1m"
    ) { $0 >= .seconds(5) }

    public static let diagnosticsEcho = Setting<Bool>(
        switch: "diagnostics-echo",
        doc: "Serve the diagnostics echo subprotocol tabsync.echo on /: every message is sent back whole "
            + "(for the Autobahn testsuite, scripts/autobahn); off by default.")

    // MARK: presence

    public static let maxPresencePeers = Setting<Int>(
        "max-presence-peers", default: server.maxPresencePeers,
        doc: "Peers a presence list names at most; the other sessions of the workspace are only counted "
            + "(Presence.othersCount).",
        valueName: "n", expected: positive, parse: count)

    // MARK: the change feed

    public static let feedKeepAlive = Setting<Duration>(
        duration: "feed-keepalive", default: server.feedKeepAlive,
        doc: "Time a change feed (GET /v1/workspaces/{id}/events) stays silent before a comment line keeps "
            + "proxies from closing it: seconds or 15s, 500ms.",
        expected: "a duration of more than 0 such as 15, 15s, 500ms"
    ) { $0 > .zero }

    // MARK: webhooks

    public static let webhookAllowPrivate = Setting<Bool>(
        switch: "webhook-allow-private",
        doc: "Let webhooks reach loopback, private and link-local addresses (refused by default, checked at connect time).")

    public static let webhookCAFile = Setting<String?>(
        "webhook-ca-file",
        doc: "PEM bundle of extra certificate authorities trusted for https webhook targets, beside the system's "
            + "(a receiver with a private CA); host names are still verified. Read at start.",
        valueName: "path", expected: "a file path", parse: SettingValue.nonEmpty)

    public static let webhookGiveUpAfter = Setting<Duration>(
        duration: "webhook-give-up-after", default: server.webhookGiveUpAfter,
        doc: "A webhook whose oldest pending delivery has failed for this long is disabled until an admin enables it: "
            + "seconds or a duration such as 24h, 90m, 30s.",
        expected: "a duration of more than 0 such as 24h, 90m, 30s"
    ) { $0 > .zero }

    /// Every setting, in `--help` order.
    public static let all: [SettingRow] = [
        host.row, port.row, dataDir.row, memory.row, sync.row, idleUnload.row, logLevel.row, maxTabs.row, maxGroups.row,
        maxFrameBytes.row, maxOpsPerSecond.row, maxResumeOps.row, logRetention.row, maxSendQueueBytes.row,
        maxConnections.row, helloTimeout.row, idleTimeout.row, eventLoop.row, noWeb.row, tlsCert.row, tlsKey.row,
        allowOrigin.row, insecureNoAuth.row, maxConnectionsPerIP.row, maxHandshakesPerSecondPerIP.row,
        maxConnectionsPerSub.row, maxOpsPerSecondPerSub.row, maxConnectionsPerWorkspace.row,
        authKeyFile.row, checkpoint.row, walLimit.row, historyRetention.row, storeTrace.row, store.row, storePollInterval.row, storeCommitLinger.row,
        slowCloseGrace.row, shutdownTimeout.row, diagnosticsEcho.row, maxPresencePeers.row, feedKeepAlive.row,
        webhookAllowPrivate.row, webhookCAFile.row, webhookGiveUpAfter.row,
    ]

    /// `10` for 10.0, `2.5` for 2.5.
    private static func shortNumber(_ value: Double) -> String {
        value == value.rounded() ? "\(Int(value))" : "\(value)"
    }
}
