import ArgumentParser

/// The `tabsync bench` flags, declared once: the `tabsync bench` command embeds them as an option
/// group, and ``BenchConfiguration/parse(_:)`` parses them alone (the tests do).
///
/// Guarantees: after parsing (which runs ``validate()``), ``configuration()`` does not throw. Every
/// refusal is a message naming the flag: the parser's for an unknown flag, a missing value or a
/// value of the wrong type, ours for a value out of range or flags that do not go together.
/// `tabsync` exits 2 on any of them. Numeric options take the next argument whatever it looks like,
/// so `--warmup -1` is refused as out of range rather than as a missing value.
public struct BenchOptions: ParsableArguments {
    @Option(help: ArgumentHelp(
        "Server to load: ws://HOST:PORT or HOST:PORT (default: ws://127.0.0.1:7070). Repeat it to spread "
            + "the connections over several nodes, round-robin; the report then splits delivery latency "
            + "into same-node and cross-node.", valueName: "url|host:port"))
    var server: [String] = []

    @Option(parsing: .unconditional, help: ArgumentHelp("Workspaces (rooms in mirror mode).", valueName: "n"))
    var workspaces = 1

    @Option(parsing: .unconditional, help: ArgumentHelp("Connections per workspace.", valueName: "n"))
    var clients = 10

    @Option(parsing: .unconditional, help: ArgumentHelp(
        "Total ops/s over every connection, open loop; 0 = idle connections.", valueName: "ops"))
    var rate: Double = 100

    @Option(parsing: .unconditional, help: ArgumentHelp("Measured seconds.", valueName: "s"))
    var duration: Double = 10

    @Option(parsing: .unconditional, help: ArgumentHelp("Seconds of load before measuring.", valueName: "s"))
    var warmup: Double = 2

    @Option(help: ArgumentHelp(
        "Weights of add, move, activate, update, remove as KIND=WEIGHT,... (20 each; kinds not named "
            + "keep theirs; each workspace is kept between 20 and 200 tabs).", valueName: "k=w,..."))
    var mix: String?

    @Option(parsing: .unconditional, help: ArgumentHelp("Connections opened per second.", valueName: "n"))
    var ramp: Double = 1000

    @Option(help: ArgumentHelp("json, proto or mirror (the lws-mirror-protocol baseline).", valueName: "p"))
    var subprotocol = "proto"

    @Option(parsing: .unconditional, help: ArgumentHelp("Mirror message size in bytes.", valueName: "n"))
    var messageBytes = 160

    @Option(help: ArgumentHelp("epoll (libev) or poll (lws' default) for the generator.", valueName: "l"))
    var eventLoop = "epoll"

    @Flag(name: .customLong("max"), help: "Search for the highest rate with delivery p99 under --p99-bound.")
    var searchMax = false

    @Option(name: .customLong("p99-bound"), parsing: .unconditional,
            help: ArgumentHelp("Bound for --max, in milliseconds.", valueName: "ms"))
    var p99Bound: Double = 50

    @Option(parsing: .unconditionalSingleValue, help: ArgumentHelp(
        "Read the server's CPU and RSS from /proc/PID (repeat it for several nodes: summed).", valueName: "pid"))
    var serverPid: [Int] = []

    @Option(parsing: .unconditionalSingleValue, help: ArgumentHelp(
        "Read a store process's CPU from /proc/PID (repeat it for each of a database's processes: summed).", valueName: "pid"))
    var storePid: [Int] = []

    @Option(help: ArgumentHelp("Write every figure as JSON.", valueName: "file"))
    var json: String?

    @Option(help: ArgumentHelp("Write the latency percentile distributions.", valueName: "file"))
    var hgrm: String?

    @Option(help: ArgumentHelp("Draw the latency percentile curves.", valueName: "file.svg"))
    var plot: String?

    @Option(parsing: .unconditional, help: ArgumentHelp("Stop the whole run after this many seconds.", valueName: "s"))
    var timeLimit: Double?

    @Option(parsing: .unconditional, help: ArgumentHelp(
        "Seconds to wait after the load for the answers to the measured ops; those still unanswered then "
            + "count as unanswered. (default: 5)", valueName: "s"))
    var drainTimeout: Double?

    @Option(parsing: .unconditional, help: ArgumentHelp("Workload seed (random by default).", valueName: "n"))
    var seed: UInt64?

    @Option(help: ArgumentHelp("Workspace names start with this (unique per run by default).", valueName: "p"))
    var workspacePrefix: String?

    @Flag(help: ArgumentHelp(
        "After connecting, keep every connection's peer view (full list + deltas) and check that each "
            + "one matches the connected sessions (tabsync subprotocols; reported under presenceCheck)."))
    var checkPresence = false

    @Flag(help: ArgumentHelp(
        "Do not ask for presence deltas: every presence change brings the whole list, as clients "
            + "written before Hello.presenceDeltas get it (for before/after measurements)."))
    var wholePresenceLists = false

    public init() {}

