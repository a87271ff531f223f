import Foundation
import Testing
import TabsyncCore
@testable import TabsyncStore
import TabsyncTestSupport

/// Tab groups in every store (docs/design.md, "Tab groups"; schema version 6 for SQLite, 7 for
/// PostgreSQL): the groups and each tab's group survive a restart, the stored ops replay to the same
/// state, history answers a past state with its groups, and a file written by the release before
/// groups opens, migrates and takes group ops.
@Suite("Store contract: tab groups")
struct StoreGroupsContractTests {
    /// Group, move into and out of a group, rename and ungroup, committed in two batches.
    static func groupedDriver(epoch: String) -> (Driver, [CommitBatch]) {
        var driver = Driver(epoch: epoch)
        for id in ["a", "b", "c", "d"] {
            driver.submit("w", "c1", UInt64(driver.sequencer("w").workspace.tabs.count + 1),
                          .add(tab: Tab(id: id, title: id.uppercased()), place: .end, activate: false))
        }
        let first = driver.takeBatch()
        driver.submit("w", "c1", 5, .group(GroupTabs(tabIds: ["b", "c"], groupId: "G", title: "Work", color: "blue")))
        driver.submit("w", "c1", 6, .group(GroupTabs(tabIds: ["d"], groupId: "H", color: "red")))
        driver.submit("w", "c1", 7, .move(tabId: "a", place: .index(1)))  // between b(G) and c(G): joins G
        driver.submit("w", "c1", 8, .updateGroup(GroupUpdate(groupId: "G", title: "Deep work")))
        driver.submit("w", "c1", 9, .ungroup(UngroupTabs(tabIds: ["d"])))  // H's last tab: H is gone
        return (driver, [first, driver.takeBatch()])
    }

    @Test(arguments: StoreKind.allCases)
    func groupsSurviveARestartAndTheLogReplaysToThem(kind: StoreKind) throws {
        let harness = try StoreHarness(kind)
        let (driver, batches) = Self.groupedDriver(epoch: harness.store.epoch)
        for batch in batches { try harness.store.commit(batch) }
        let expected = driver.sequencer("w").workspace
        #expect(GroupNotation.text(expected) == "b(G) a(G) c(G) d")
        #expect(expected.groups == [TabGroup(id: "G", title: "Deep work", color: "blue")])
        try harness.restart()

        let stored = try #require(try harness.store.load(workspaceId: "w"))
        #expect(stored.workspace == expected)
        var replayed = Workspace(id: "w", epoch: expected.epoch)
        for applied in try #require(try harness.store.ops(workspaceId: "w", after: 0, limit: 100)) {
            try replayed.apply(applied: applied)
        }
        #expect(replayed == expected, "the stored ops carry every group and placement")

        let history = try #require(harness.store as? any HistoryStore)
        guard case .state(let past) = try HistoryReader(store: history).answer(.version(6), workspaceId: "w") else {
            Issue.record("no state at version 6")
            return
        }
        #expect(GroupNotation.text(past) == "a b(G) c(G) d(H)")
        #expect(past.groups.map(\.id) == ["G", "H"])
    }

    /// A store file written by the release before groups (schema 5: Fixtures/store-schema5.sqlite3, made
    /// by `tabsync add`, `mv`, `rename` and `rm` on that release) opens, migrates to schema 6, keeps
    /// everything, and takes a group that survives a reopen.
    @Test func aStoreMadeByTheReleaseBeforeGroupsIsMigrated() throws {
        let directory = TemporaryDirectory()
        let fixture = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("Fixtures/store-schema5.sqlite3").path
        let path = directory.path + "/tabsync.sqlite3"
        try FileManager.default.copyItem(atPath: fixture, toPath: path)
        var store = try SQLiteStore(path: path)
        #expect(try store.rawQueryForTesting("PRAGMA user_version") == "\(SQLiteStore.schemaVersion)")
        #expect(SQLiteStore.schemaVersion == 6)
        let stored = try #require(try store.load(workspaceId: "fixture"))
        #expect(stored.workspace.version == 6)
        #expect(stored.workspace.tabs.map(\.title) == ["Mail", "Today's"])
        #expect(stored.workspace.groups.isEmpty && stored.workspace.tabs.allSatisfy { $0.group.isEmpty })

        var sequencer = stored.sequencer(limits: Limits())
        let ids = stored.workspace.tabs.map(\.id)
        let outcome = sequencer.submit(clientId: "c9", seq: 1, baseVersion: 6,
                                       op: .group(GroupTabs(tabIds: ids, groupId: "g1", title: "Inbox", color: "green")))
        let record = try #require(CommitRecord(workspaceId: "fixture", clientId: "c9", seq: 1, outcome: outcome, after: sequencer))
        try store.commit(CommitBatch(records: [record], workspaces: ["fixture": sequencer.workspace], logRetention: 10_000))
        store.close()

        store = try SQLiteStore(path: path)
        defer { store.close() }
        let reopened = try #require(try store.load(workspaceId: "fixture"))
        #expect(reopened.workspace.groups == [TabGroup(id: "g1", title: "Inbox", color: "green")])
        #expect(reopened.workspace.tabs.map(\.group) == ["g1", "g1"])
        #expect(try store.rawQueryForTesting("SELECT count(*) FROM meta WHERE key = 'tab_groups'") == "1")
    }
}
