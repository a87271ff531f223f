import TabsyncCore

/// The core's counters and histograms (``ServerCore/metrics``), owned by the event loop thread (no
/// locks), rendered with the driver's (``DriverMetrics``) as Prometheus text (exposition format
/// 0.0.4) for `GET /metrics`.
///
/// Counters only grow; gauges are read at render time from the loop's state. Every count here is
/// decided by the core, so the simulation sees the same counts as a server (docs/architecture.md).
package struct Metrics {
    package init() {}

    package var opsApplied: UInt64 = 0
    package var opsRejected: [ErrorCode: UInt64] = [:]
    package var slowConsumerCloses: UInt64 = 0
    /// Keepalive (ServerCore+Keepalive.swift): pings asked for, and sessions dropped for silence.
    package var pingsSent: UInt64 = 0
    package var idleTimeouts: UInt64 = 0
    /// Sessions refused by an operator's quota (4429).
    package var quotaRefusals: UInt64 = 0
    /// Heartbeats in the holder registry that were stored, and those that failed.
    package var heartbeatsStored: UInt64 = 0
    package var heartbeatsFailed: UInt64 = 0
    package var commitBatchOps = Histogram(bounds: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 5000])
    /// Time the store took for one group commit (on the store thread, from call to return).
    package var commitSeconds = Histogram(bounds: [
        0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5,
    ])
    /// Every store round trip on the store thread, from call to return: commits, catch-up reads,
    /// polls of stored versions.
    package var storeSeconds = Histogram(bounds: [
        0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5,
    ])
    // A shared store (several nodes): see ServerCore+CatchUp.swift and ServerCore+Commit.swift ("behind").
    /// Batches the store refused because another node committed to one of their workspaces first.
    package var commitsRetried: UInt64 = 0
    /// Submits run through the sequencer again after their batch came back `behind`.
    package var opsResequenced: UInt64 = 0
    /// Batches whose `COMMIT` lost its answer and whose outcome the store could not learn (their
    /// submitters were closed 1013 to resume).
    package var commitsOutcomeUnknown: UInt64 = 0
    /// Ops another node stored while this one read a workspace back, broadcast when the read came in.
    package var opsReadBack: UInt64 = 0
    /// Commit notifications the store's listener delivered (this node's own included).
    package var storeNotifications: UInt64 = 0
    /// Workspaces this node loaded while another live node held them too.
    package var workspaceSplits: UInt64 = 0
    /// Split workspaces this node handed to their newer holder (its sessions closed "moved").
    package var moves: UInt64 = 0
    /// Catch-up reads of other nodes' ops started on a notification or a poll.
    package var catchUpReads: UInt64 = 0
    /// Notifications whose batch was taken from their payload, with no read.
    package var notificationsTaken: UInt64 = 0
    /// Other nodes' ops applied and broadcast here.
    package var opsCaughtUp: UInt64 = 0
    /// Change feeds opened, and those ended because their reader did not keep up.
    package var feedsOpened: UInt64 = 0
    package var feedsCut: UInt64 = 0
    /// Times the listener connected again after losing its connection.
    package var listenerReconnects: UInt64 = 0
    /// The listener is connected and listening (a gauge: 0 without a shared store).
    package var storeListening = false
    package var opLatencySeconds = Histogram(bounds: [
        0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
    ])

    /// The gauges, read from the loop's state at render time.
    package struct Gauges {
        package var connections: Int
        /// Every socket lws holds for a peer: sessions, HTTP requests, handshakes, closing ones.
        package var socketsOpen: Int
        package var workspacesLoaded: Int
        package var sendQueueBytes: Int
        /// `--max-connections`: sockets past it are refused at accept (0: none given).
        package var maxConnections: Int

        package init(connections: Int, socketsOpen: Int, workspacesLoaded: Int, sendQueueBytes: Int, maxConnections: Int = 0) {
            self.connections = connections
            self.socketsOpen = socketsOpen
            self.workspacesLoaded = workspacesLoaded
            self.sendQueueBytes = sendQueueBytes
            self.maxConnections = maxConnections
        }
    }

    /// A cumulative histogram with fixed upper bounds (`le`), plus sum and count.
    package struct Histogram {
        package let bounds: [Double]
        package private(set) var counts: [UInt64]
        package private(set) var sum: Double = 0
        package private(set) var count: UInt64 = 0

        package init(bounds: [Double]) {
            self.bounds = bounds
            counts = Array(repeating: 0, count: bounds.count)
        }

        package mutating func observe(_ value: Double) {
            if let i = bounds.firstIndex(where: { value <= $0 }) { counts[i] += 1 }
            sum += value
            count += 1
        }
    }

    /// The whole exposition text: the core's counts, the driver's (`driver`) and the gauges.
    package func render(_ gauges: Gauges, driver: DriverMetrics = DriverMetrics()) -> String {
        var out = ""
        func header(_ name: String, _ type: String, _ help: String) {
            out += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n"
        }
        /// A metric with one unlabelled sample.
        func sample(_ name: String, _ type: String, _ help: String, _ value: some CustomStringConvertible) {
            header(name, type, help)
            out += "\(name) \(value)\n"
        }
        sample("tabsync_connections", "gauge", "Open WebSocket sessions.", gauges.connections)
        sample("tabsync_sockets_open", "gauge",
               "Sockets held open: WebSocket sessions, HTTP requests, handshakes in progress and connections closing.", gauges.socketsOpen)
        sample("tabsync_connections_max", "gauge",
               "--max-connections: the open sockets past which connections are refused (compare tabsync_sockets_open).",
               gauges.maxConnections)
        sample("tabsync_workspaces_loaded", "gauge", "Workspaces held in memory.", gauges.workspacesLoaded)
        sample("tabsync_ops_applied_total", "counter", "Ops applied and acknowledged.", opsApplied)
        header("tabsync_ops_rejected_total", "counter", "Ops refused, by error code.")
        for code in ErrorCode.allCases {
            out += "tabsync_ops_rejected_total{code=\"\(code.wireName)\"} \(opsRejected[code, default: 0])\n"
        }
        sample("tabsync_messages_out_total", "counter", "WebSocket messages written.", driver.messagesOut)
        sample("tabsync_bytes_out_total", "counter", "WebSocket payload bytes written.", driver.bytesOut)
        sample("tabsync_writes_out_total", "counter",
               "Socket writes of WebSocket messages (messages queued to one connection in one loop iteration share one).", driver.writesOut)
        sample("tabsync_slow_consumer_closes_total", "counter", "Connections closed 1013 for reading too slowly.", slowConsumerCloses)
        sample("tabsync_keepalive_pings_total", "counter", "WebSocket pings sent to sessions silent for about half the idle timeout.", pingsSent)
        sample("tabsync_idle_timeouts_total", "counter", "Connections dropped after the idle timeout without a frame or a pong.", idleTimeouts)
        sample("tabsync_quota_refusals_total", "counter", "Sessions refused 4429 by a quota per sub or per workspace.", quotaRefusals)
        header("tabsync_holder_heartbeats_total", "counter",
               "Heartbeats of this node in the holder registry (several nodes), by result; none without a registry.")
        out += "tabsync_holder_heartbeats_total{result=\"ok\"} \(heartbeatsStored)\n"
        out += "tabsync_holder_heartbeats_total{result=\"failed\"} \(heartbeatsFailed)\n"
        header("tabsync_connections_refused_total", "counter",
               "Connections refused at accept (per-address and server-wide limits) or at the upgrade (origin).")
        for reason in ConnectionRefusal.allCases {
            out += "tabsync_connections_refused_total{reason=\"\(reason.rawValue)\"} \(driver.connectionsRefused[reason, default: 0])\n"
        }
        header("tabsync_tls_certificate_reloads_total", "counter", "Certificate reloads (SIGHUP), by result.")
        out += "tabsync_tls_certificate_reloads_total{result=\"ok\"} \(driver.certificateReloads[true, default: 0])\n"
        out += "tabsync_tls_certificate_reloads_total{result=\"failed\"} \(driver.certificateReloads[false, default: 0])\n"
        sample("tabsync_send_queue_bytes", "gauge", "Bytes queued to all connections.", gauges.sendQueueBytes)
        render(commitBatchOps, "tabsync_commit_batch_ops", "Ops and seq records per store commit.", into: &out)
        render(commitSeconds, "tabsync_commit_seconds", "Store time of one group commit (successful or not).", into: &out)
        render(opLatencySeconds, "tabsync_op_latency_seconds",
               "From submit received to broadcast queued.", into: &out)
        render(storeSeconds, "tabsync_store_round_trip_seconds",
               "Store time of one call on the store thread: commits, catch-up reads, polls.", into: &out)
        sample("tabsync_commits_retried_total", "counter",
               "Batches refused whole because another node committed first (caught up, re-sequenced, sent again).", commitsRetried)
        sample("tabsync_ops_resequenced_total", "counter",
               "Submits run through the sequencer again after another node committed first.", opsResequenced)
        sample("tabsync_commits_outcome_unknown_total", "counter",
               "Batches whose COMMIT lost its answer and whose outcome could not be learned (submitters closed 1013 to resume).", commitsOutcomeUnknown)
        sample("tabsync_ops_read_back_total", "counter",
               "Ops found stored when a workspace was read back after a failed commit, broadcast to its sessions.", opsReadBack)
        sample("tabsync_store_notifications_total", "counter", "Commit notifications received from the store (own included).", storeNotifications)
        sample("tabsync_store_notifications_sent_total", "counter",
               "Notifications this node's commits sent: one per workspace per commit that another live node holds.", driver.notificationsSent)
        sample("tabsync_workspace_splits_total", "counter",
               "Workspaces loaded here while another live node held them too (split across nodes).", workspaceSplits)
        sample("tabsync_workspace_moves_total", "counter",
               "Split workspaces this node handed to their newer holder, its sessions closed 4307 moved.", moves)
        sample("tabsync_catchup_reads_total", "counter", "Reads of other nodes' ops on a notification or a poll.", catchUpReads)
        sample("tabsync_store_notifications_taken_total", "counter",
               "Other nodes' commits taken from their notification's payload, with no catch-up read.", notificationsTaken)
        sample("tabsync_ops_caught_up_total", "counter", "Other nodes' ops applied and broadcast by this node.", opsCaughtUp)
        sample("tabsync_feeds_opened_total", "counter", "Change feeds (GET /v1/workspaces/{id}/events) opened.", feedsOpened)
        sample("tabsync_feeds_cut_total", "counter", "Change feeds ended because their reader did not keep up.", feedsCut)
        sample("tabsync_store_listener_reconnects_total", "counter", "Reconnections of the store's notification listener.", listenerReconnects)
        sample("tabsync_store_listening", "gauge", "1 while the listener for other nodes' commits is connected.", storeListening ? 1 : 0)
        return out
    }

    private func render(_ h: Histogram, _ name: String, _ help: String, into out: inout String) {
        out += "# HELP \(name) \(help)\n# TYPE \(name) histogram\n"
        var cumulative: UInt64 = 0
        for (bound, n) in zip(h.bounds, h.counts) {
            cumulative += n
            out += "\(name)_bucket{le=\"\(Self.format(bound))\"} \(cumulative)\n"
        }
        out += "\(name)_bucket{le=\"+Inf\"} \(h.count)\n"
        out += "\(name)_sum \(Self.format(h.sum))\n"
        out += "\(name)_count \(h.count)\n"
    }

    /// A float as Prometheus reads it: integers without a fraction, others in Swift's shortest form.
    package static func format(_ value: Double) -> String {
        if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
        return "\(value)"
    }
}

