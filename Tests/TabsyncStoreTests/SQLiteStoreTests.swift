import Foundation
import Testing
import TabsyncCore
@testable import TabsyncStore
import TabsyncTestSupport

/// What only the SQLite store adds to the contract: the file, its epoch, sync modes, refusal
/// answers and resume from the stored log.
@Suite("SQLite store")
struct SQLiteStoreTests {
    @Test func createsTheMissingDataDirectoryAndOneFile() throws {
        let directory = TemporaryDirectory()
        let dataDirectory = directory.path + "/nested/data"
        let store = try SQLiteStore(dataDirectory: dataDirectory)
        #expect(store.path == dataDirectory + "/tabsync.sqlite3")
        #expect(FileManager.default.fileExists(atPath: store.path))
        #expect(try store.rawQueryForTesting("PRAGMA journal_mode") == "wal")
        #expect(try store.rawQueryForTesting("PRAGMA user_version") == "\(SQLiteStore.schemaVersion)")
        #expect(try store.rawQueryForTesting("PRAGMA application_id") == "\(SQLiteStore.applicationId)")
    }

    @Test(arguments: SQLiteStore.Options.Sync.allCases)
    func syncModeIsApplied(sync: SQLiteStore.Options.Sync) throws {
        let directory = TemporaryDirectory()
        let store = try SQLiteStore(dataDirectory: directory.path, options: .init(sync: sync))
        // PRAGMA synchronous: 1 = NORMAL, 2 = FULL.
        #expect(try store.rawQueryForTesting("PRAGMA synchronous") == (sync == .full ? "2" : "1"))
    }

    @Test func epochSurvivesReopenAndAWipedStoreGetsANewOne() throws {
        let directory = TemporaryDirectory()
        var store: SQLiteStore? = try SQLiteStore(dataDirectory: directory.path)
        let first = try #require(store?.epoch)
        #expect(first.count == 16)
        store?.close()
        store = try SQLiteStore(dataDirectory: directory.path)
        #expect(store?.epoch == first)
        store?.close()
        try FileManager.default.removeItem(atPath: directory.path)
        store = try SQLiteStore(dataDirectory: directory.path)
        #expect(store?.epoch != first)
    }

