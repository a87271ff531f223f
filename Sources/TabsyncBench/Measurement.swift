import Histogram

/// Every figure the load generator records, in one value: the connect figures and run totals, which
/// cover the whole run, and the figures of the measured window, which ``resetWindow(workspaces:)``
/// clears before each load. Latencies are in microseconds (at least 1).
///
/// Recording is arithmetic and histogram counts, with no allocation once the dictionaries have
/// their keys: it runs for every answer, up to a million a second. Whether an op counts (sent inside
/// the window) is the caller's decision; these methods only add.
struct Measurement {
    // MARK: whole run

    /// Time from a connect's start to ready (Welcome, or the handshake in mirror mode).
    var connectTimes = Self.histogram(digits: .three)
    /// Connections ready now.
    var connected = 0
    /// Presence messages received (every connection, every phase).
    var presenceMessages = 0
    /// Connections that never became ready, by reason.
    var connectFailures: [String: Int] = [:]
    /// Ready connections the server closed or dropped, by close code.
    var disconnects: [String: Int] = [:]
    /// `Error` messages from the server, by code.
    var serverErrors: [String: Int] = [:]
    /// Ops applied in the whole run, measured or not (the progress line's rate).
    var totalApplied = 0

    // MARK: measured window

    /// Intended send → the submitter's own `Applied`.
    var ack = Self.histogram(digits: .three)
    /// Intended send → the `Applied` at every other client of the workspace.
    var delivery = Self.histogram(digits: .three)
    /// With several servers: `delivery` split by whether the receiver is on the submitter's server
    /// (same node) or on another (cross node: the op went through the shared store between nodes).
    var deliverySameNode = Self.histogram(digits: .three)
    var deliveryCrossNode = Self.histogram(digits: .three)
    /// Intended send → actually written (the generator's lateness).
    var sendLag = Self.histogram(digits: .two)
    var sent = 0
    var applied = 0
    var rejected = 0
    var rejectedByCode: [String: Int] = [:]
    /// Ops due in the window that had no ready connection to go on.
    var notSent = 0
    var deliveries = 0
    var deliveryBytes = 0
    var deliveryMessages = 0
    /// Applied ops per workspace (every other ready client of it should receive each).
    var appliedPerWorkspace: [Int] = []

    static func histogram(digits: SignificantDigits) -> Histogram<UInt64> {
        Histogram(lowestDiscernibleValue: 1, highestTrackableValue: 600_000_000, numberOfSignificantValueDigits: digits)
    }

    /// Clears every figure of the measured window (the run's figures stay).
    mutating func resetWindow(workspaces: Int) {
        ack.reset()
        delivery.reset()
        deliverySameNode.reset()
        deliveryCrossNode.reset()
        sendLag.reset()
        sent = 0
        applied = 0
        rejected = 0
        rejectedByCode = [:]
        notSent = 0
        deliveries = 0
        deliveryBytes = 0
        deliveryMessages = 0
        appliedPerWorkspace = Array(repeating: 0, count: workspaces)
    }

    // MARK: recording

    mutating func becameReady(connectMicros: UInt64) {
        connected += 1
        connectTimes.record(connectMicros)
    }

    /// A measured op went out `lateMicros` after its intended time.
    mutating func sentMeasured(lateMicros: UInt64) {
        sent += 1
        sendLag.record(lateMicros)
    }

    /// A measured op's own `Applied` came back.
    mutating func acknowledged(micros: UInt64, workspace: Int) {
        applied += 1
        appliedPerWorkspace[workspace] += 1
        ack.record(micros)
    }

    /// A measured op's `Applied` reached another client (`bytes`: the message's size);
    /// `sameNode`: whether that client is on the submitter's server (nil with one server).
    mutating func delivered(micros: UInt64, bytes: Int, sameNode: Bool? = nil) {
        deliveries += 1
        deliveryBytes += bytes
        deliveryMessages += 1
        delivery.record(micros)
        switch sameNode {
        case true?: deliverySameNode.record(micros)
        case false?: deliveryCrossNode.record(micros)
        case nil: break
        }
    }

    mutating func refused(code: String) {
        rejected += 1
        rejectedByCode[code, default: 0] += 1
    }

    // MARK: reading

    /// Measured ops still owed an answer.
    var outstanding: Int { sent - applied - rejected }

    /// The report's op figures for a window of `seconds`.
    func ops(seconds: Double, expectedDeliveries: Int) -> BenchReport.Ops {
        var ops = BenchReport.Ops()
        ops.sent = sent
        ops.applied = applied
        ops.rejected = rejected
        ops.rejectedByCode = rejectedByCode
        ops.unanswered = max(0, outstanding)
        ops.notSent = notSent
        ops.appliedPerSecond = Double(applied) / seconds
        ops.deliveries = deliveries
        ops.expectedDeliveries = expectedDeliveries
        ops.deliveriesPerSecond = Double(deliveries) / seconds
        ops.bytesPerDelivery = deliveryMessages > 0 ? Double(deliveryBytes) / Double(deliveryMessages) : 0
        return ops
    }
}