extension Duration {
    /// The duration in seconds, for histograms.
    package var seconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}

/// The driver's counters: what only sockets, TLS and the holder registry's store show (writes, refused
/// connections, certificate reloads, notifications sent). Kept by `TabsyncServer`'s `LoopDriver`,
/// apart from the core's ``Metrics``: no core rule reads or writes them. Event loop thread only.
package struct DriverMetrics {
    package init() {}

    package var messagesOut: UInt64 = 0
    package var bytesOut: UInt64 = 0
    /// Writes (`lws_write` calls) that carried those messages: fewer when several share one send.
    package var writesOut: UInt64 = 0
    /// Connections turned away at accept or at the upgrade, by reason.
    package var connectionsRefused: [ConnectionRefusal: UInt64] = [:]
    /// Certificate reloads, by outcome (true: the new pair is served).
    package var certificateReloads: [Bool: UInt64] = [:]
    /// Notifications this node's commits sent: one per workspace per commit that another live node
    /// holds (read from the holder registry).
    package var notificationsSent: UInt64 = 0
}

/// Why the server turned a connection away, as `/metrics` labels it
/// (`tabsync_connections_refused_total{reason}`).
package enum ConnectionRefusal: String, CaseIterable, Sendable {
    /// The server already holds `--max-connections`.
    case maxConnections = "max_connections"
    /// The peer address already holds its share of open connections.
    case ipConnections = "ip_connections"
    /// The peer address opens connections faster than its handshake rate.
    case ipHandshakeRate = "ip_handshake_rate"
    /// A browser page from an origin not allowed to open a WebSocket (HTTP 403).
    case origin
}

