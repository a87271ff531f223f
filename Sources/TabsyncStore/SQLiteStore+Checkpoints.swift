import CSQLite

extension SQLiteStore.Options {
    /// Where the WAL's checkpoints (copying committed pages from the `-wal` file into the database
    /// file) run.
    public enum Checkpoint: String, Sendable, CaseIterable {
        /// On a background thread with its own connection, never inside a commit
        /// (``WALCheckpointer``): passive checkpoints as the WAL grows, the writer paused only to
        /// restart a WAL past ``SQLiteStore/Options/walLimitBytes`` or to truncate it when idle.
        case background
        /// SQLite's default: inside the commit that takes the WAL past 1000 pages, on the
        /// committing connection. Kept to measure the difference (BENCHMARKS.md).
        case inline
    }

    /// The default bound on the WAL file (64 MiB).
    public static let defaultWALLimitBytes: Int64 = 64 << 20
}

/// The writing connection's WAL hook (`sqlite3_wal_hook`), called by SQLite at the end of every
/// commit with the WAL's size. Installing it replaces SQLite's auto-checkpoint.
///
/// Guarantees: with a ``WALCheckpointer`` it never checkpoints, it only reports the size; without
/// one (``SQLiteStore/Options/Checkpoint/inline``) it does what SQLite's default hook does (a
/// passive checkpoint once the WAL holds `inlineStartFrames`), timed for the trace.
///
/// Store thread only, inside the store's lock (SQLite calls it from `COMMIT`).
final class WALHook: @unchecked Sendable {
    let checkpointer: WALCheckpointer?
    let inlineStartFrames: Int32
    /// Time the commit in progress spent in an inline checkpoint.
    private(set) var inlineCheckpoint: Duration = .zero
    /// The WAL's frames after the last commit.
    private(set) var walFrames: Int32 = 0

    init(checkpointer: WALCheckpointer?, inlineStartFrames: Int32 = 1000) {
        self.checkpointer = checkpointer
        self.inlineStartFrames = inlineStartFrames
    }

    /// Makes this the WAL hook of `db` (for as long as this object lives: the store keeps it).
    func install(on db: SQLiteConnection) {
        sqlite3_wal_hook(db.handle, walHookCallback, Unmanaged.passUnretained(self).toOpaque())
    }

    /// Called before each commit.
    func commitStarts() { inlineCheckpoint = .zero }

    fileprivate func committed(_ db: OpaquePointer?, _ name: UnsafePointer<CChar>?, walFrames frames: Int32) {
        walFrames = frames
        if let checkpointer {
            checkpointer.committed(walFrames: frames)
        } else if frames >= inlineStartFrames {
            let started = ContinuousClock.now
            sqlite3_wal_checkpoint(db, name)
            inlineCheckpoint += ContinuousClock.now - started
        }
    }
}

/// The C callback SQLite calls; `context` is the ``WALHook``.
private func walHookCallback(
    _ context: UnsafeMutableRawPointer?, _ db: OpaquePointer?, _ name: UnsafePointer<CChar>?, _ frames: Int32
) -> Int32 {
    guard let context else { return SQLITE_OK }
    Unmanaged<WALHook>.fromOpaque(context).takeUnretainedValue().committed(db, name, walFrames: frames)
    return SQLITE_OK
}
