import TabsyncCore
import TabsyncTestSupport
import Testing
@testable import TabsyncClient

@Suite struct BackoffTests {
    @Test func firstAttemptWaitsNothing() {
        var generator = SplitMix64(seed: 1)
        #expect(Backoff.default.delay(attempt: 0, using: &generator) == .zero)
    }

    @Test func nominalDelayDoublesUpToTheMaximum() {
        let backoff = Backoff(initial: .milliseconds(100), maximum: .seconds(1), multiplier: 2, jitter: 0)
        let delays = (1...7).map { backoff.nominalDelay(attempt: $0) }
        #expect(delays == [
            .milliseconds(100), .milliseconds(200), .milliseconds(400), .milliseconds(800),
            .seconds(1), .seconds(1), .seconds(1),
        ])
        #expect(backoff.nominalDelay(attempt: 10_000) == .seconds(1))
    }

    @Test func jitterStaysWithinItsShareAndVaries() {
        let backoff = Backoff(initial: .milliseconds(100), maximum: .seconds(10), jitter: 0.5)
        var generator = SplitMix64(seed: 42)
        for attempt in 1...12 {
            let nominal = backoff.nominalDelay(attempt: attempt)
            var seen = Set<Duration>()
            for _ in 0..<50 {
                let delay = backoff.delay(attempt: attempt, using: &generator)
                #expect(delay <= nominal)
                #expect(delay >= nominal * 0.5)
                seen.insert(delay)
            }
            #expect(seen.count > 10, "jitter should spread the delays")
        }
    }

    @Test func microsecondsRoundUp() {
        #expect(Duration.nanoseconds(1).microseconds == 1)
        #expect(Duration.milliseconds(3).microseconds == 3_000)
        #expect(Duration.zero.microseconds == 0)
    }
}
