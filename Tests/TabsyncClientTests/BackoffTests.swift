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

    /// Full jitter (the default): a delay anywhere in 0...nominal, so clients dropped together do
    /// not come back together in the window's upper half. With the old half jitter no delay fell
    /// below nominal / 2 and this fails.
    @Test func theDefaultIsFullJitterOverTheWholeWindow() {
        var generator = SplitMix64(seed: 7)
        let nominal = Backoff.default.nominalDelay(attempt: 5)
        let delays = (0..<1_000).map { _ in Backoff.default.delay(attempt: 5, using: &generator) }
        #expect(delays.allSatisfy { $0 >= .zero && $0 <= nominal })
        var quarters = [0, 0, 0, 0]
        for delay in delays { quarters[min(3, Int(delay / nominal * 4))] += 1 }
        // Uniform: about 250 in each quarter of the window; 150 is far outside chance.
        #expect(quarters.allSatisfy { $0 > 150 }, "delays per quarter of the window: \(quarters)")
    }

    @Test func microsecondsRoundUp() {
        #expect(Duration.nanoseconds(1).microseconds == 1)
        #expect(Duration.milliseconds(3).microseconds == 3_000)
        #expect(Duration.zero.microseconds == 0)
    }
}
