import Foundation

/// Waits for `condition` to hold, polling it every `interval`, for at most `deadline`: the way a
/// test synchronises with something it cannot be told about (a server's metric, a file, a screen),
/// instead of sleeping for a guessed time.
///
/// Returns true as soon as the condition holds (it is checked first, so a condition already true
/// costs no wait), false once `deadline` (stretched by ``testTimeScale``) has passed without it; the condition is checked once more
/// at the deadline. An error thrown by `condition` ends the wait and is rethrown. Blocks the calling
/// thread; from async code the async overload is picked instead.
package func waitUntil(
    deadline: Duration = .seconds(5), interval: Duration = .milliseconds(10), _ condition: () throws -> Bool
) rethrows -> Bool {
    let clock = ContinuousClock()
    let end = clock.now + scaled(deadline)
    while true {
        if try condition() { return true }
        let remaining = end - clock.now
        if remaining <= .zero { return false }
        Thread.sleep(forTimeInterval: min(interval, remaining).seconds)
    }
}

/// The same wait from async code (picked there over the blocking one): suspends between checks
/// instead of blocking a thread of the cooperative pool. Also returns false when the task is cancelled.
package func waitUntil(
    deadline: Duration = .seconds(5), interval: Duration = .milliseconds(10), _ condition: () throws -> Bool
) async rethrows -> Bool {
    let clock = ContinuousClock()
    let end = clock.now + scaled(deadline)
    while true {
        if try condition() { return true }
        let remaining = end - clock.now
        if remaining <= .zero || Task.isCancelled { return false }
        try? await Task.sleep(for: min(interval, remaining))
    }
}

extension Duration {
    /// The duration in (fractional) seconds.
    package var seconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}
