import Foundation
import Testing
import TabsyncCore
@testable import TabsyncStore
import TabsyncTestSupport

/// Faults get a clear answer: bad files are refused untouched at open; a read-only or full disk
/// refuses commits whole (`StoreError`, sent as UNAVAILABLE), reads go on, writes come back.
@Suite("SQLite store faults")
struct SQLiteStoreFaultTests {
    private static func bytes(_ path: String) -> Data? { FileManager.default.contents(atPath: path) }

    @Test func garbageFileIsRefusedNamedAndUntouched() throws {
        let directory = TemporaryDirectory()
        let path = directory.path + "/" + SQLiteStore.fileName
        var garbage = Data((0..<8192).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) })
        garbage.replaceSubrange(0..<16, with: Data("not a database!!".utf8))
        _ = FileManager.default.createFile(atPath: path, contents: garbage)
        #expect {
            _ = try SQLiteStore(dataDirectory: directory.path)
        } throws: { error in
            guard case .corrupt(let named, _) = error as? SQLiteStore.OpenError else { return false }
            return named == path && "\(error)".contains(path)
        }
        #expect(Self.bytes(path) == garbage)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path) == [SQLiteStore.fileName])
    }

    @Test func anotherApplicationsDatabaseIsRefusedNamedAndUntouched() throws {
        let directory = TemporaryDirectory()
        let path = directory.path + "/" + SQLiteStore.fileName
        do {
            let other = try SQLiteConnection(path: path)
            try other.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO users (name) VALUES ('ann')")
            other.close()
        }
        let before = try #require(Self.bytes(path))
        #expect {
            _ = try SQLiteStore(dataDirectory: directory.path)
        } throws: { error in
            guard case .foreign(let named, let reason) = error as? SQLiteStore.OpenError else { return false }
            return named == path && reason.contains("users")
        }
        #expect(Self.bytes(path) == before)
    }

    @Test func damagedStoreIsRefusedAtOpen() throws {
        let directory = TemporaryDirectory()
        var store: SQLiteStore? = try SQLiteStore(dataDirectory: directory.path)
        var driver = Driver(epoch: store!.epoch)
        for w in 0..<20 { driver.mixedOps("w\(w)", count: 60, seed: UInt64(w)) }
        try store!.commit(driver.takeBatch())
        store!.close()
        store = nil
        let path = directory.path + "/" + SQLiteStore.fileName
        var data = try #require(Self.bytes(path))
        #expect(data.count > 4 * 4096)
        // Overwrite the second page (a b-tree page) with noise; the header stays valid.
        data.replaceSubrange(4096..<8192, with: Data(repeating: 0xA5, count: 4096))
        try data.write(to: URL(fileURLWithPath: path))
        #expect {
            _ = try SQLiteStore(dataDirectory: directory.path)
        } throws: { error in
            guard case .corrupt(let named, _) = error as? SQLiteStore.OpenError else { return false }
            return named == path
        }
        #expect(Self.bytes(path) == data)
    }

    @Test func newerSchemaIsRefused() throws {
        let directory = TemporaryDirectory()
        try SQLiteStore(dataDirectory: directory.path).close()
        let path = directory.path + "/" + SQLiteStore.fileName
        do {
            let db = try SQLiteConnection(path: path)
            try db.execute("PRAGMA user_version = 99")
            db.close()
        }
        #expect(throws: SQLiteStore.OpenError.newerSchema(path: path, found: 99, supported: SQLiteStore.schemaVersion)) {
            _ = try SQLiteStore(dataDirectory: directory.path)
        }
    }

    /// A full disk: a 1 MiB tmpfs filled up (needs root), and `PRAGMA max_page_count` capping the
    /// file (runs anywhere): the commit throws, nothing of it is kept, reads go on, and the next
    /// commit succeeds once there is room again.
    @Test(arguments: [true, false])
    func fullDiskRefusesTheWholeBatchAndWritesResume(onTmpfs: Bool) throws {
        let mount = onTmpfs ? TmpfsMount(sizeKilobytes: 1024) : nil
        if onTmpfs && mount == nil {
            print("full-disk test on tmpfs skipped: mounting is not allowed here (the page-cap variant runs)")
            return
        }
        let directory = TemporaryDirectory()
        let dataDirectory = (mount?.path ?? directory.path) + "/data"
        let store = try SQLiteStore(dataDirectory: dataDirectory)
        var driver = Driver(epoch: store.epoch)
        driver.mixedOps("w", count: 30, seed: 9)
        try store.commit(driver.takeBatch())
        let committed = try store.load(workspaceId: "w")
        let filler = (mount?.path ?? directory.path) + "/filler"

        if mount != nil {
            // Fill the filesystem.
            let handle = try #require({ _ = FileManager.default.createFile(atPath: filler, contents: nil); return FileHandle(forWritingAtPath: filler) }())
            let chunk = Data(repeating: 1, count: 64 * 1024)
            while (try? handle.write(contentsOf: chunk)) != nil {}
            try? handle.close()
        } else {
            let pages = try #require(try store.rawQueryForTesting("PRAGMA page_count"))
            _ = try store.rawQueryForTesting("PRAGMA max_page_count = \(pages)")
        }

        // A big batch across workspaces: it cannot fit.
        var failing = driver
        for w in 0..<40 {
            for i in 0..<40 {
                let id = "big\(w)"
                failing.submit(id, "c", UInt64(i + 1), .add(tab: Tab(id: "t\(i)", title: String(repeating: "x", count: 200), url: "https://example.com/" + String(repeating: "y", count: 500)), place: .end, activate: true))
            }
        }
        failing.submit("w", "alice", failing.sequencer("w").lastSeq(of: "alice") + 1, .setEditable(true))
        #expect {
            try store.commit(failing.takeBatch())
        } throws: { error in
            guard case .writeFailed(let why) = error as? StoreError else { return false }
            return why.contains("full")
        }
        #expect(try store.load(workspaceId: "w") == committed)
        #expect(try store.load(workspaceId: "big0") == nil)
        #expect(try store.load(workspaceId: "big39") == nil)

        // Room again: writes resume.
        if mount != nil {
            try FileManager.default.removeItem(atPath: filler)
        } else {
            _ = try store.rawQueryForTesting("PRAGMA max_page_count = 1073741823")
        }
        driver.mixedOps("w", count: 10, seed: 10)
        try store.commit(driver.takeBatch())
        store.close()
        let reopened = try SQLiteStore(dataDirectory: dataDirectory)
        #expect(try reopened.load(workspaceId: "w")?.workspace == driver.sequencer("w").workspace)
        reopened.close()
    }

    /// A read-only data directory (a tmpfs remounted read-only; needs root): the store opens for
    /// reading, commits throw and keep nothing, and writes resume once it is writable again.
    @Test func readOnlyDirectoryRefusesCommitsKeepsReadsAndRecovers() throws {
        guard let mount = TmpfsMount(sizeKilobytes: 4096) else {
            print("read-only directory test skipped: mounting a tmpfs is not allowed here")
            return
        }
        let dataDirectory = mount.path + "/data"
        var driver: Driver
        do {
            let store = try SQLiteStore(dataDirectory: dataDirectory)
            driver = Driver(epoch: store.epoch)
            driver.mixedOps("w", count: 40, seed: 4)
            try store.commit(driver.takeBatch())
            store.close()
        }
        #expect(mount.remount(readOnly: true))
        defer { _ = mount.remount(readOnly: false) }

        let store = try SQLiteStore(dataDirectory: dataDirectory)
        #expect(store.isReadOnly)
        let stored = try store.load(workspaceId: "w")
        #expect(stored?.workspace == driver.sequencer("w").workspace)

        var refused = driver
        refused.mixedOps("w", count: 5, seed: 5)
        #expect {
            try store.commit(refused.takeBatch())
        } throws: { error in
            guard case .writeFailed = error as? StoreError else { return false }
            return true
        }
        #expect(try store.load(workspaceId: "w") == stored)

        #expect(mount.remount(readOnly: false))
        driver.mixedOps("w", count: 5, seed: 6)
        try store.commit(driver.takeBatch())
        #expect(!store.isReadOnly)
        #expect(try store.load(workspaceId: "w")?.workspace == driver.sequencer("w").workspace)
        store.close()
    }

    @Test func newStoreInAReadOnlyPlaceIsRefusedAtOpen() throws {
        guard let mount = TmpfsMount(sizeKilobytes: 512) else { return }
        try FileManager.default.createDirectory(atPath: mount.path + "/data", withIntermediateDirectories: true)
        #expect(mount.remount(readOnly: true))
        defer { _ = mount.remount(readOnly: false) }
        #expect(throws: SQLiteStore.OpenError.self) { _ = try SQLiteStore(dataDirectory: mount.path + "/data") }
    }
}
