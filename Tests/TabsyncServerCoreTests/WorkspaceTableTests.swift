import TabsyncCore
@testable import TabsyncServerCore
import Testing

/// The workspace table's rules alone, on a virtual clock: one read per workspace at a time, waiters
/// in arrival order, a hub kept through a read back, retries after their pause, idle clocks, the
/// presence marks' coalescing (``WorkspaceTable``).
struct WorkspaceTableTests {
    let start = ContinuousClock.now

    func hub(_ id: String = "w", version: Int = 0) -> WorkspaceHub {
        var sequencer = Sequencer(workspace: Workspace(id: id, epoch: "e"), limits: .default)
        for n in 0..<version {
            _ = sequencer.submit(
                clientId: "c", seq: UInt64(n + 1), baseVersion: UInt64(n),
                op: .add(tab: Tab(id: "t\(n)"), place: .end, activate: false))
        }
        return WorkspaceHub(id: id, sequencer: sequencer, maxPresencePeers: 8, shared: false)
    }

    @Test func aWorkspaceIsReadOnceWhateverAsksAndItsWaitersJoinInArrivalOrder() {
        var table = WorkspaceTable(now: start)
        do {
            let result = table.load("w", waiter: 3)
            #expect(result)  // the first asks for the read
        }
        do {
            let result = table.load("w", waiter: 1)
            #expect(!result)  // the others wait for it
        }
        do {
            let result = table.load("w", waiter: nil)
            #expect(!result)  // an HTTP request neither reads again nor waits here
        }
        do {
            let result = table.load("w", waiter: 2)
            #expect(!result)
        }
        #expect(table.phase("w") == .loading && table.hub("w") == nil && table.count == 1)
        #expect(table.waiters("w") == [3, 1, 2])
        do {
            let result = table.loaded("w", hub())
            #expect(result == [3, 1, 2])
        }
        #expect(table.phase("w") == .loaded && table.loadedHub("w") != nil && table.waiters("w").isEmpty)
        do {
            let result = table.loaded("w", hub())
            #expect(result == nil)  // no first read was under way
        }
        do {
            let result = table.load("w", waiter: 4)
            #expect(!result)  // loaded: the caller joins it at once
        }
        #expect(table.waiters("w").isEmpty)
    }

    @Test func aReadBackKeepsTheHubAndItsMembersAndTakesTheStoredState() {
        var table = WorkspaceTable(now: start)
        _ = table.load("w", waiter: nil)
        _ = table.loaded("w", hub(version: 3))
        table.withHub("w") { $0.admit(7) }
        do {
            let result = table.reload("absent")
            #expect(!result)
        }
        do {
            let result = table.reload("w")
            #expect(result)
        }
        do {
            let result = table.reload("w")
            #expect(!result)  // one read back at a time
        }
        #expect(table.phase("w") == .reloading && table.loadedHub("w") == nil)
        #expect(table.hub("w")?.members == [7])  // members, presence and HTTP snapshot stay
        #expect(!table.hasNoSession("w"))
        do {
            let result = table.load("w", waiter: 8)
            #expect(!result)  // a Hello meanwhile waits for the read back
        }
        let back = table.reloaded("w", restore: hub(version: 1).live)
        #expect(back?.before.version == 3 && back?.waiters == [8])
        #expect(table.phase("w") == .loaded && table.hub("w")?.durable.version == 1 && table.hub("w")?.members == [7])
        do {
            let result = table.reloaded("w", restore: hub().live)
            #expect(result == nil)  // none under way
        }
    }

    @Test func aFailedReadBackIsTriedAgainAfterItsPauseAndReportedOncePerOutage() {
        var table = WorkspaceTable(now: start)
        _ = table.load("w", waiter: nil)
        _ = table.loaded("w", hub(version: 1))
        _ = table.reload("w")
        do {
            let result = table.reloadFailed("w", waiters: [5], at: start)
            #expect(result)  // the first failure is reported
        }
        #expect(table.waiters("w") == [5])
        do {
            let result = table.dueReloads(at: start + .milliseconds(249))
            #expect(result.isEmpty)
        }
        do {
            let result = table.dueReloads(at: start + WorkspaceTable.reloadRetryPause)
            #expect(result == ["w"])
        }
        do {
            let result = table.dueReloads(at: start + .seconds(10))
            #expect(result.isEmpty)  // taken off the list
        }
        do {
            let result = table.reloadFailed("w", waiters: [], at: start + .seconds(1))
            #expect(!result)  // the same outage
        }
        _ = table.reloaded("w", restore: hub(version: 1).live)
        #expect(table.reloadRetries.isEmpty)
        _ = table.reload("w")
        do {
            let result = table.reloadFailed("w", waiters: [], at: start + .seconds(2))
            #expect(result)  // a new outage
        }
        // A retry due for a workspace no longer reloading is dropped, not read.
        table.remove("w")
        do {
            let result = table.dueReloads(at: start + .seconds(3))
            #expect(result.isEmpty)
        }
        do {
            let result = table.reloadFailed("w", waiters: [], at: start + .seconds(3))
            #expect(!result)  // not reloading: nothing
        }
    }

