import ArgumentParser

/// The `tabsync bench --churn` flags: an option group of their own (next to ``BenchOptions``, which
/// still gives the server, workspaces, clients per workspace, rate, duration, seed and prefix).
///
/// Guarantees: after parsing (which runs ``validate()``), ``configuration(base:)`` does not throw
/// for a valid base. Every refusal names the flag.
public struct ChurnOptions: ParsableArguments {
    @Flag(help: "Churn mode: connections drop abruptly, reconnect and resume; every acknowledged op is checked at the end.")
    public var churn = false

    @Option(name: .customLong("churn-lifetime"), parsing: .unconditional, help: ArgumentHelp(
        "Mean seconds a connection lives before it drops its socket (exponential).", valueName: "s"))
    var lifetime: Double = 30

    @Option(name: .customLong("churn-mid-submit"), parsing: .unconditional, help: ArgumentHelp(
        "Fraction of drops made right after sending an op, before its answer.", valueName: "f"))
    var midSubmit: Double = 0.5

    @Option(name: .customLong("slow-readers"), parsing: .unconditional, help: ArgumentHelp(
        "Fraction of connections that stop reading for --stall seconds once per life.", valueName: "f"))
    var slowReaders: Double = 0.05

    @Option(name: .customLong("stall"), parsing: .unconditional, help: ArgumentHelp(
        "Seconds a slow reader stops reading.", valueName: "s"))
    var stall: Double = 10

    @Option(name: .customLong("settle"), parsing: .unconditional, help: ArgumentHelp(
        "Seconds allowed at the end for every connection to resume and every op to be answered.", valueName: "s"))
    var settle: Double = 120

    @Option(name: .customLong("reconnect-max"), parsing: .unconditional, help: ArgumentHelp(
        "Longest back-off between reconnect attempts while the server is away.", valueName: "s"))
    var reconnectMax: Double = 5

    @Flag(help: ArgumentHelp(
        "Reconnect-storm mode (with --churn): no ops, drops or stalls; the clients connect (at --ramp), hold "
            + "their connections and, whenever the server goes away, reconnect with full-jitter back-off and "
            + "resume (scripts/reconnect-storm kills and restarts the server meanwhile)."))
    var storm = false

    @Option(name: .customLong("welcome-log"), help: ArgumentHelp(
        "Append a line 'CLIENT UNIX_NANOS' for every Welcome received (written every 5 ms).", valueName: "file"))
    var welcomeLog: String?

    @Option(name: .customLong("ledger"), help: ArgumentHelp(
        "Write every acknowledged op and each workspace's expected state as JSON.", valueName: "file"))
    var ledger: String?

    public init() {}

    public mutating func validate() throws {
        do {
            // These flags alone; how they go with the base's (--rate) is checked by configuration(base:).
            var base = BenchConfiguration(workspacePrefix: "x", seed: 1)
            base.rate = 0
            _ = try configuration(base: base)
        } catch {
            throw ValidationError(error.description)
        }
    }

    /// The churn run these flags describe on top of `base` (server, workspaces, clients, rate,
    /// duration, seed, prefix, subprotocol).
    /// - Throws: ``BenchError/invalidArgument(_:)`` naming the flag.
    public func configuration(base: BenchConfiguration) throws(BenchError) -> ChurnConfiguration {
        func number(_ flag: String, _ value: Double, _ range: ClosedRange<Double>) throws(BenchError) -> Double {
            guard value.isFinite, range.contains(value) else {
                throw .invalidArgument("\(flag) must be a number in \(range.lowerBound)...\(range.upperBound), not '\(value)'")
            }
            return value
        }
        if base.mode == .mirror { throw .invalidArgument("--churn needs --subprotocol json or proto") }
        var configuration = ChurnConfiguration(base: base)
        configuration.lifetime = try number("--churn-lifetime", lifetime, 0.5...86_400)
        configuration.midSubmit = try number("--churn-mid-submit", midSubmit, 0...1)
        configuration.slowReaders = try number("--slow-readers", slowReaders, 0...1)
        configuration.stall = try number("--stall", stall, 0.1...3_600)
        configuration.settle = try number("--settle", settle, 1...3_600)
        configuration.reconnectMax = try number("--reconnect-max", reconnectMax, 0.1...600)
        configuration.ledgerPath = ledger
        configuration.storm = storm
        configuration.welcomeLogPath = welcomeLog
        if storm && base.rate > 0 { throw .invalidArgument("--storm sends no ops: give --rate 0") }
        return configuration
    }
}

/// One churn run: the bench's connections, workspaces, rate, duration and seed (``base``) plus
/// how they drop, stall and reconnect.
public struct ChurnConfiguration: Sendable, Equatable {
    public var base: BenchConfiguration
    /// Mean seconds between a connection's Welcome and its abrupt drop.
    public var lifetime: Double = 30
    /// Fraction of drops that send one more op first (it is in flight when the socket goes).
    public var midSubmit: Double = 0.5
    /// Fraction of connection lives that stall reading once.
    public var slowReaders: Double = 0.05
    public var stall: Double = 10
    public var settle: Double = 120
    public var reconnectMax: Double = 5
    public var ledgerPath: String?
    /// No ops, drops or stalls: connect, hold, reconnect whenever the server goes away. ``ChurnOptions``
    /// `--storm`.
    public var storm = false
    /// Where each Welcome is logged as `CLIENT UNIX_NANOS` (nil: nowhere).
    public var welcomeLogPath: String?

    public init(base: BenchConfiguration) {
        self.base = base
    }
}
