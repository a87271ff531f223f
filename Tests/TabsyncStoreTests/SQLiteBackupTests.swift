import Foundation
import Testing
import TabsyncCore
@testable import TabsyncStore
import TabsyncTestSupport

/// ``SQLiteStore/backup(from:to:)``: a copy of a store that is being written, taken by another
/// connection as a server's backup would be: one consistent state, no older than when it began,
/// integrity-checked, never left half-written under its name, the source untouched.
@Suite("SQLite online backup", .serialized)
struct SQLiteBackupTests {
    @Test func aBackupTakenWhileCommitsGoOnIsWholeAndNoOlderThanItsStart() throws {
        let directory = TemporaryDirectory(prefix: "tabsync-backup")
        let store = try SQLiteStore(dataDirectory: directory.path)
        var driver = Driver(epoch: store.epoch)
        for w in 0..<20 { driver.mixedOps("w\(w)", count: 50, seed: UInt64(w)) }
        try store.commit(driver.takeBatch())
        let before = (0..<20).map { driver.sequencer("w\($0)").workspace.version }

        // A writer commits on another thread for as long as the backup runs.
        let stop = Shared(false)
        let commits = Shared(0)
        let start = driver
        let writer = Thread {
            var local = start
            var round: UInt64 = 0
            while !stop.load() {
                round += 1
                local.mixedOps("w\(round % 20)", count: 5, seed: 1_000 + round)
                if (try? store.commit(local.takeBatch())) != nil { commits.add(1) }
            }
        }
        writer.start()
        _ = waitUntil(deadline: .seconds(10)) { commits.load() >= 5 }
        let copy = directory.path + "/copy.sqlite3"
        let report = try SQLiteStore.backup(from: store.path, to: copy)
        stop.store(true)
        _ = waitUntil(deadline: .seconds(10)) { writer.isFinished }
        #expect(commits.load() >= 5, "nothing was written during the backup: it proves nothing")
        #expect(report.workspaces == 20)
        #expect(report.bytes > 0)
        #expect(!FileManager.default.fileExists(atPath: copy + ".partial"))
        #expect(!FileManager.default.fileExists(atPath: copy + "-wal"), "the copy is not one file")

        // The copy opens as a store of the same epoch, every workspace at or after its version
        // before the backup, its invariants whole.
        let restoredDirectory = TemporaryDirectory(prefix: "tabsync-restored")
        try FileManager.default.copyItem(atPath: copy, toPath: restoredDirectory.path + "/" + SQLiteStore.fileName)
        let restored = try SQLiteStore(dataDirectory: restoredDirectory.path)
        #expect(restored.epoch != store.epoch, "a backup copy starts a new epoch")
        for w in 0..<20 {
            let loaded = try #require(try restored.load(workspaceId: "w\(w)"))
            #expect(loaded.workspace.version >= before[w], "w\(w) is older in the copy than before the backup")
            #expect(loaded.workspace.invariantViolations(limits: Limits()).isEmpty)
        }
        // The source goes on as before.
        #expect(try store.load(workspaceId: "w0")?.workspace.version ?? 0 >= before[0])
    }

    /// The backup rule (docs/design.md, "Durability"): the copy is marked; the first open of it
    /// gives the store and every workspace a new epoch (snapshots and milestones rewritten) and
    /// clears the mark durably, so the second open keeps that epoch; the source keeps its own.
    @Test func theFirstStartOnABackupGivesEveryWorkspaceANewEpochAndTheSecondKeepsIt() throws {
        let directory = TemporaryDirectory(prefix: "tabsync-backup-epoch")
        let store = try SQLiteStore(dataDirectory: directory.path, options: .init(snapshotInterval: 4))
        var driver = Driver(epoch: store.epoch)
        for w in 0..<3 { driver.mixedOps("w\(w)", count: 20 + w, seed: UInt64(w)) }
        try store.commit(driver.takeBatch())
        let copy = directory.path + "/copy.sqlite3"
        _ = try SQLiteStore.backup(from: store.path, to: copy)
        let marked = try SQLiteConnection(path: copy, create: false)
        #expect(try SQLiteStore.backupMark(marked)?.contains(store.epoch) == true, "the copy is marked")
        #expect(try SQLiteStore.backupMark(SQLiteConnection(path: store.path, create: false)) == nil, "the source is not")
        marked.close()

        let restoredDirectory = TemporaryDirectory(prefix: "tabsync-restored")
        let file = restoredDirectory.path + "/" + SQLiteStore.fileName
        try FileManager.default.copyItem(atPath: copy, toPath: file)
        var epochs: [String] = []
        for start in 1...2 {
            let restored = try SQLiteStore(dataDirectory: restoredDirectory.path)
            epochs.append(restored.epoch)
            for w in 0..<3 {
                let loaded = try #require(try restored.load(workspaceId: "w\(w)"))
                let before = try #require(try store.load(workspaceId: "w\(w)"))
                #expect(loaded.workspace.epoch == restored.epoch, "start \(start): w\(w) keeps the backup's epoch")
                #expect(loaded.workspace.version == before.workspace.version)
                #expect(loaded.workspace.tabs == before.workspace.tabs)
                #expect(loaded.lastSeqs == before.lastSeqs, "dedup state survives")
            }
            restored.close()
        }
        #expect(epochs[0] != store.epoch)
        #expect(epochs[1] == epochs[0], "the mark is cleared durably: a second start keeps the new epoch")
        #expect(try SQLiteStore.backupMark(SQLiteConnection(path: file, create: false)) == nil)
        #expect(store.epoch == driver.epoch, "the source keeps its epoch")
    }

    @Test func aBackupNeverOverwritesAndRefusesWhatIsNotAStore() throws {
        let directory = TemporaryDirectory(prefix: "tabsync-backup")
        let store = try SQLiteStore(dataDirectory: directory.path)
        _ = store
        let taken = directory.path + "/taken"
        FileManager.default.createFile(atPath: taken, contents: Data("mine".utf8))
        #expect(throws: SQLiteStore.BackupError.destinationExists(path: taken)) {
            try SQLiteStore.backup(from: directory.path + "/" + SQLiteStore.fileName, to: taken)
        }
        #expect(try String(contentsOfFile: taken, encoding: .utf8) == "mine")
        #expect(throws: SQLiteStore.BackupError.noStore(path: directory.path + "/none")) {
            try SQLiteStore.backup(from: directory.path + "/none", to: directory.path + "/out")
        }
        let foreign = directory.path + "/foreign.sqlite3"
        let db = try SQLiteConnection(path: foreign)
        try db.execute("CREATE TABLE x (y)")
        db.close()
        do {
            _ = try SQLiteStore.backup(from: foreign, to: directory.path + "/out")
            Issue.record("a foreign database was backed up")
        } catch {
            guard case .notAStore = error else { Issue.record("\(error)"); return }
        }
        #expect(!FileManager.default.fileExists(atPath: directory.path + "/out"))
        #expect(!FileManager.default.fileExists(atPath: directory.path + "/out.partial"))
    }
}

/// A Bool and an Int shared with a thread, for the test above.
private final class Shared<Value: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value
    init(_ value: Value) { self.value = value }
    func load() -> Value { lock.withLock { value } }
    func store(_ new: Value) { lock.withLock { value = new } }
}

extension Shared where Value == Int {
    func add(_ n: Int) { lock.withLock { value += n } }
}
