import Foundation

/// How much longer than usual the tests' deadlines are: `TABSYNC_TEST_TIME_SCALE` (a number >= 1,
/// default 1). scripts/sanitize sets it, because code built with a sanitizer runs several times
/// slower and a deadline sized for a plain build would fail a test that is only slow. It stretches
/// deadlines only: a test never waits longer than its condition takes to hold.
package let testTimeScale: Double = {
    guard let text = ProcessInfo.processInfo.environment["TABSYNC_TEST_TIME_SCALE"] else { return 1 }
    guard let value = Double(text), value >= 1, value.isFinite else {
        fatalError("TABSYNC_TEST_TIME_SCALE must be a number >= 1, not '\(text)'")
    }
    return value
}()

/// `duration` stretched by ``testTimeScale``: the deadline to pass to a wait.
package func scaled(_ duration: Duration) -> Duration {
    testTimeScale == 1 ? duration : duration * testTimeScale
}
