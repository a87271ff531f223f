import Foundation

/// What the live progress line shows, once a second.
public struct BenchProgress: Sendable {
    public var elapsed: Double
    public var phase: String
    public var connections: Int
    public var target: Int
    public var opsPerSecond: Double
    public var deliveriesPerSecond: Double
    public var ackP99: Double
    public var deliveryP99: Double

    /// One line, no newline.
    public var line: String {
        func f(_ value: Double, _ digits: Int = 0) -> String { String(format: "%.\(digits)f", value) }
        return "\(f(elapsed, 1))s \(phase)  conn \(connections)/\(target)  ops/s \(f(opsPerSecond))  "
            + "deliveries/s \(f(deliveriesPerSecond))  ack p99 \(f(ackP99, 1)) ms  delivery p99 \(f(deliveryP99, 1)) ms"
    }

    /// Turns the generator's figures into a progress line at most once a second, with the rates
    /// since the previous one.
    struct Meter {
        private var last: UInt64 = 0
        private var applied = 0
        private var deliveries = 0

        /// The progress at `now`, or nil when less than a second has passed since the last one.
        mutating func reading(now: UInt64, schedule: Schedule, measurement: Measurement, target: Int) -> BenchProgress? {
            guard now - last >= 1_000_000_000 else { return nil }
            let seconds = last == 0 ? 1 : Double(now - last) / 1e9
            last = now
            defer {
                applied = measurement.totalApplied
                deliveries = measurement.deliveries
            }
            return BenchProgress(
                elapsed: Double(now - schedule.runStart) / 1e9, phase: schedule.phaseName(now: now),
                connections: measurement.connected, target: target,
                opsPerSecond: Double(measurement.totalApplied - applied) / seconds,
                deliveriesPerSecond: Double(measurement.deliveries - deliveries) / seconds,
                ackP99: Double(measurement.ack.valueAtPercentile(99)) / 1000,
                deliveryP99: Double(measurement.delivery.valueAtPercentile(99)) / 1000)
        }
    }
}
