import Histogram

/// Latency percentiles in milliseconds.
public struct LatencySummary: Codable, Sendable, Equatable {
    public var count: UInt64
    public var mean: Double
    public var p50: Double
    public var p90: Double
    public var p99: Double
    public var p999: Double
    public var max: Double

    /// From a histogram of microseconds.
    init(_ histogram: Histogram<UInt64>) {
        count = histogram.totalCount
        func ms(_ value: UInt64) -> Double { Double(value) / 1000 }
        if count == 0 {
            (mean, p50, p90, p99, p999, max) = (0, 0, 0, 0, 0, 0)
        } else {
            mean = histogram.mean / 1000
            p50 = ms(histogram.valueAtPercentile(50))
            p90 = ms(histogram.valueAtPercentile(90))
            p99 = ms(histogram.valueAtPercentile(99))
            p999 = ms(histogram.valueAtPercentile(99.9))
            max = ms(histogram.max)
        }
    }
}

/// Every figure of one bench run (or of the best passing trial of a `--max` search), as written by `--json`.
public struct BenchReport: Codable, Sendable {
    public struct Connect: Codable, Sendable {
        public var attempted = 0
        public var connected = 0
        public var failed = 0
        /// Failure reasons (lws' messages, or the server's `Error` code) with their counts.
        public var failures: [String: Int] = [:]
        public var seconds = 0.0
        public var perSecond = 0.0
        public var time = LatencySummary(Histogram<UInt64>(highestTrackableValue: 2, numberOfSignificantValueDigits: .two))
    }

    public struct Ops: Codable, Sendable {
        /// Ops submitted during the measured window.
        public var sent = 0
        public var applied = 0
        public var rejected = 0
        public var rejectedByCode: [String: Int] = [:]
        /// Sent and never answered (by the end of the drain).
        public var unanswered = 0
        /// Ops the schedule wanted but no connection of the workspace was open to send.
        public var notSent = 0
        public var appliedPerSecond = 0.0
        public var deliveries = 0
        /// applied × (clients − 1), counting only the clients still connected.
        public var expectedDeliveries = 0
        public var deliveriesPerSecond = 0.0
        /// Mean size of the messages received for one op (Applied or mirror message).
        public var bytesPerDelivery = 0.0
    }

    public struct Server: Codable, Sendable {
        /// The first of ``pids``.
        public var pid: Int32
        /// Every server process measured (several nodes: their CPU and RSS are summed).
        public var pids: [Int32]
        public var readable = true
        public var rssBeforeBytes = 0
        public var rssConnectedBytes = 0
        public var rssEndBytes = 0
        public var rssPerConnectionBytes = 0.0
        /// Server CPU seconds during the measured window, and that as % of one core.
        public var cpuSeconds = 0.0
        public var cpuPercent = 0.0
        public var cpuMicrosPerDelivery: Double?
        public var cpuMicrosPerOp: Double?
    }

    public struct Generator: Codable, Sendable {
        /// This process's CPU during the measured window, % of one core (its load runs on one thread).
        public var cpuPercent = 0.0
        /// How late ops left against their schedule.
        public var sendLagP99Ms = 0.0
        /// True when the load generator, not the server, limited the run.
        public var bottleneck = false
    }

    public struct Trial: Codable, Sendable {
        public var rate: Double
        public var appliedPerSecond: Double
        public var deliveriesPerSecond: Double
        public var ackP99: Double
        public var deliveryP99: Double
        public var passed: Bool
        public var reason: String
    }

    public var mode: String
    public var server: String
    public var workspaces: Int
    public var clientsPerWorkspace: Int
    public var connections: Int
    public var rate: Double
    public var duration: Double
    public var warmup: Double
    public var mix: Mix
    public var ramp: Double
    public var seed: UInt64
    public var loadAverageStart: [Double] = []
    public var loadAverageEnd: [Double] = []
    public var connect = Connect()
    /// Seconds of the measured window.
    public var window = 0.0
    public var ops = Ops()
    public var ack: LatencySummary
    public var delivery: LatencySummary
    /// With several `--server`s: `delivery` split into receivers on the submitter's server and
    /// receivers on another one (nil, and absent from the JSON, with one server).
    public var deliverySameNode: LatencySummary?
    public var deliveryCrossNode: LatencySummary?
    /// Every server the connections were spread over (round-robin); `server` is the first.
    public var servers: [String]?
    /// Connections that ended before the bench closed them, by close code (1006 = dropped without a close).
    public var disconnects: [String: Int] = [:]
    /// `Error` messages from the server by code.
    public var serverErrors: [String: Int] = [:]
    public var serverProcess: Server?
    /// The store's processes (`--store-pid`), during the measured window.
    public var storeProcesses: Store?

    public struct Store: Codable, Sendable {
        public var pids: [Int32]
        /// CPU seconds of the processes readable at both ends of the window, and that as % of one core.
        public var cpuSeconds = 0.0
        public var cpuPercent = 0.0
        public var cpuMicrosPerOp: Double?
    }
    public var generator = Generator()
    /// `--max`: every trial, and the highest rate that passed.
    public var trials: [Trial]?
    public var maxRate: Double?
    public var p99Bound: Double?
    /// `--check-presence`: how the connections' peer views compared with the connected sessions.
    public var presenceCheck: PresenceCheck?
    /// Plain sentences about the run (what limited it, what was not measured).
    public var notes: [String] = []
}

extension BenchReport {
    /// Each connected client's peer view after connecting, against the sessions actually connected.
    public struct PresenceCheck: Codable, Sendable, Equatable {
        /// Connections whose view was checked (every connected one).
        public var checked = 0
        /// Views equal to their workspace's: named peers all connected, the same named set at every
        /// connection of the workspace, and named + othersCount = the workspace's connections.
        public var correct = 0
        /// Most peers one view named (the server's cap, when the workspace is larger).
        public var namedMax = 0
        /// Seconds from the last connection's Welcome until every view was correct (or the timeout).
        public var seconds = 0.0
        /// Presence messages received by all connections while connecting and checking.
        public var messages = 0
    }
}

/// A finished run: the report and its two latency histograms (microseconds).
public struct BenchResult: Sendable {
    public var report: BenchReport
    public var ack: Histogram<UInt64>
    public var delivery: Histogram<UInt64>
}
