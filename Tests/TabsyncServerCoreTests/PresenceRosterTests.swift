@testable import TabsyncServerCore
import TabsyncCore
import TabsyncTestSupport
import Testing

/// The roster's rules without sockets: who is named, what a flush carries, and that a view built
/// from the first full list and every delta after it always equals the roster's list.
struct PresenceRosterTests {
    @Test func namesSessionsInJoinOrderUpToTheCapAndPromotesTheLongestWaiting() {
        var roster = PresenceRoster(cap: 2)
        for id in [5, 3, 9, 7] { roster.join(id) }
        var flush = roster.takeFlush()
        #expect(flush.named == [3, 5])
        #expect(flush.othersCount == 2)
        #expect(flush.awaitingFullList == [3, 5, 7, 9])
        roster.refocused(9)  // unnamed: nothing to tell
        #expect(!roster.hasChanges)
        roster.leave(5)
        flush = roster.takeFlush()
        #expect(flush.named == [3, 9])  // 9 waited longer than 7
        #expect(flush.upserts == [9] && flush.left == [5] && flush.othersCount == 1 && flush.changed)
        #expect(flush.awaitingFullList.isEmpty)
    }

    @Test func aSessionThatJoinsAndLeavesBetweenFlushesIsNeverTold() {
        var roster = PresenceRoster(cap: 10)
        roster.join(1)
        _ = roster.takeFlush()
        roster.join(2)
        roster.refocused(2)
        roster.leave(2)
        #expect(!roster.hasChanges)
        let flush = roster.takeFlush()
        #expect(flush.upserts.isEmpty && flush.left.isEmpty && !flush.changed)
    }

    /// Nothing a list shows changed (one unnamed session left, another joined), yet the joiner is
    /// owed its first list.
    @Test func aJoinerGetsItsListEvenWhenTheListDidNotChange() {
        var roster = PresenceRoster(cap: 1)
        roster.join(1)
        roster.join(2)
        _ = roster.takeFlush()
        roster.leave(2)
        roster.join(3)
        #expect(roster.hasChanges)
        let flush = roster.takeFlush()
        #expect(!flush.changed)
        #expect(flush.awaitingFullList == [3] && flush.named == [1] && flush.othersCount == 1)
    }

    @Test func anUnnamedSessionThatJoinsAndLeavesBetweenFlushesChangesNothing() {
        var roster = PresenceRoster(cap: 1)
        roster.join(1)
        _ = roster.takeFlush()
        roster.join(2)
        roster.leave(2)
        #expect(!roster.hasChanges)
    }

    /// Seeded churn, flushes at random points: a view applying the first full list and then every
    /// delta equals the roster's list and count after every flush.
    @Test(arguments: [1, 3, 50])
    func viewsRebuiltFromDeltasEqualTheList(cap: Int) {
        var random = SplitMix64(seed: 0xC0FFEE &+ UInt64(cap))
        var roster = PresenceRoster(cap: cap)
        var joined: [Int] = []
        var nextId = 1
        var view: Set<Int>?
        var others = 0
        for step in 0..<5_000 {
            let roll = random.next() % 4
            if roll < 2 && joined.count < 200 {
                roster.join(nextId)
                joined.append(nextId)
                nextId += 1
            } else if roll == 2 && !joined.isEmpty {
                roster.leave(joined.remove(at: Int(random.next() % UInt64(joined.count))))
            } else if let id = joined.randomElement(using: &random) {
                roster.refocused(id)
            }
            if step % 7 == 0 || random.next() % 5 == 0 {
                let flush = roster.takeFlush()
                if var held = view {
                    if flush.changed {
                        for id in flush.left { #expect(held.remove(id) != nil, "left \(id) not held") }
                        held.formUnion(flush.upserts)
                    }
                    view = held
                } else {
                    view = Set(flush.named)
                }
                others = flush.othersCount
                #expect(view == Set(flush.named))
                #expect(Set(flush.named).isSubset(of: joined))
                #expect(flush.named.count == min(cap, joined.count))
                #expect(others == joined.count - flush.named.count)
            }
        }
        #expect(roster.sessionCount == joined.count)
    }
}
