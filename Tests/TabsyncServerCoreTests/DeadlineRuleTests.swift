import TabsyncCore
@testable import TabsyncServerCore
import Testing

/// Time's one door (ServerCore+Deadlines.swift): the core names its next deadline after every
/// event, a timeout does what is then due, and an idle core names none.
struct DeadlineRuleTests {
    @Test func sessionDeadlinesComeInOrderAndAClearedOneNeverComes() {
        let start = ContinuousClock.now
        var deadlines = DeadlineTable(origin: start)
        deadlines.set(3, .session, start + .seconds(3))
        deadlines.set(1, .session, start + .seconds(1))
        deadlines.set(2, .session, start + .seconds(1))  // the same instant: by session id
        deadlines.set(1, .keepalive, start + .seconds(1))  // the same session: by kind
        deadlines.set(4, .session, start + .seconds(2))
        deadlines.set(4, .session, nil)  // cleared: nothing of it stays
        deadlines.set(3, .session, start + .seconds(5))  // moved later
        #expect(deadlines.count == 4 && deadlines.bucketCount == 2)
        #expect(deadlines.next() == start + .seconds(1))
        #expect(deadlines.takeDue(at: start + .milliseconds(999)).isEmpty)
        #expect(deadlines.takeDue(at: start + .seconds(4)).map { [$0.id, Int($0.kind.rawValue)] } == [[1, 0], [1, 1], [2, 0]])
        #expect(deadlines.next() == start + .seconds(5))
        #expect(deadlines.takeDue(at: start + .seconds(5)).map(\.id) == [3])
        #expect(deadlines.next() == nil && deadlines.count == 0)
    }

    @Test func aDeadlineComesRoundedUpToItsGrainNeverBefore() {
        let start = ContinuousClock.now
        var deadlines = DeadlineTable(origin: start)
        deadlines.set(1, .session, start + .microseconds(1_500))  // to the next millisecond
        deadlines.set(2, .keepalive, start + .milliseconds(1_234), grain: .milliseconds(100))
        #expect(deadlines.deadline(1, .session) == start + .milliseconds(2))
        #expect(deadlines.deadline(2, .keepalive) == start + .milliseconds(1_300))
        #expect(deadlines.takeDue(at: start + .milliseconds(1_299)).map(\.id) == [1])
        #expect(deadlines.takeDue(at: start + .milliseconds(1_300)).map(\.id) == [2])
    }

    /// Issue 40: a disconnected session's deadline (a one-hour token's expiry) stayed in the heap
    /// until it came. Now it goes with the session: 100,000 sessions that come and go leave the
    /// table at the sessions still open, and its index of buckets bounded too.
    @Test func theDeadlineTableHoldsOnlyLiveSessions() {
        var h = CoreHarness {
            $0.accessControl = true
            $0.idleTimeout = .seconds(60)
        }
        let live = 10
        var maxIndex = 0
        for id in 1...100_000 {
            AccessRuleTests.join(&h, id, AccessRuleTests.grant(h, expiresIn: 3600))
            if id > live { h.handle(.disconnected(id - live)) }
            h.advance(.milliseconds(1))
            maxIndex = max(maxIndex, h.core.deadlines.indexCount)
        }
        #expect(h.core.sessionCount == live)
        #expect(h.core.deadlines.count == 2 * live)  // a token expiry and a keepalive each
        #expect(maxIndex <= 2 * (2 * live) + 64 + 1)
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
