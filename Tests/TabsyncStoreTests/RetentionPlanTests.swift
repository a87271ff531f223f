import Testing
import TabsyncStore

/// The retention rule every durable store runs (``RetentionPlan``), once, without a database.
struct RetentionPlanTests {
    @Test func aWorkspaceWithoutASnapshotGetsOneAndKeepsItsWholeShortLog() {
        let plan = RetentionPlan(version: 3, lastSnapshot: nil, retention: 10, snapshotInterval: 5)
        #expect(plan.writesSnapshot)
        #expect(plan.horizon == 0)
    }

    @Test func aSnapshotIsWrittenEveryIntervalOpsAndTheLogTrimmedBehindIt() {
        let early = RetentionPlan(version: 24, lastSnapshot: 20, retention: 10, snapshotInterval: 5)
        #expect(!early.writesSnapshot)
        #expect(early.horizon == 14)  // the last 10 ops stay
        let due = RetentionPlan(version: 25, lastSnapshot: 20, retention: 10, snapshotInterval: 5)
        #expect(due.writesSnapshot)
        #expect(due.horizon == 15)
    }

    @Test func theHorizonNeverPassesTheNewestSnapshot() {
        // An interval over the retention is clamped to it, so what is trimmed is always covered.
        let plan = RetentionPlan(version: 100, lastSnapshot: 95, retention: 2, snapshotInterval: 1_000)
        #expect(plan.writesSnapshot)  // 5 ops since, interval clamped to 2
        #expect(plan.horizon == 98)
        let covered = RetentionPlan(version: 96, lastSnapshot: 95, retention: 2, snapshotInterval: 1_000)
        #expect(!covered.writesSnapshot)
        #expect(covered.horizon == 94)
    }

    @Test func properties() {
        for version in Int64(1)...60 {
            for last in [nil] + (0...version).map(Optional.some) {
                for retention in [1, 3, 10] {
                    for interval in [1, 4, 50] {
                        let plan = RetentionPlan(version: version, lastSnapshot: last, retention: retention, snapshotInterval: interval)
                        let snapshot = plan.writesSnapshot ? version : last!
                        #expect(plan.horizon <= snapshot)
                        #expect(plan.horizon <= max(0, version - Int64(retention)))
                        #expect(plan.horizon >= 0)
                    }
                }
            }
        }
    }

    @Test func epochsAreSixteenHexDigitsAndDiffer() {
        let a = StoreEpoch.random(), b = StoreEpoch.random()
        #expect(a.count == 16 && b.count == 16 && a != b)
        #expect(a.allSatisfy { $0.isHexDigit })
    }
}
