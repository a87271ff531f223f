import Foundation
import Testing
import TabsyncCore
@testable import TabsyncStore
import TabsyncTestSupport

/// History's milestones and retention (``HistoryRetention``, ``HistoryReader``) on the memory,
/// SQLite and PostgreSQL stores, with a clock the test turns.
@Suite("Store history retention contract")
struct StoreRetentionContractTests {
    /// A test clock: a day at noon UTC, moved by the test.
    final class TestClock: @unchecked Sendable {
        private let lock = NSLock()
        private var date = Date(timeIntervalSince1970: 20_000 * 86_400 + 43_200)
        var now: Date { lock.withLock { date } }
        func advance(days: Double) { lock.withLock { date = date.addingTimeInterval(days * 86_400) } }
        var commitClock: CommitClock { CommitClock { [unowned self] in self.now } }
    }

    /// A store of `kind` keeping history as `retention` says, a milestone every `interval` ops.
    static func store(_ kind: StoreKind, _ retention: HistoryRetention, interval: Int, clock: TestClock,
                      directory: TemporaryDirectory) throws -> (any HistoryStore, PostgresSchema?) {
        switch kind {
        case .memory:
            return (MemoryStore(history: retention, milestoneInterval: interval, clock: { clock.now }), nil)
        case .sqlite:
            var options = SQLiteStore.Options(snapshotInterval: interval)
            options.history = retention
            options.clock = clock.commitClock
            return (try SQLiteStore(dataDirectory: directory.path, options: options), nil)
        case .postgres:
            let schema = try PostgresSchema()
            var options = schema.options(snapshotInterval: interval)
            options.history = retention
            options.clock = clock.commitClock
            options.stampsWithNodeClock = true
            return (try PostgresStore(url: schema.url, options: options), schema)
        }
    }

    /// Every state the ops make, from version 0.
    static func states(_ batches: [CommitBatch], id: String, epoch: String) throws -> [Workspace] {
        var state = Workspace(id: id, epoch: epoch)
        var all = [state]
        for batch in batches {
            for record in batch.records where record.workspaceId == id {
                guard case .applied(let ops) = record.outcome else { continue }
                for op in ops {
                    try state.apply(applied: op)
                    all.append(state)
                }
            }
        }
        return all
    }

