import TabsyncProto

/// Everything one `tabsync bench` run does. From the command line it comes only through
/// ``BenchOptions`` (the `tabsync bench` flags, or ``parse(_:)``), which refuses out-of-range values.
public struct BenchConfiguration: Sendable, Equatable {
    /// What the connections speak.
    public enum Mode: String, Sendable, Equatable, Codable {
        /// tabsync's JSON subprotocol (`tabsync.v1.json`).
        case json
        /// tabsync's protobuf subprotocol (`tabsync.v1.proto`).
        case proto
        /// libwebsockets' `lws-mirror-protocol` (its test server): every message is relayed to every
        /// connection of the room (`?mirror=NAME`, one room per workspace). The baseline.
        case mirror

        public var subprotocol: String {
            switch self {
            case .json: WireFormat.json.subprotocol
            case .proto: WireFormat.proto.subprotocol
            case .mirror: "lws-mirror-protocol"
            }
        }
    }

    /// Which event loop libwebsockets runs on.
    public enum LoopBackend: String, Sendable, Equatable, Codable {
        /// libev (epoll): a wakeup costs the ready connections, not all of them.
        case epoll
        /// lws' default poll() loop: every wakeup scans every connection (for comparison).
        case poll
    }

    /// A server (node) to connect to.
    public struct Endpoint: Sendable, Equatable, Codable {
        public var host: String
        public var port: Int

        public init(host: String, port: Int) {
            self.host = host
            self.port = port
        }

        /// `ws://host:port` (an IPv6 host in brackets).
        public var url: String { "ws://\(host.contains(":") ? "[\(host)]" : host):\(port)" }
    }

    /// The servers the connections are spread over, round-robin by connection (connection i goes to
    /// `servers[i % servers.count]`); never empty. Several are several nodes of one cluster, and the
    /// report then splits delivery latency into same-node and cross-node.
    public var servers: [Endpoint] = [Endpoint(host: "127.0.0.1", port: 7070)] {
        didSet { if servers.isEmpty { servers = oldValue } }
    }
    /// The first server's host.
    public var host: String {
        get { servers[0].host }
        set { servers[0].host = newValue }
    }
    /// The first server's port.
    public var port: Int {
        get { servers[0].port }
        set { servers[0].port = newValue }
    }
    public var mode: Mode = .proto
    public var eventLoop: LoopBackend = .epoll
    public var workspaces: Int = 1
    public var clientsPerWorkspace: Int = 10
    /// Total ops per second over every connection (open loop); 0 = connect and stay idle.
    public var rate: Double = 100
    public var duration: Double = 10
    public var warmup: Double = 2
    public var mix: Mix = .default
    /// Connections opened per second while connecting.
    public var ramp: Double = 1000
    /// Search for the highest rate whose delivery p99 stays under `p99Bound` instead of one run.
    public var searchMax = false
    /// Milliseconds.
    public var p99Bound: Double = 50
    /// The server processes whose CPU and RSS are read from /proc (summed: the nodes of a cluster).
    public var serverPids: [Int32] = []
    /// The store's processes (a database's server processes), whose CPU is read beside the server's.
    public var storePids: [Int32] = []
    public var jsonPath: String?
    public var hgrmPath: String?
    public var plotPath: String?
    /// Size of one mirror message (the baseline relays messages as big as tabsync's `Applied`).
    public var messageBytes: Int = 160
    /// Workspace (and room) names start with this; by default unique per run, so runs against one
    /// server never share workspaces.
    public var workspacePrefix: String
    /// Seconds the whole run may take before it stops itself (connect + every phase + drain).
    public var timeLimit: Double?
    /// Seconds the bench waits after the load for the measured ops' answers (`--drain-timeout`);
    /// ops still unanswered then count as unanswered.
    public var drainTimeout: Double = Schedule.defaultDrainSeconds
    public var seed: UInt64
    /// Keep each connection's peer view and check it after connecting (``LoadGenerator/checkPresence(timeout:)``).
    public var checkPresence = false
    /// Ask for presence deltas (`Hello.presenceDeltas`); false: whole lists at every change.
    public var presenceDeltas = true

    public init(workspacePrefix: String? = nil, seed: UInt64? = nil) {
        let seed = seed ?? UInt64.random(in: 1...UInt64.max)
        self.seed = seed
        self.workspacePrefix = workspacePrefix ?? "bench-\(String(seed % 1_000_000_007, radix: 36))"
    }

    public var connections: Int { workspaces * clientsPerWorkspace }

    /// Parses `tabsync bench` arguments (`--flag value` or `--flag=value`) through ``BenchOptions``.
    /// - Throws: ``BenchError/invalidArgument(_:)`` with the parser's message, which names the flag.
    public static func parse(_ arguments: [String]) throws(BenchError) -> BenchConfiguration {
        let options: BenchOptions
        do {
            options = try BenchOptions.parse(arguments)
        } catch {
            throw .invalidArgument(BenchOptions.message(for: error))
        }
        return try options.configuration()
    }

    /// `ws://host:port[/]`, `host:port` or `[v6]:port`.
    static func parseServer(_ text: String) -> (String, Int)? {
        var rest = Substring(text)
        if rest.hasPrefix("ws://") { rest = rest.dropFirst(5) } else if rest.contains("://") { return nil }
        if rest.hasSuffix("/") { rest = rest.dropLast() }
        guard let colon = rest.lastIndex(of: ":"), let port = Int(rest[rest.index(after: colon)...]),
              (1...65_535).contains(port) else { return nil }
        var host = rest[..<colon]
        if host.hasPrefix("[") && host.hasSuffix("]") { host = host.dropFirst().dropLast() }
        guard !host.isEmpty else { return nil }
        return (String(host), port)
    }
}
