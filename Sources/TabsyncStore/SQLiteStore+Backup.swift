import CSQLite
import Foundation

/// The online backup of a SQLite store: a copy taken while a server serves the file
/// (docs/operating.md, "Backups").
extension SQLiteStore {
    /// What a backup made.
    public struct BackupReport: Sendable, Equatable {
        /// The store file copied.
        public var source: String
        /// The copy, one self-contained file (no `-wal` beside it).
        public var destination: String
        public var bytes: Int64
        /// Workspaces in the copy.
        public var workspaces: Int
        /// The highest workspace version in the copy.
        public var maxVersion: UInt64
    }

    /// Why a backup was not made. Whatever the reason, the source is untouched and no file is left
    /// at the destination.
    public enum BackupError: Error, Sendable, Equatable, CustomStringConvertible {
        /// No store file at the source path.
        case noStore(path: String)
        /// The source is not a tabsync store.
        case notAStore(path: String, reason: String)
        /// A file is already at the destination: a backup never overwrites one.
        case destinationExists(path: String)
        /// SQLite could not read the source or write the copy (the reason says which).
        case failed(reason: String)
        /// The copy did not pass `PRAGMA integrity_check`; it was removed.
        case damagedCopy(reason: String)

        public var description: String {
            switch self {
            case .noStore(let path): "no tabsync store at \(path)"
            case .notAStore(let path, let reason): "\(path) is not a tabsync store (\(reason))"
            case .destinationExists(let path): "\(path) already exists: a backup never overwrites a file"
            case .failed(let reason): "the backup failed: \(reason)"
            case .damagedCopy(let reason): "the copy failed its integrity check and was removed: \(reason)"
            }
        }
    }

    /// Copies the store file at `source` to `destination` while a server may be writing it.
    ///
    /// Guarantees: the copy is one consistent state of the store, taken in one read transaction
    /// (in WAL mode a reader never blocks the server's commits, and they never disturb it), so
    /// every workspace in it is at a version no older than when the backup began; it is written
    /// beside the destination under a temporary name, synced, checked with `PRAGMA
    /// integrity_check`, and renamed into place only then, so a backup killed midway leaves at
    /// most that temporary file and never a partial copy under the destination's name. The
    /// source is only read: no checkpoint, no write. The copy is marked as one: the first server
    /// started on it gives every workspace a new epoch (docs/design.md, "Durability").
    public static func backup(from source: String, to destination: String) throws(BackupError) -> BackupReport {
        let files = FileManager.default
        guard files.fileExists(atPath: source) else { throw .noStore(path: source) }
        guard !files.fileExists(atPath: destination) else { throw .destinationExists(path: destination) }
        let partial = destination + ".partial"
        try? files.removeItem(atPath: partial)
        var done = false
        defer { if !done { try? files.removeItem(atPath: partial) } }

        let from: SQLiteConnection
        do throws(SQLiteError) {
            from = try SQLiteConnection(path: source, create: false)
            guard try from.scalarText("SELECT value FROM meta WHERE key = 'epoch'") != nil else {
                throw SQLiteError(code: SQLITE_CORRUPT, message: "no epoch in meta", context: "read epoch")
            }
        } catch {
            throw .notAStore(path: source, reason: error.message)
        }
        defer { from.closeWithoutCheckpoint() }

        do throws(SQLiteError) {
            let to = try SQLiteConnection(path: partial, create: true)
            defer { to.close() }
            try to.execute("PRAGMA synchronous = FULL")
            guard let backup = sqlite3_backup_init(to.handle, "main", from.handle, "main") else {
                throw SQLiteError.make(sqlite3_errcode(to.handle), to.handle, "backup_init")
            }
            // All pages in one step: one read transaction, one consistent state. A step that finds
            // the source locked (a checkpoint restarting the WAL) is tried again for a while.
            var rc = SQLITE_OK
            let deadline = ContinuousClock.now + .seconds(30)
            repeat {
                rc = sqlite3_backup_step(backup, -1)
                if rc == SQLITE_BUSY || rc == SQLITE_LOCKED { usleep(20_000) }
            } while (rc == SQLITE_BUSY || rc == SQLITE_LOCKED) && ContinuousClock.now < deadline
            let finished = sqlite3_backup_finish(backup)
            guard rc == SQLITE_DONE else { throw SQLiteError.make(rc, to.handle, "backup_step") }
            guard finished == SQLITE_OK else { throw SQLiteError.make(finished, to.handle, "backup_finish") }
            // One self-contained file: the copy leaves WAL mode (a server sets it again at open).
            _ = try to.scalarText("PRAGMA journal_mode = DELETE")
            // Marked: the first start on it gives every workspace a new epoch (SQLiteStore+BackupMark.swift).
            let sourceEpoch = try to.scalarText("SELECT value FROM meta WHERE key = 'epoch'") ?? ""
            try markAsBackup(to, note: "copied from \(source) (epoch \(sourceEpoch))")
            let check = try to.scalarText("PRAGMA integrity_check") ?? "no answer"
            guard check == "ok" else { throw SQLiteError(code: SQLITE_CORRUPT, message: check, context: "integrity_check") }
            let workspaces = try to.scalar("SELECT count(*) FROM snapshots") ?? 0
            let maxVersion = try to.scalar("SELECT max(version) FROM snapshots") ?? 0
            let opsMax = try to.scalar("SELECT max(version) FROM ops") ?? 0
            to.close()
            guard rename(partial, destination) == 0 else {
                throw SQLiteError(code: SQLITE_CANTOPEN, message: String(cString: strerror(errno)), context: "rename to \(destination)")
            }
            done = true
            syncDirectory(of: destination)
            let bytes = ((try? files.attributesOfItem(atPath: destination))?[.size] as? NSNumber)?.int64Value ?? 0
            return BackupReport(
                source: source, destination: destination, bytes: bytes, workspaces: Int(workspaces),
                maxVersion: UInt64(max(maxVersion, opsMax)))
        } catch {
            if error.context == "integrity_check" { throw .damagedCopy(reason: error.message) }
            throw .failed(reason: error.description)
        }
    }

    /// fsyncs the directory holding `path`, so a rename into it survives a power loss (best effort).
    private static func syncDirectory(of path: String) {
        let directory = (path as NSString).deletingLastPathComponent
        let fd = Foundation.open(directory.isEmpty ? "." : directory, O_RDONLY)
        guard fd >= 0 else { return }
        fsync(fd)
        Foundation.close(fd)
    }
}