    /// Refusals are kept across a reopen, to answer a resent seq again; each client's last seq is
    /// its last consumed one, refused or applied.
    @Test func refusalsAreKeptToAnswerAgainAcrossAReopen() throws {
        let directory = TemporaryDirectory()
        var store = try SQLiteStore(dataDirectory: directory.path)
        var driver = Driver(epoch: store.epoch)
        driver.submit("w", "c1", 1, .add(tab: Tab(id: "a"), place: .end, activate: true))
        driver.submit("w", "c1", 2, .add(tab: Tab(id: "a"), place: .end, activate: true))  // TAB_EXISTS
        driver.submit("w", "c2", 5, .update(TabUpdate(tabId: "gone", title: "x")))  // TAB_GONE
        driver.submit("w", "c3", 1, .setEditable(false))
        driver.submit("w", "c3", 2, .remove(tabId: "a"))  // NOT_EDITABLE
        driver.submit("w", "c3", 3, .setEditable(true))  // applied: c3's refusal is no longer its last
        try store.commit(driver.takeBatch())
        store.close()
        store = try SQLiteStore(dataDirectory: directory.path)
        let rejections = try #require(try store.load(workspaceId: "w")).rejections
        #expect(rejections.sorted { $0.clientId < $1.clientId } == [
            Sequencer.Rejection(clientId: "c1", seq: 2, error: .tabExists("a")),
            Sequencer.Rejection(clientId: "c2", seq: 5, error: .tabGone("gone")),
            Sequencer.Rejection(clientId: "c3", seq: 2, error: .notEditable),
        ])
        #expect(try store.load(workspaceId: "w")?.lastSeqs == ["c1": 2, "c2": 5, "c3": 3])
    }

    @Test func opsAfterAVersionComeFromTheStoredLogWithinItsWindow() throws {
        let directory = TemporaryDirectory()
        let store = try SQLiteStore(dataDirectory: directory.path, options: .init(snapshotInterval: 10))
        var driver = Driver(epoch: store.epoch, limits: Limits(logRetention: 30))
        while driver.sequencer("w").workspace.version < 100 {
            driver.mixedOps("w", count: 7, seed: driver.sequencer("w").workspace.version)
            try store.commit(driver.takeBatch())
        }
        let version = driver.sequencer("w").workspace.version
        let log = driver.sequencer("w").log
        let oldest = try #require(try store.load(workspaceId: "w")?.log.first?.version)
        #expect(oldest >= version - 29)

        #expect(try store.ops(workspaceId: "w", after: version, limit: .max) == [])
        let tail = try #require(try store.ops(workspaceId: "w", after: version - 5, limit: .max))
        #expect(tail == Array(log.suffix(5)))
        #expect(try store.ops(workspaceId: "w", after: oldest - 1, limit: .max)?.count == Int(version - oldest + 1))
        #expect(try store.ops(workspaceId: "w", after: oldest - 2, limit: .max) == nil)  // before the log: read it whole
        #expect(try store.ops(workspaceId: "w", after: version - 5, limit: 4) == Array(log.suffix(5).prefix(4)))
        #expect(try store.ops(workspaceId: "none", after: 0, limit: .max) == [])
    }

    @Test func closedStoreRefusesCalls() throws {
        let directory = TemporaryDirectory()
        let store = try SQLiteStore(dataDirectory: directory.path)
        store.close()
        #expect(throws: StoreError.self) { try store.load(workspaceId: "w") }
        #expect(throws: StoreError.self) {
            try store.commit(CommitBatch(records: [], workspaces: [:], logRetention: 10))
        }
    }

    /// Commit latency figures (not a gate): set TABSYNC_STORE_BENCH=1 to print them. Each batch is
    /// exactly 100 ops over 10 workspaces of about 50 tabs (adds, and removes past 50 tabs).
    @Test(.enabled(if: ProcessInfo.processInfo.environment["TABSYNC_STORE_BENCH"] == "1"), .serialized,
          arguments: SQLiteStore.Options.Sync.allCases)
    func commitLatencyOfBatchesOf100Ops(sync: SQLiteStore.Options.Sync) throws {
        let directory = TemporaryDirectory()
        let store = try SQLiteStore(dataDirectory: directory.path, options: .init(sync: sync))
        var driver = Driver(epoch: store.epoch)
        var samples: [Duration] = []
        let clock = ContinuousClock()
        for round in 0..<300 {
            for w in 0..<10 {
                let id = "w\(w)"
                for i in 0..<10 {
                    let seq = driver.sequencer(id).lastSeq(of: "c") + 1
                    let tabs = driver.sequencer(id).workspace.tabs
                    if tabs.count >= 50 {
                        driver.submit(id, "c", seq, .remove(tabId: tabs[0].id))
                    } else {
                        let tab = "t\(round)-\(i)"
                        driver.submit(
                            id, "c", seq,
                            .add(tab: Tab(id: tab, title: "Tab \(tab)", url: "https://example.com/\(tab)"), place: .end, activate: true))
                    }
                }
            }
            let batch = driver.takeBatch()
            #expect(batch.records.count == 100)
            samples.append(try clock.measure { try store.commit(batch) })
        }
        samples.sort()
        let version = driver.sequencer("w0").workspace.version
        var loads: [Duration] = []
        for _ in 0..<5 { loads.append(try clock.measure { _ = try store.load(workspaceId: "w0") }) }
        loads.sort()
        print("""
            sync \(sync): commit of a 100-op batch: median \(samples[samples.count / 2]), \
            p90 \(samples[samples.count * 9 / 10]), max \(samples.last!); \
            load of a workspace at version \(version) (log \(version) ops, 50 tabs): median \(loads[2])
            """)
    }
}
