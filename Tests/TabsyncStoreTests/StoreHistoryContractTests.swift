import Foundation
import Testing
import TabsyncCore
@testable import TabsyncStore
import TabsyncTestSupport

/// Who and when on every stored op (``HistoryStore``), the admin side (``AdminStore``), and a file
/// made by the release before history, migrated: on the memory, SQLite and PostgreSQL stores.
@Suite("Store history and admin contract")
struct StoreHistoryContractTests {
    @Test(arguments: StoreKind.allCases)
    func everyOpKeepsItsAuthorAndCommitTimeNewestFirst(kind: StoreKind) throws {
        let harness = try StoreHarness(kind)
        var driver = Driver(epoch: harness.store.epoch)
        driver.submit("w", "c1", 1, .add(tab: Tab(id: "a", title: "A"), place: .end, activate: true))
        driver.submit("w", "c2", 1, .add(tab: Tab(id: "b", title: "B"), place: .end, activate: false))
        var batch = driver.takeBatch()
        batch.records[0].author = "alice"
        batch.records[1].author = "bob"
        let before = Date().addingTimeInterval(-1)
        try harness.store.commit(batch)
        driver.submit("w", "c1", 2, .remove(tabId: "b"))
        var second = driver.takeBatch()
        second.records[0].author = "alice"
        try harness.store.commit(second)
        let after = Date().addingTimeInterval(1)
        try harness.restart()

        let history = try #require(harness.store as? any HistoryStore)
        let all = try history.history(workspaceId: "w", before: nil, limit: 10)
        #expect(all.map(\.op.version) == [3, 2, 1])
        #expect(all.map(\.author) == ["alice", "bob", "alice"])
        #expect(all.map(\.op.clientId) == ["c1", "c2", "c1"])
        for entry in all {
            let at = try #require(entry.committedAt)
            #expect(at > before && at < after, "committed at \(at)")
        }
        #expect(try history.history(workspaceId: "w", before: 3, limit: 1).map(\.op.version) == [2])
        #expect(try history.history(workspaceId: "w", before: 1, limit: 5).isEmpty)
        #expect(try history.history(workspaceId: "nothing", before: nil, limit: 5).isEmpty)
        // An op's time as shown (to the millisecond) names it: the state then includes it.
        for entry in all {
            let shown = Date(timeIntervalSince1970: (entry.committedAt!.timeIntervalSince1970 * 1000).rounded(.down) / 1000)
            #expect(try history.version(workspaceId: "w", at: shown).map { $0 >= entry.op.version } == true, "v\(entry.op.version)")
        }
        // Exactly the stored log, as the resume path reads it.
        #expect(all.reversed().map(\.op) == (try #require(try harness.store.load(workspaceId: "w"))).log)
    }

    @Test(arguments: StoreKind.allCases)
    func aDeleteLeavesATombstoneUnderANewEpochAndASecondDeleteKeepsIt(kind: StoreKind) throws {
        let harness = try StoreHarness(kind)
        var driver = Driver(epoch: harness.store.epoch)
        driver.submit("gone", "c1", 1, .add(tab: Tab(id: "a"), place: .end, activate: true))
        driver.submit("kept", "c1", 1, .add(tab: Tab(id: "a"), place: .end, activate: true))
        try harness.store.commit(driver.takeBatch())
        let admin = try #require(harness.store as? any AdminStore)
        #expect(try admin.workspaceIds(after: nil, limit: 10) == ["gone", "kept"])
        #expect(try admin.deleteWorkspace("gone"))
        let tombstone = try #require(try harness.store.load(workspaceId: "gone"))
        #expect(tombstone.workspace.version == 0 && tombstone.workspace.tabs.isEmpty && tombstone.log.isEmpty)
        #expect(tombstone.workspace.epoch != harness.store.epoch)
        #expect(try !admin.deleteWorkspace("gone"))
        #expect(try harness.store.load(workspaceId: "gone")?.workspace.epoch == tombstone.workspace.epoch)
        #expect(try admin.workspaceIds(after: nil, limit: 10) == ["kept"])
        #expect(try admin.workspaceSummaries(after: nil, limit: 10).map(\.tabs) == [1])
    }

    @Test(arguments: StoreKind.allCases)
    func theAdminLogKeepsOrderAndOutlivesARestart(kind: StoreKind) throws {
        let harness = try StoreHarness(kind)
        let admin = try #require(harness.store as? any AdminStore)
        let first = try admin.appendAdminCommand(.revokeToken(jti: "j1"))
        let second = try admin.appendAdminCommand(.kickSubject(sub: "bob", workspaces: "team-*"))
        #expect(second.number > first.number)
        try harness.restart()
        let again = try #require(harness.store as? any AdminStore)
        #expect(try again.adminEntries(after: 0).map(\.command) == [.revokeToken(jti: "j1"), .kickSubject(sub: "bob", workspaces: "team-*")])
        #expect(try again.adminEntries(after: first.number).map(\.number) == [second.number])
    }

    /// A store file written by the release before history (schema 3: tests/Fixtures/store-schema3.sqlite3,
    /// made by `tabsync` commands on that release) opens, migrates, keeps everything, and its old
    /// ops read back without author or time while new ones have both.
    @Test func aStoreMadeByThePreviousReleaseIsMigrated() throws {
        let directory = TemporaryDirectory()
        let path = try fixtureCopy("store-schema3.sqlite3", in: directory)
        let store = try SQLiteStore(path: path)
        defer { store.close() }
        #expect(try store.rawQueryForTesting("PRAGMA user_version") == "\(SQLiteStore.schemaVersion)")
        let stored = try #require(try store.load(workspaceId: "fixture"))
        #expect(stored.workspace.version == 7)
        #expect(stored.workspace.tabs.map(\.title) == ["News", "Today"])
        let old = try store.history(workspaceId: "fixture", before: nil, limit: 100)
        #expect(old.map(\.op.version) == Array((1...7).reversed()))
        #expect(old.allSatisfy { $0.author == "" && $0.committedAt == nil })

        var sequencer = stored.sequencer(limits: Limits())
        let outcome = sequencer.submit(clientId: "c9", seq: 1, baseVersion: 7, op: .remove(tabId: stored.workspace.tabs[0].id))
        var record = try #require(CommitRecord(workspaceId: "fixture", clientId: "c9", seq: 1, outcome: outcome, after: sequencer))
        record.author = "carol"
        try store.commit(CommitBatch(records: [record], workspaces: ["fixture": sequencer.workspace], logRetention: 10_000))
        let newest = try #require(try store.history(workspaceId: "fixture", before: nil, limit: 1).first)
        #expect(newest.op.version == 8 && newest.author == "carol" && newest.committedAt != nil)
    }
}
