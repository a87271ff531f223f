import Foundation
import Testing
import TabsyncCore
@testable import TabsyncStore
import TabsyncTestSupport

/// `--sync full` fsyncs the WAL at every commit; `normal` at none (only checkpoints sync), counted
/// at the VFS (``SyncCountingVFS``: the real files, every `xSync` SQLite makes).
@Suite("SQLite store sync modes", .serialized)
struct SQLiteSyncModeTests {
    @Test(arguments: SQLiteStore.Options.Sync.allCases)
    func walSyncsPerCommit(sync: SQLiteStore.Options.Sync) throws {
        SyncCountingVFS.register()
        let directory = TemporaryDirectory()
        var options = SQLiteStore.Options(sync: sync)
        options.vfs = SyncCountingVFS.name
        // No checkpoint during the commits: they sync too, and are not what is counted here.
        options.checkpointStartFrames = .max
        options.idleCheckpointInterval = .seconds(3_600)
        let store = try SQLiteStore(dataDirectory: directory.path, options: options)
        defer { store.close() }
        var driver = Driver(epoch: store.epoch)
        let before = SyncCountingVFS.walSyncs
        let commits = 25
        for round in 0..<commits {
            driver.mixedOps("w", count: 10, seed: UInt64(round))
            try store.commit(driver.takeBatch())
        }
        let syncs = SyncCountingVFS.walSyncs - before
        switch sync {
        case .full: #expect(syncs >= commits, "\(syncs) WAL syncs for \(commits) commits")
        case .normal: #expect(syncs == 0, "\(syncs) WAL syncs for \(commits) commits")
        }
        #expect(try store.load(workspaceId: "w")?.workspace == driver.sequencer("w").workspace)
    }

    @Test func backgroundCheckpointsSyncTheWALAndTheDatabase() throws {
        SyncCountingVFS.register()
        let directory = TemporaryDirectory()
        var options = SQLiteStore.Options(sync: .normal)
        options.vfs = SyncCountingVFS.name
        options.checkpointStartFrames = 10
        let store = try SQLiteStore(dataDirectory: directory.path, options: options)
        defer { store.close() }
        var driver = Driver(epoch: store.epoch)
        let wal = SyncCountingVFS.walSyncs
        let database = SyncCountingVFS.databaseSyncs
        for round in 0..<50 {
            driver.mixedOps("w", count: 10, seed: UInt64(round))
            try store.commit(driver.takeBatch())
        }
        // A checkpoint on the checkpointer's connection keeps the store's sync mode: WAL synced
        // before its pages are copied, the database file after.
        #expect(waitUntil { (store.checkpointRuns?.passive ?? 0) > 0 })
        #expect(waitUntil { SyncCountingVFS.walSyncs > wal && SyncCountingVFS.databaseSyncs > database })
    }
}
