import CSQLite
import Foundation
import Synchronization

/// A SQLite VFS that forwards everything to the default one (the real unix VFS, real files) and
/// counts the `xSync` calls (fsync/fdatasync) made on `-wal` files and on main database files.
///
/// Registered once under ``name`` (not as the default); a store opened with `Options.vfs = name`
/// uses it on every connection. The counts are process-wide: a test that reads them runs serialized
/// and is the only user of this VFS.
enum SyncCountingVFS {
    static let name = "tabsync-sync-counting"

    /// `xSync` calls on `-wal` files so far.
    static var walSyncs: Int { walSyncCount.load(ordering: .relaxed) }
    /// `xSync` calls on main database files so far.
    static var databaseSyncs: Int { databaseSyncCount.load(ordering: .relaxed) }

    /// Registers the VFS (once; later calls do nothing).
    static func register() {
        _ = registered
    }

    private static let registered: Bool = {
        guard let base = sqlite3_vfs_find(nil) else { return false }
        baseVFS = base
        let methods = UnsafeMutablePointer<sqlite3_io_methods>.allocate(capacity: 1)
        methods.initialize(to: forwardingMethods())
        ioMethods = methods
        let vfs = UnsafeMutablePointer<sqlite3_vfs>.allocate(capacity: 1)
        vfs.initialize(to: base.pointee)
        vfs.pointee.pNext = nil
        vfs.pointee.zName = UnsafePointer(strdup(name))
        vfs.pointee.szOsFile = base.pointee.szOsFile + Int32(headerBytes)
        vfs.pointee.xOpen = { _, name, file, flags, outFlags in
            let base = baseVFS!
            let wrapped = inner(file)
            wrapped.pointee.pMethods = nil
            let rc = base.pointee.xOpen!(base, name, wrapped, flags, outFlags)
            guard wrapped.pointee.pMethods != nil else {
                file!.pointee.pMethods = nil
                return rc
            }
            UnsafeMutableRawPointer(file!).storeBytes(of: flags, toByteOffset: 8, as: Int32.self)
            file!.pointee.pMethods = UnsafePointer(ioMethods!)
            return rc
        }
        return sqlite3_vfs_register(vfs, 0) == SQLITE_OK
    }()

    fileprivate static func forwardingMethods() -> sqlite3_io_methods {
        var m = sqlite3_io_methods()
        m.iVersion = 3
        m.xClose = { f in let i = inner(f); return methods(i).xClose!(i) }
        m.xRead = { f, buffer, amount, offset in let i = inner(f); return methods(i).xRead!(i, buffer, amount, offset) }
        m.xWrite = { f, buffer, amount, offset in let i = inner(f); return methods(i).xWrite!(i, buffer, amount, offset) }
        m.xTruncate = { f, size in let i = inner(f); return methods(i).xTruncate!(i, size) }
        m.xSync = { f, flags in
            let openFlags = UnsafeMutableRawPointer(f!).load(fromByteOffset: 8, as: Int32.self)
            if openFlags & SQLITE_OPEN_WAL != 0 { walSyncCount.add(1, ordering: .relaxed) }
            if openFlags & SQLITE_OPEN_MAIN_DB != 0 { databaseSyncCount.add(1, ordering: .relaxed) }
            let i = inner(f)
            return methods(i).xSync!(i, flags)
        }
        m.xFileSize = { f, size in let i = inner(f); return methods(i).xFileSize!(i, size) }
        m.xLock = { f, level in let i = inner(f); return methods(i).xLock!(i, level) }
        m.xUnlock = { f, level in let i = inner(f); return methods(i).xUnlock!(i, level) }
        m.xCheckReservedLock = { f, out in let i = inner(f); return methods(i).xCheckReservedLock!(i, out) }
        m.xFileControl = { f, op, arg in let i = inner(f); return methods(i).xFileControl!(i, op, arg) }
        m.xSectorSize = { f in let i = inner(f); return methods(i).xSectorSize!(i) }
        m.xDeviceCharacteristics = { f in let i = inner(f); return methods(i).xDeviceCharacteristics!(i) }
        m.xShmMap = { f, region, size, extend, out in let i = inner(f); return methods(i).xShmMap!(i, region, size, extend, out) }
        m.xShmLock = { f, offset, n, flags in let i = inner(f); return methods(i).xShmLock!(i, offset, n, flags) }
        m.xShmBarrier = { f in let i = inner(f); methods(i).xShmBarrier!(i) }
        m.xShmUnmap = { f, delete in let i = inner(f); return methods(i).xShmUnmap!(i, delete) }
        m.xFetch = { f, offset, amount, out in let i = inner(f); return methods(i).xFetch!(i, offset, amount, out) }
        m.xUnfetch = { f, offset, pointer in let i = inner(f); return methods(i).xUnfetch!(i, offset, pointer) }
        return m
    }
}

// File-level, not static members: a closure that becomes a C function pointer cannot capture the
// enum's metatype.

/// Our file: `sqlite3_file` (the methods pointer), the open flags, then the default VFS's file.
private let headerBytes = 16
private nonisolated(unsafe) var baseVFS: UnsafeMutablePointer<sqlite3_vfs>?
private nonisolated(unsafe) var ioMethods: UnsafeMutablePointer<sqlite3_io_methods>?
private let walSyncCount = Atomic<Int>(0)
private let databaseSyncCount = Atomic<Int>(0)

private func inner(_ file: UnsafeMutablePointer<sqlite3_file>?) -> UnsafeMutablePointer<sqlite3_file> {
    UnsafeMutableRawPointer(file!).advanced(by: headerBytes).assumingMemoryBound(to: sqlite3_file.self)
}

private func methods(_ file: UnsafeMutablePointer<sqlite3_file>) -> sqlite3_io_methods {
    file.pointee.pMethods.pointee
}
