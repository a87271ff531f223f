import TabsyncCore
import TabsyncProto
import TabsyncStore
import Testing
@testable import TabsyncServerCore

/// The commit linger (``CommitPipeline/Linger``, docs/architecture.md "Group commit and its linger")
/// through the core: a small batch waits for company only while company is coming, never past the
/// limit, never when big enough, never during a stop.
struct CommitLingerRuleTests {
    /// Session 1 of c1 joined to "w" on a core whose commits linger up to 5 ms.
    static func joined(linger: Duration = .milliseconds(5)) -> CoreHarness {
        var h = CoreHarness { $0.commitLinger = linger }
        h.hello(1, client: "c1")
        h.handle(.loaded(workspaceId: "w", .success(nil)))
        return h
    }

    /// A second of 1,000 ops, 1 ms apart, each stored at once (none lingers: the rate is not known
    /// before the second ends), then the timeout that ends the second: now more than one record is
    /// expected within 5 ms, so the next small batch lingers.
    static func busy(_ h: inout CoreHarness, seq: inout UInt64) {
        for _ in 0..<1_000 {
            seq += 1
            let actions = h.submit(1, seq: seq, CoreHarness.add("t\(seq)"))
            #expect(actions.commitId != nil)
            if let id = actions.commitId { h.handle(.committed(batch: id, .stored, duration: .zero)) }
            h.advance(.milliseconds(1))
        }
        h.handle(.timeout)
    }

    /// A busy core (``busy(_:seq:)``) with one more op lingering; returns it and the op's seq.
    static func oneLingering() -> (CoreHarness, UInt64) {
        var h = Self.joined()
        var seq: UInt64 = 0
        Self.busy(&h, seq: &seq)
        seq += 1
        #expect(h.submit(1, seq: seq, CoreHarness.add("x")).commitId == nil)
        return (h, seq)
    }


    @Test func aQuietNodeNeverLingers() {
        var h = Self.joined()
        // No rate yet (nor after a second of one op): the op goes to the store at once.
        #expect(h.submit(1, seq: 1, CoreHarness.add("a")).commitId == 1)
        h.handle(.committed(batch: 1, .stored, duration: .zero))
        h.advance(.seconds(1))
        h.handle(.timeout)
        #expect(h.submit(1, seq: 2, CoreHarness.add("b")).commitId == 2)
    }

    @Test func aSmallBatchOnABusyNodeWaitsAtMostTheLimitThenGoesOnTheWake() {
        var h = Self.joined()
        var seq: UInt64 = 0
        Self.busy(&h, seq: &seq)
        // Now the rate is about 1,000 records a second: one op waits, until its deadline.
        seq += 1
        let first = h.submit(1, seq: seq, CoreHarness.add("x"))
        #expect(first.commitId == nil)
        #expect(h.core.nextDeadline == h.now + .milliseconds(5))
        // A second op 2 ms later joins it; the first one's deadline holds.
        h.advance(.milliseconds(2))
        seq += 1
        let second = h.submit(1, seq: seq, CoreHarness.add("y"))
        #expect(second.commitId == nil && h.core.nextDeadline == h.now + .milliseconds(3))
        // A timeout that comes early does not send it; the one at the deadline does, with both ops.
        h.advance(.milliseconds(1))
        #expect(h.handle(.timeout).commitId == nil)
        h.advance(.milliseconds(2))
        let woken = h.handle(.timeout)
        #expect(Said.of(woken).contains(.commit(woken.commitId ?? 0, records: 2)))
    }

    @Test func aLateTimeoutStillSendsALingeringBatch() {
        var (h, _) = Self.oneLingering()
        h.advance(.milliseconds(50))
        #expect(h.handle(.timeout).commitId != nil)
    }

    @Test func aBatchOfTheTargetSizeGoesAtOnce() {
        var (h, seq) = Self.oneLingering()
        // While batch N is in flight, 16 records gather; when it is stored they go at once.
        h.advance(.milliseconds(5))
        let inFlight = h.handle(.timeout).commitId
        #expect(inFlight != nil)
        for _ in 0..<16 {
            seq += 1
            h.submit(1, seq: seq, CoreHarness.add("t\(seq)"))
        }
        let stored = h.handle(.committed(batch: inFlight ?? 0, .stored, duration: .zero))
        #expect(Said.of(stored).contains(.commit(stored.commitId ?? 0, records: 16)))
    }

    @Test func aStopNeverLingers() {
        var (h, _) = Self.oneLingering()
        #expect(h.handle(.shutdown).commitId != nil)
    }

    @Test func zeroTurnsItOff() {
        var h = Self.joined(linger: .zero)
        var seq: UInt64 = 0
        Self.busy(&h, seq: &seq)
        seq += 1
        #expect(h.submit(1, seq: seq, CoreHarness.add("x")).commitId != nil)
    }
}