    @Test func anIdleWorkspaceIsDueAfterItsIdleTimeAtMostOneScanPerSecond() {
        var table = WorkspaceTable(now: start)
        for id in ["a", "b"] {
            _ = table.load(id, waiter: nil)
            _ = table.loaded(id, hub(id))
        }
        #expect(table.hasNoSession("a"))
        table.becameIdle("a", at: start)
        table.becameIdle("b", at: start + .seconds(2))
        table.becameIdle("a", at: start + .seconds(2))  // its clock runs already: unchanged
        do {
            let result = table.dueIdle(at: start + .milliseconds(500), idleUnload: .seconds(5))
            #expect(result.isEmpty)  // under a second since the last scan
        }
        do {
            let result = table.dueIdle(at: start + .seconds(5), idleUnload: .seconds(5))
            #expect(result == ["a"])
        }
        do {
            let result = table.dueIdle(at: start + .milliseconds(5_500), idleUnload: .seconds(5))
            #expect(result.isEmpty)  // scanned 0.5 s ago
        }
        table.inUse("b")  // a session came: its clock stops
        do {
            let result = table.dueIdle(at: start + .seconds(60), idleUnload: .seconds(5))
            #expect(result.isEmpty)
        }
        #expect(table.idleSince.isEmpty)
        // A short idle time is scanned at every call.
        table.becameIdle("b", at: start + .seconds(60))
        do {
            let result = table.dueIdle(at: start + .milliseconds(60_100), idleUnload: .milliseconds(100))
            #expect(result == ["b"])
        }
    }

    @Test func removingAWorkspaceForgetsItsClocksRetriesAndMoves() {
        var table = WorkspaceTable(now: start)
        _ = table.load("w", waiter: nil)
        _ = table.loaded("w", hub())
        table.becameIdle("w", at: start)
        table.moves.handingOver.insert("w")
        table.moves.checkAt["w"] = start
        table.remove("w")
        #expect(table.phase("w") == nil && table.count == 0)
        #expect(table.idleSince.isEmpty && table.moves.handingOver.isEmpty && table.moves.checkAt.isEmpty)
        do {
            var ran = false
            let result = table.withHub("w") { _ in ran = true }
            #expect(result == nil && !ran)  // no hub: the body does not run
        }
    }

    @Test func presenceGoesOutCoalescedAtMostOncePerIntervalPerWorkspace() {
        var table = WorkspaceTable(now: start)
        _ = table.load("w", waiter: nil)
        _ = table.loaded("w", hub())
        let interval: (Int) -> Duration = { _ in .milliseconds(100) }
        table.withHub("w") { $0.admit(1) }
        table.presenceChanged("w")
        table.presenceChanged("gone")  // no hub: the mark goes
        var flushes = table.takePresenceFlushes(at: start, interval: interval)
        #expect(flushes.count == 1 && flushes.first?.members == [1] && flushes.first?.flush.named == [1])
        #expect(table.presenceDirty.isEmpty)
        table.withHub("w") { $0.admit(2) }
        table.presenceChanged("w")
        table.withHub("w") { $0.admit(3) }
        table.presenceChanged("w")
        do {
            let result = table.takePresenceFlushes(at: start + .milliseconds(50), interval: interval)
            #expect(result.isEmpty)  // too soon
        }
        #expect(table.presenceDirty == ["w"])  // the mark stays
        flushes = table.takePresenceFlushes(at: start + .milliseconds(100), interval: interval)
        #expect(flushes.count == 1 && flushes.first?.flush.upserts == [2, 3])  // both changes in one
        table.presenceChanged("w")  // nothing changed since: the mark goes, nothing is sent
        do {
            let result = table.takePresenceFlushes(at: start + .seconds(1), interval: interval)
            #expect(result.isEmpty)
        }
        #expect(table.presenceDirty.isEmpty)
    }

    @Test func aHubChangedThroughTheTableIsChangedInPlace() throws {
        var table = WorkspaceTable(now: start)
        _ = table.load("w", waiter: nil)
        _ = table.loaded("w", hub())
        let outcome = table.withHub("w") { hub in
            hub.live.submit(
                clientId: "c", seq: 1, baseVersion: 0, op: .add(tab: Tab(id: "a"), place: .end, activate: false))
        }
        guard case .applied? = outcome else { throw Failure("the add was not applied: \(String(describing: outcome))") }
        #expect(table.hub("w")?.live.workspace.version == 1)
        #expect(table.hub("w")?.durable.version == 0)  // durable moves only when a commit returns
        // A throwing change still leaves the hub in the table.
        struct Stop: Error {}
        #expect(throws: Stop.self) { try table.withHub("w") { _ throws(Stop) in throw Stop() } }
        #expect(table.hub("w")?.live.workspace.version == 1)
    }

    struct Failure: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }
}