    /// Refuses values out of range and flags that do not go together, naming the flag.
    public mutating func validate() throws {
        do {
            _ = try configuration()
        } catch {
            throw ValidationError(error.description)
        }
    }

    /// The run these flags describe (a fresh random seed and prefix each call unless given).
    /// - Throws: ``BenchError/invalidArgument(_:)`` naming the flag; never after ``validate()`` passed.
    public func configuration() throws(BenchError) -> BenchConfiguration {
        func fail(_ message: String) -> BenchError { .invalidArgument(message) }
        func whole(_ flag: String, _ value: Int, _ range: ClosedRange<Int>) throws(BenchError) -> Int {
            guard range.contains(value) else {
                throw fail("\(flag) must be a whole number in \(range.lowerBound)...\(range.upperBound), not '\(value)'")
            }
            return value
        }
        func number(_ flag: String, _ value: Double, _ range: ClosedRange<Double>) throws(BenchError) -> Double {
            guard value.isFinite, range.contains(value) else {
                throw fail("\(flag) must be a number in \(range.lowerBound)...\(range.upperBound), not '\(value)'")
            }
            return value
        }
        if let seed, seed == 0 { throw fail("--seed must be a positive whole number") }
        if let workspacePrefix {
            guard !workspacePrefix.isEmpty, workspacePrefix.count <= 40,
                  workspacePrefix.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "._-".contains($0)) })
            else { throw fail("--workspace-prefix must be 1-40 chars of [A-Za-z0-9._-]") }
        }
        var configuration = BenchConfiguration(workspacePrefix: workspacePrefix, seed: seed)
        var servers: [BenchConfiguration.Endpoint] = []
        for text in server.isEmpty ? ["ws://127.0.0.1:7070"] : server {
            guard let (host, port) = BenchConfiguration.parseServer(text) else {
                throw fail("--server must be ws://HOST:PORT or HOST:PORT, not '\(text)'")
            }
            servers.append(.init(host: host, port: port))
        }
        guard servers.count <= 64 else { throw fail("--server may be given at most 64 times") }
        configuration.servers = servers
        configuration.workspaces = try whole("--workspaces", workspaces, 1...100_000)
        configuration.clientsPerWorkspace = try whole("--clients", clients, 1...100_000)
        configuration.rate = try number("--rate", rate, 0...10_000_000)
        configuration.duration = try number("--duration", duration, 0.1...86_400)
        configuration.warmup = try number("--warmup", warmup, 0...86_400)
        if let mix {
            do throws(Mix.ParseError) { configuration.mix = try Mix.parse(mix) } catch {
                throw fail("--mix: \(error.message)")
            }
        }
        configuration.ramp = try number("--ramp", ramp, 1...1_000_000)
        let modes: [String: BenchConfiguration.Mode] = [
            "json": .json, "proto": .proto, "mirror": .mirror,
            "tabsync.v1.json": .json, "tabsync.v1.proto": .proto, "lws-mirror-protocol": .mirror,
        ]
        guard let mode = modes[subprotocol] else {
            throw fail("--subprotocol must be json, proto or mirror, not '\(subprotocol)'")
        }
        configuration.mode = mode
        configuration.messageBytes = try whole("--message-bytes", messageBytes, 32...65_536)
        guard let loop = BenchConfiguration.LoopBackend(rawValue: eventLoop) else {
            throw fail("--event-loop must be epoll or poll, not '\(eventLoop)'")
        }
        configuration.eventLoop = loop
        configuration.searchMax = searchMax
        configuration.p99Bound = try number("--p99-bound", p99Bound, 0.01...600_000)
        configuration.serverPids = []
        for pid in serverPid { configuration.serverPids.append(Int32(try whole("--server-pid", pid, 1...Int(Int32.max)))) }
        configuration.storePids = []
        for pid in storePid { configuration.storePids.append(Int32(try whole("--store-pid", pid, 1...Int(Int32.max)))) }
        configuration.jsonPath = json
        configuration.hgrmPath = hgrm
        configuration.plotPath = plot
        if let timeLimit { configuration.timeLimit = try number("--time-limit", timeLimit, 1...86_400 * 7) }
        if let drainTimeout { configuration.drainTimeout = try number("--drain-timeout", drainTimeout, 0.1...3_600) }
        configuration.checkPresence = checkPresence
        configuration.presenceDeltas = !wholePresenceLists
        if checkPresence && configuration.mode == .mirror { throw fail("--check-presence needs a tabsync subprotocol") }

        if configuration.mode == .mirror && configuration.workspaces > 3 {
            // lws' test server serves at most 3 mirror rooms.
            throw fail("--subprotocol mirror allows at most 3 --workspaces (libwebsockets' test server has 3 rooms)")
        }
        if configuration.connections > 60_000 { throw fail("--workspaces × --clients must be at most 60000") }
        if configuration.searchMax && configuration.rate == 0 { throw fail("--max needs a starting --rate above 0") }
        return configuration
    }
}
