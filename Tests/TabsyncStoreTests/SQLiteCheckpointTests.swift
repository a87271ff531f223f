import Foundation
import Testing
import TabsyncCore
@testable import TabsyncStore
import TabsyncTestSupport

/// Where the SQLite store's WAL checkpoints run: in the background (never inside a commit, the WAL
/// bounded and truncated when idle) or, with `inline`, inside the commit that crosses SQLite's
/// threshold. Read from the store's trace and the `-wal` file.
@Suite("SQLite store checkpoints")
struct SQLiteCheckpointTests {
    /// Commits `rounds` batches of mixed ops on two workspaces; returns the driver.
    @discardableResult
    static func commit(_ store: SQLiteStore, rounds: Int, driver: inout Driver) throws -> Int {
        for round in 0..<rounds {
            driver.mixedOps("w\(round % 2)", count: 20, seed: UInt64(round))
            try store.commit(driver.takeBatch())
        }
        return rounds
    }

    /// The trace's commit lines as (records, checkpoint ms).
    static func commits(inTrace path: String) throws -> [(records: Int, checkpointMilliseconds: Double)] {
        try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n").compactMap { line in
            let fields = line.split(separator: " ")
            guard fields.count > 2, fields[1] == "commit" else { return nil }
            var values: [Substring: Substring] = [:]
            for field in fields.dropFirst(2) {
                let pair = field.split(separator: "=", maxSplits: 1)
                if pair.count == 2 { values[pair[0]] = pair[1] }
            }
            return (Int(values["records"] ?? "") ?? -1, Double(values["checkpoint_ms"] ?? "") ?? -1)
        }
    }

    static func walSize(_ store: SQLiteStore) -> Int {
        ((try? FileManager.default.attributesOfItem(atPath: store.path + "-wal"))?[.size] as? Int) ?? -1
    }

    @Test func backgroundCheckpointsRunOutsideEveryCommit() throws {
        let directory = TemporaryDirectory()
        var options = SQLiteStore.Options(tracePath: directory.path + "/trace")
        options.checkpointStartFrames = 20
        let store = try SQLiteStore(dataDirectory: directory.path + "/data", options: options)
        var driver = Driver(epoch: store.epoch)
        try Self.commit(store, rounds: 200, driver: &driver)
        // The checkpointer copies the WAL into the file while commits go on.
        #expect(waitUntil { (store.checkpointRuns?.passive ?? 0) > 0 })
        let commits = try Self.commits(inTrace: directory.path + "/trace")
        #expect(commits.count == 200)
        #expect(commits.allSatisfy { $0.checkpointMilliseconds == 0 }, "a checkpoint ran inside a commit")
        store.close()
        // Everything committed is there after the checkpoints.
        let reopened = try SQLiteStore(dataDirectory: directory.path + "/data")
        defer { reopened.close() }
        #expect(try reopened.load(workspaceId: "w0")?.workspace == driver.sequencer("w0").workspace)
        #expect(try reopened.load(workspaceId: "w1")?.workspace == driver.sequencer("w1").workspace)
    }

    @Test func inlineCheckpointsRunInsideTheCommitThatCrossesTheThreshold() throws {
        let directory = TemporaryDirectory()
        var options = SQLiteStore.Options(checkpoint: .inline, tracePath: directory.path + "/trace")
        options.checkpointStartFrames = 20
        let store = try SQLiteStore(dataDirectory: directory.path + "/data", options: options)
        defer { store.close() }
        var driver = Driver(epoch: store.epoch)
        try Self.commit(store, rounds: 200, driver: &driver)
        #expect(store.checkpointRuns == nil)
        let commits = try Self.commits(inTrace: directory.path + "/trace")
        #expect(commits.count == 200)
        #expect(commits.contains { $0.checkpointMilliseconds > 0 }, "no commit ran SQLite's checkpoint")
    }

    @Test func theWALIsRestartedPastItsLimit() throws {
        let directory = TemporaryDirectory()
        var options = SQLiteStore.Options(walLimitBytes: 64 << 10)
        options.checkpointStartFrames = 8
        let store = try SQLiteStore(dataDirectory: directory.path, options: options)
        defer { store.close() }
        var driver = Driver(epoch: store.epoch)
        var largest = 0
        for _ in 0..<20 {
            try Self.commit(store, rounds: 50, driver: &driver)
            largest = max(largest, Self.walSize(store))
            // The checkpointer runs beside the commits on a thread of its own, which a starved
            // machine may not schedule during a round (the WAL then grew past 4 MiB at a load of
            // 17-20): each round waits for it to run once more (a passive or restart, or the
            // idle truncate), so what is measured is its bound, not the scheduler's.
            let runs = store.checkpointRuns.map { $0.passive + $0.restart + $0.truncate } ?? 0
            #expect(waitUntil { (store.checkpointRuns.map { $0.passive + $0.restart + $0.truncate } ?? 0) > runs })
        }
        #expect(waitUntil { (store.checkpointRuns?.restart ?? 0) > 0 })
        // 1,000 commits of 20 ops write several MiB of WAL; the file stays near its limit.
        #expect(largest < 4 << 20, "the WAL grew to \(largest) bytes")
        #expect(try store.load(workspaceId: "w1")?.workspace == driver.sequencer("w1").workspace)
    }

    @Test func anIdleStoreTruncatesItsWAL() throws {
        let directory = TemporaryDirectory()
        var options = SQLiteStore.Options()
        options.idleCheckpointInterval = .milliseconds(50)
        let store = try SQLiteStore(dataDirectory: directory.path, options: options)
        defer { store.close() }
        var driver = Driver(epoch: store.epoch)
        try Self.commit(store, rounds: 20, driver: &driver)
        #expect(Self.walSize(store) > 0)
        // Counted once the checkpoint returns, just after the file is truncated: both are waited for.
        #expect(
            waitUntil { Self.walSize(store) == 0 && (store.checkpointRuns?.truncate ?? 0) > 0 },
            "the WAL still holds \(Self.walSize(store)) bytes")
        #expect(try store.load(workspaceId: "w0")?.workspace == driver.sequencer("w0").workspace)
    }
}
