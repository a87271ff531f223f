import Foundation
import TabsyncLoop
import Testing

/// ``LoopTimer``: fires once per arming on the loop thread; re-arming replaces the deadline;
/// a cancelled timer never fires. Actions that end a wait call `wake()`, as `EventLoop.runOnce()`
/// asks; every wait is bounded well under the probe's 20 s limit, so a timer that does not fire in
/// time fails the test.
@Suite("Loop timer")
struct LoopTimerTests {
    /// Re-armed from its own action, a timer fires once per arming, never before its delay.
    @Test(arguments: [EventLoop.Backend.epoll, .poll])
    func aTimerFiresOncePerArmingAndCanBeReArmedFromItsAction(backend: EventLoop.Backend) throws {
        let probe = try LoopProbe(backend: backend)
        var fired = 0
        var timer: LoopTimer?
        let loop = probe.loop
        timer = LoopTimer(on: loop) {
            fired += 1
            if fired < 3 { timer?.schedule(after: .milliseconds(10)) } else { loop.wake() }
        }
        let started = ContinuousClock.now
        timer?.schedule(after: .milliseconds(10))
        #expect(timer?.isArmed == true)
        let done = probe.run(for: .seconds(20)) { fired == 3 }
        #expect(done)
        let elapsed = ContinuousClock.now - started
        #expect(elapsed >= .milliseconds(30) && elapsed < .seconds(10))
        #expect(timer?.isArmed == false)
        // Nothing armed: more iterations (woken by the inbox) do not fire it again.
        probe.inbox.post(1)
        _ = probe.run(for: .seconds(20)) { probe.received == [1] }
        #expect(fired == 3)
        timer = nil
    }

    /// A cancelled timer does not fire, even once its deadline has long passed.
    @Test(arguments: [EventLoop.Backend.epoll, .poll])
    func aCancelledTimerNeverFires(backend: EventLoop.Backend) throws {
        let probe = try LoopProbe(backend: backend)
        var cancelledFired = false
        var laterFired = false
        let cancelled = LoopTimer(on: probe.loop) { cancelledFired = true }
        let loop = probe.loop
        let later = LoopTimer(on: loop) {
            laterFired = true
            loop.wake()
        }
        cancelled.schedule(after: .milliseconds(5))
        later.schedule(after: .milliseconds(100))
        cancelled.cancel()
        #expect(!cancelled.isArmed)
        let done = probe.run(for: .seconds(20)) { laterFired }
        #expect(done)
        #expect(!cancelledFired)
    }

    /// Arming an armed timer replaces its deadline: it fires once, at the new one, and not again
    /// at the old one (a later timer, armed with it, fires in between).
    @Test(arguments: [EventLoop.Backend.epoll, .poll])
    func reArmingReplacesThePendingDeadline(backend: EventLoop.Backend) throws {
        let probe = try LoopProbe(backend: backend)
        let loop = probe.loop
        var fired = 0
        var laterFired = false
        let timer = LoopTimer(on: loop) {
            fired += 1
            loop.wake()
        }
        let later = LoopTimer(on: loop) {
            laterFired = true
            loop.wake()
        }
        timer.schedule(after: .seconds(1))
        timer.schedule(after: .milliseconds(10))
        later.schedule(after: .milliseconds(1200))
        let started = ContinuousClock.now
        let firstDone = probe.run(for: .seconds(20)) { fired > 0 }
        #expect(firstDone)
        #expect(ContinuousClock.now - started < .milliseconds(900), "fired at the new deadline, not the old one")
        let laterDone = probe.run(for: .seconds(20)) { laterFired }
        #expect(laterDone)
        #expect(fired == 1, "the replaced deadline did not fire too")
    }

    /// Once its loop is destroyed a timer no longer arms (and releasing it touches nothing).
    @Test func aTimerOnADestroyedLoopNeverArms() throws {
        let probe = try LoopProbe(backend: .poll)
        let timer = LoopTimer(on: probe.loop) {}
        timer.schedule(after: .seconds(60))
        probe.loop.destroy()
        timer.cancel()
        timer.schedule(after: .milliseconds(1))
        #expect(!timer.isArmed)
        #expect(probe.loop.isDestroyed)
    }
}