    @Test(arguments: StoreKind.allCases)
    func theStateAtEveryVersionIsTheReplayOfItsOps(kind: StoreKind) throws {
        let clock = TestClock()
        let directory = TemporaryDirectory()
        let (store, schema) = try Self.store(kind, .standard, interval: 16, clock: clock, directory: directory)
        _ = schema
        var driver = Driver(epoch: store.epoch, limits: Limits(logRetention: 32))
        var batches: [CommitBatch] = []
        for seed in 1...12 {
            driver.mixedOps("w", count: 25, seed: UInt64(seed))
            let batch = driver.takeBatch()
            try store.commit(batch)
            batches.append(batch)
        }
        let expected = try Self.states(batches, id: "w", epoch: store.epoch)
        let reader = HistoryReader(store: store)
        for version in 0..<expected.count {
            guard case .state(let state) = try reader.answer(.version(UInt64(version)), workspaceId: "w") else {
                Issue.record("no state for v\(version)")
                continue
            }
            #expect(state.tabs == expected[version].tabs && state.activeTabId == expected[version].activeTabId
                    && state.editable == expected[version].editable && state.version == UInt64(version), "v\(version)")
        }
        // Far more ops than the resume window are kept (history), yet a load reads only the window.
        let loaded = try #require(try store.load(workspaceId: "w"))
        #expect(loaded.workspace.tabs == expected.last!.tabs)
        #expect(loaded.log.count <= 32 + 256 + 32, "load read \(loaded.log.count) ops")
        #expect(try store.history(workspaceId: "w", before: nil, limit: 10_000).count == expected.count - 1)
        #expect(throws: HistoryFailure.self) { try reader.answer(.version(UInt64(expected.count)), workspaceId: "w") }
    }

    /// PostgreSQL stamps ops with the test's clock here (``PostgresStore/Options/stampsWithNodeClock``).
    @Test(arguments: StoreKind.allCases)
    func opsOutliveTheirRetentionOnlyAsOneMilestoneADay(kind: StoreKind) throws {
        let clock = TestClock()
        let directory = TemporaryDirectory()
        let retention = try #require(HistoryRetention(parsing: "1d,3d"))
        let (store, schema) = try Self.store(kind, retention, interval: 8, clock: clock, directory: directory)
        _ = schema
        var driver = Driver(epoch: store.epoch, limits: Limits(logRetention: 8))
        var batches: [CommitBatch] = []
        var lastOfDay: [UInt64] = []
        for day in 0..<6 {
            for seed in 0..<4 {
                driver.mixedOps("w", count: 10, seed: UInt64(day * 10 + seed))
                let batch = driver.takeBatch()
                try store.commit(batch)
                batches.append(batch)
                clock.advance(days: 0.1)
            }
            lastOfDay.append(driver.sequencer("w").workspace.version)
            clock.advance(days: 0.6)
        }
        // Day 5 now: every op of days 4 and 5 kept, older ones gone but for one milestone a day
        // (days 2 and 3; day 1's and 0's fell out of the 3 days).
        let expected = try Self.states(batches, id: "w", epoch: store.epoch)
        let reader = HistoryReader(store: store)
        let kept = try store.history(workspaceId: "w", before: nil, limit: 10_000).map(\.op.version)
        let oldestKept = try #require(kept.last)
        #expect(oldestKept > lastOfDay[2] && oldestKept <= lastOfDay[3] + 1, "oldest kept op v\(oldestKept), days end at \(lastOfDay)")
        for day in [2, 3] {
            let milestone = try #require(try store.milestone(workspaceId: "w", atOrBefore: lastOfDay[day]))
            #expect(milestone.tabs == expected[Int(milestone.version)].tabs)
        }
        #expect(try store.milestone(workspaceId: "w", atOrBefore: lastOfDay[1]) == nil, "a milestone older than 3 days is kept")
        // A version of day 0 is refused, with the reason; a version of day 4 is replayed.
        #expect(throws: HistoryFailure.refused(.invalidArgument(
            "version 3 is outside the history this server keeps (--history-retention)"))) {
            try reader.answer(.version(3), workspaceId: "w")
        }
        let recent = lastOfDay[3] + 5
        guard case .state(let state) = try reader.answer(.version(recent), workspaceId: "w") else {
            Issue.record("no state")
            return
        }
        #expect(state.tabs == expected[Int(recent)].tabs)
        // The state at a time: day 3's last commit's state, from its milestone.
        guard case .state(let then) = try reader.answer(.time(clock.now.addingTimeInterval(-2 * 86_400 + 0.01 * 86_400)), workspaceId: "w")
        else {
            Issue.record("no state at a time")
            return
        }
        #expect(then.tabs == expected[Int(then.version)].tabs)
        #expect(throws: HistoryFailure.self) { try reader.answer(.time(Date(timeIntervalSince1970: 0)), workspaceId: "w") }
    }

    /// One node's stores stamp a workspace's batches in strictly increasing milliseconds, even when
    /// the clock stands still or steps back, so the time shown for an op names the state just after
    /// it (PostgreSQL keeps the database's clock: docs/design.md, "Reading history").
    @Test(arguments: [StoreKind.memory, .sqlite])
    func commitTimesStrictlyIncreaseSoAnOpsTimeNamesItsState(kind: StoreKind) throws {
        let clock = TestClock()
        let directory = TemporaryDirectory()
        let (store, _) = try Self.store(kind, .standard, interval: 16, clock: clock, directory: directory)
        var driver = Driver(epoch: store.epoch)
        for n in 1...4 {
            if n == 4 { clock.advance(days: -1) }
            driver.submit("w", "c", UInt64(n), .add(tab: Tab(id: "t\(n)"), place: .end, activate: false))
            try store.commit(driver.takeBatch())
        }
        let entries = try store.history(workspaceId: "w", before: nil, limit: 10).reversed()
        let shown = entries.map { Int64(($0.committedAt!.timeIntervalSince1970 * 1000).rounded(.down)) }
        #expect(shown == (0..<4).map { shown[0] + Int64($0) }, "\(shown)")
        for (entry, ms) in zip(entries, shown) {
            let at = Date(timeIntervalSince1970: Double(ms) / 1000)
            #expect(try store.version(workspaceId: "w", at: at) == entry.op.version, "at \(ms)")
        }
    }
}
