/// Exponential back-off with jitter for reconnecting.
///
/// Attempt 0 (the first connection, or a deliberate resync) waits nothing. Attempt `n ≥ 1` waits
/// a nominal `min(maximum, initial · multiplier^(n-1))`, of which a random share up to `jitter`
/// is taken off, so the delay is always in `nominal · (1 - jitter) ... nominal` and never above
/// `maximum`. The default jitter is 1, full jitter: a delay uniform in `0 ... nominal`, so the
/// clients of a server that went away return spread over the whole window instead of in
/// lock-step at its second half (docs/design.md, "Reconnecting").
public struct Backoff: Sendable, Equatable {
    public var initial: Duration
    public var maximum: Duration
    public var multiplier: Double
    /// The share of the nominal delay that may be taken off at random, 0...1.
    public var jitter: Double

    public static let `default` = Backoff()

    public init(
        initial: Duration = .milliseconds(100), maximum: Duration = .seconds(10),
        multiplier: Double = 2, jitter: Double = 1
    ) {
        precondition(initial >= .zero && maximum >= initial, "Backoff needs 0 <= initial <= maximum")
        precondition(multiplier >= 1, "Backoff multiplier must be at least 1")
        precondition((0...1).contains(jitter), "Backoff jitter must be in 0...1")
        self.initial = initial
        self.maximum = maximum
        self.multiplier = multiplier
        self.jitter = jitter
    }

    /// The delay before attempt `attempt` without jitter.
    public func nominalDelay(attempt: Int) -> Duration {
        guard attempt > 0 else { return .zero }
        let initialSeconds = initial.seconds
        let maximumSeconds = maximum.seconds
        // Stop multiplying once past the maximum: no overflow however many attempts.
        var seconds = initialSeconds
        var step = 1
        while step < attempt && seconds < maximumSeconds {
            seconds *= multiplier
            step += 1
        }
        return .seconds(min(seconds, maximumSeconds))
    }

    /// The delay before attempt `attempt`, with jitter drawn from `generator`.
    public func delay(attempt: Int, using generator: inout some RandomNumberGenerator) -> Duration {
        let nominal = nominalDelay(attempt: attempt)
        guard nominal > .zero, jitter > 0 else { return nominal }
        let cut = Double.random(in: 0..<1, using: &generator) * jitter
        return .seconds(nominal.seconds * (1 - cut))
    }

    /// The delay before attempt `attempt`, with jitter from the system generator.
    public func delay(attempt: Int) -> Duration {
        var generator = SystemRandomNumberGenerator()
        return delay(attempt: attempt, using: &generator)
    }
}

extension Duration {
    /// The duration in (fractional) seconds.
    var seconds: Double {
        let parts = components
        return Double(parts.seconds) + Double(parts.attoseconds) / 1e18
    }

    /// Whole microseconds, rounded up, never negative: what lws timers take.
    var microseconds: Int64 {
        let parts = components
        let micros = parts.seconds * 1_000_000 + (parts.attoseconds + 999_999_999_999) / 1_000_000_000_000
        return max(0, micros)
    }
}
