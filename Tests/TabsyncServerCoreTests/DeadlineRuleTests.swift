import TabsyncCore
@testable import TabsyncServerCore
import Testing

/// Time's one door (ServerCore+Deadlines.swift): the core names its next deadline after every
/// event, a timeout does what is then due, and an idle core names none.
struct DeadlineRuleTests {
    @Test func sessionDeadlinesComeInOrderAndAClearedOneNeverComes() {
        let start = ContinuousClock.now
        var deadlines = SessionDeadlines()
        deadlines.set(3, start + .seconds(3))
        deadlines.set(1, start + .seconds(1))
        deadlines.set(2, start + .seconds(1))  // the same instant: by session id
        deadlines.set(4, start + .seconds(2))
        deadlines.set(4, nil)  // cleared: its heap entry is skipped
        deadlines.set(3, start + .seconds(5))  // moved later
        #expect(deadlines.next() == start + .seconds(1))
        #expect(deadlines.takeDue(at: start + .milliseconds(999)).isEmpty)
        #expect(deadlines.takeDue(at: start + .seconds(4)) == [1, 2])
        #expect(deadlines.next() == start + .seconds(5))
        #expect(deadlines.takeDue(at: start + .seconds(5)) == [3])
        #expect(deadlines.next() == nil)
    }

    @Test func anIdleCoreNamesNoDeadlineAndABusyOneTheEarliest() {
        var h = CoreHarness { $0.idleUnload = .seconds(30) }
        #expect(h.core.nextDeadline == nil)  // nothing of its own to do: it sleeps
        h.hello(1, client: "c1")
        h.handle(.loaded(workspaceId: "w", .success(nil)))
        #expect(h.core.nextDeadline == h.now)  // the first presence list
        h.handle(.timeout)
        #expect(h.core.nextDeadline == nil)
        // An op is stored: the workspace is no longer empty, so once its session leaves it stays
        // loaded until its idle time is over (scanned at most once a second).
        let sent = h.submit(1, seq: 1, CoreHarness.add("a"))
        h.handle(.committed(batch: sent.commitId ?? 0, .stored, duration: .zero))
        h.handle(.disconnected(1))
        let idleFrom = h.now
        #expect(h.core.nextDeadline == h.now + .milliseconds(100))  // presence: it left
        h.advance(.milliseconds(100))
        h.handle(.timeout)
        #expect(h.core.nextDeadline == idleFrom + .seconds(30))
        h.advance(.seconds(29))
        #expect(Said.of(h.handle(.timeout)).isEmpty && h.core.workspacesInMemory == 1)  // early: nothing
        // That timeout scanned the idle clocks: the next scan is a second later, past the idle time.
        #expect(h.core.nextDeadline == h.now + .seconds(1))
        h.advance(.seconds(1))
        h.handle(.timeout)
        #expect(h.core.workspacesInMemory == 0 && h.core.nextDeadline == nil)
    }

    @Test func aSharedStoreNodeBeatsAndPollsOnItsDeadlines() {
        var h = CoreHarness {
            $0.sharedStorePollInterval = .seconds(5)
            $0.holderRegistry = .init(heartbeatInterval: .seconds(2))
        }
        #expect(h.core.nextDeadline == h.now)  // the first beat and the poll's first due time
        h.handle(.timeout)
        #expect(h.core.nextDeadline == h.now + .seconds(2))  // the next beat comes first
        h.advance(.seconds(2))
        #expect(h.handle(.timeout).contains { if case .heartbeat = $0 { true } else { false } })
        h.advance(.seconds(2))
        h.handle(.timeout)
        #expect(h.core.nextDeadline == h.now + .seconds(1))  // the poll, 5 s after the first timeout
    }
}
