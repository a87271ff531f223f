import TabsyncProto

/// Everything one `tabsync bench` run does, parsed and checked. A value of this type is always
/// valid: ``parse(_:)`` is the only way in from the command line, and it refuses out-of-range values.
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
    public enum EventLoop: String, Sendable, Equatable, Codable {
        /// libev (epoll): a wakeup costs the ready connections, not all of them.
        case epoll
        /// lws' default poll() loop: every wakeup scans every connection (for comparison).
        case poll
    }

    public var host: String = "127.0.0.1"
    public var port: Int = 7070
    public var mode: Mode = .proto
    public var eventLoop: EventLoop = .epoll
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
    public var serverPid: Int32?
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
    public var seed: UInt64

    public init(workspacePrefix: String? = nil, seed: UInt64? = nil) {
        let seed = seed ?? UInt64.random(in: 1...UInt64.max)
        self.seed = seed
        self.workspacePrefix = workspacePrefix ?? "bench-\(String(seed % 1_000_000_007, radix: 36))"
    }

    public var connections: Int { workspaces * clientsPerWorkspace }

    /// The usage text listing every flag (shown by `tabsync bench --help` and after a bad flag).
    public static let usage = """
        Flags:
          --server URL|HOST:PORT  server to load (ws://127.0.0.1:7070)
          --workspaces N          workspaces (rooms in mirror mode) (1)
          --clients N             connections per workspace (10)
          --rate OPS              total ops/s, open loop; 0 = idle connections (100)
          --duration S            measured seconds (10)
          --warmup S              seconds of load before measuring (2)
          --mix K=W,...           weights of add, move, activate, update, remove (20 each; each
                                  workspace is kept between 20 and 200 tabs)
          --ramp N                connections opened per second (1000)
          --subprotocol P         json, proto or mirror (lws-mirror-protocol baseline) (proto)
          --message-bytes N       mirror message size (160)
          --event-loop L          epoll (libev) or poll (lws' default) for the generator (epoll)
          --max                   search for the highest rate with delivery p99 under --p99-bound
          --p99-bound MS          bound for --max (50)
          --server-pid PID        read the server's CPU and RSS from /proc/PID
          --json FILE             write every figure as JSON
          --hgrm FILE             write the latency percentile distributions
          --plot FILE.svg         draw the latency percentile curves
          --time-limit S          stop the whole run after S seconds
          --seed N                workload seed
          --workspace-prefix P    workspace names start with P (unique per run by default)
        """

    /// Parses `tabsync bench` arguments (`--flag value` or `--flag=value`).
    /// - Throws: ``BenchError/invalidArgument(_:)`` naming the flag and what it accepts.
    public static func parse(_ arguments: [String]) throws(BenchError) -> BenchConfiguration {
        var configuration = BenchConfiguration()
        var prefix: String?
        var seed: UInt64?
        var index = 0
        func fail(_ message: String) -> BenchError { .invalidArgument(message) }
        while index < arguments.count {
            var flag = arguments[index]
            var value: String?
            if let equals = flag.firstIndex(of: "="), flag.hasPrefix("--") {
                value = String(flag[flag.index(after: equals)...])
                flag = String(flag[..<equals])
            }
            index += 1
            func next() throws(BenchError) -> String {
                if let value { return value }
                guard index < arguments.count else { throw fail("\(flag) needs a value") }
                index += 1
                return arguments[index - 1]
            }
            func int(_ range: ClosedRange<Int>) throws(BenchError) -> Int {
                let text = try next()
                guard let number = Int(text), range.contains(number) else {
                    throw fail("\(flag) must be a whole number in \(range.lowerBound)...\(range.upperBound), not '\(text)'")
                }
                return number
            }
            func seconds(_ range: ClosedRange<Double>) throws(BenchError) -> Double {
                let text = try next()
                guard let number = Double(text), number.isFinite, range.contains(number) else {
                    throw fail("\(flag) must be a number in \(range.lowerBound)...\(range.upperBound), not '\(text)'")
                }
                return number
            }
            switch flag {
            case "--server":
                let text = try next()
                guard let (host, port) = parseServer(text) else {
                    throw fail("--server must be ws://HOST:PORT or HOST:PORT, not '\(text)'")
                }
                configuration.host = host
                configuration.port = port
            case "--workspaces": configuration.workspaces = try int(1...100_000)
            case "--clients": configuration.clientsPerWorkspace = try int(1...100_000)
            case "--rate": configuration.rate = try seconds(0...10_000_000)
            case "--duration": configuration.duration = try seconds(0.1...86_400)
            case "--warmup": configuration.warmup = try seconds(0...86_400)
            case "--mix":
                let text = try next()
                do throws(Mix.ParseError) { configuration.mix = try Mix.parse(text) } catch {
                    throw fail("--mix: \(error.message)")
                }
            case "--ramp": configuration.ramp = try seconds(1...1_000_000)
            case "--subprotocol":
                let text = try next()
                let names = ["json": Mode.json, "proto": .proto, "mirror": .mirror,
                             "tabsync.v1.json": .json, "tabsync.v1.proto": .proto, "lws-mirror-protocol": .mirror]
                guard let mode = names[text] else { throw fail("--subprotocol must be json, proto or mirror, not '\(text)'") }
                configuration.mode = mode
            case "--message-bytes": configuration.messageBytes = try int(32...65_536)
            case "--event-loop":
                let text = try next()
                guard let loop = EventLoop(rawValue: text) else { throw fail("--event-loop must be epoll or poll, not '\(text)'") }
                configuration.eventLoop = loop
            case "--max":
                guard value == nil else { throw fail("--max takes no value") }
                configuration.searchMax = true
            case "--p99-bound": configuration.p99Bound = try seconds(0.01...600_000)
            case "--server-pid": configuration.serverPid = Int32(try int(1...Int(Int32.max)))
            case "--json": configuration.jsonPath = try next()
            case "--hgrm": configuration.hgrmPath = try next()
            case "--plot": configuration.plotPath = try next()
            case "--time-limit": configuration.timeLimit = try seconds(1...86_400 * 7)
            case "--seed":
                let text = try next()
                guard let number = UInt64(text), number > 0 else { throw fail("--seed must be a positive whole number") }
                seed = number
            case "--workspace-prefix":
                let text = try next()
                guard !text.isEmpty, text.count <= 40, text.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "._-".contains($0)) })
                else { throw fail("--workspace-prefix must be 1-40 chars of [A-Za-z0-9._-]") }
                prefix = text
            default:
                throw fail("unknown flag '\(flag)'\n\n\(usage)")
            }
        }
        if seed != nil || prefix != nil {
            let parsed = configuration
            configuration = BenchConfiguration(workspacePrefix: prefix, seed: seed)
            configuration.copySettings(from: parsed)
        }
        if configuration.mode == .mirror && configuration.workspaces > 3 {
            // lws' test server serves at most 3 mirror rooms.
            throw fail("--subprotocol mirror allows at most 3 --workspaces (libwebsockets' test server has 3 rooms)")
        }
        if configuration.connections > 60_000 { throw fail("--workspaces × --clients must be at most 60000") }
        if configuration.searchMax && configuration.rate == 0 { throw fail("--max needs a starting --rate above 0") }
        return configuration
    }

    private mutating func copySettings(from other: BenchConfiguration) {
        let (prefix, seed) = (workspacePrefix, self.seed)
        self = other
        workspacePrefix = prefix
        self.seed = seed
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

/// Relative weights of the op kinds the workload submits.
public struct Mix: Sendable, Equatable, Codable {
    public var add: Int
    public var move: Int
    public var activate: Int
    public var update: Int
    public var remove: Int

    /// Even weights: a workspace does a random walk between the bounds (20 and 200 tabs).
    public static let `default` = Mix(add: 20, move: 20, activate: 20, update: 20, remove: 20)

    public init(add: Int, move: Int, activate: Int, update: Int, remove: Int) {
        (self.add, self.move, self.activate, self.update, self.remove) = (add, move, activate, update, remove)
    }

    public var total: Int { add + move + activate + update + remove }

    public struct ParseError: Error, Sendable, Equatable {
        public var message: String
    }

    /// `add=20,move=30,...`: kinds not named keep their default weight; at least one weight must be above 0.
    public static func parse(_ text: String) throws(ParseError) -> Mix {
        var mix = Mix.default
        for part in text.split(separator: ",", omittingEmptySubsequences: true) {
            let pieces = part.split(separator: "=", maxSplits: 1)
            guard pieces.count == 2, let weight = Int(pieces[1]), (0...1_000_000).contains(weight) else {
                throw ParseError(message: "'\(part)' is not KIND=WEIGHT (a whole number 0...1000000)")
            }
            switch pieces[0] {
            case "add": mix.add = weight
            case "move": mix.move = weight
            case "activate": mix.activate = weight
            case "update": mix.update = weight
            case "remove": mix.remove = weight
            default: throw ParseError(message: "unknown op kind '\(pieces[0])' (add, move, activate, update, remove)")
            }
        }
        guard mix.total > 0 else { throw ParseError(message: "every weight is 0") }
        guard mix.add > 0 else { throw ParseError(message: "add must be above 0 (workspaces start empty)") }
        return mix
    }
}
