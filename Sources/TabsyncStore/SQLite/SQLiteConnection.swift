import CSQLite

/// One SQLite connection with a prepared-statement cache and a busy timeout.
///
/// A thin wrapper over the system SQLite (the `CSQLite` target) rather than GRDB: CI builds from
/// scratch (GRDB adds ~40 s per clean build, this ~3 s) and the store needs a dozen statements.
///
/// Thread rule: not thread-safe by itself (opened `SQLITE_OPEN_NOMUTEX`); its owner uses it from
/// one thread at a time. Every failing call throws ``SQLiteError`` with SQLite's code and message;
/// extended result codes are on.
final class SQLiteConnection {
    /// The database file.
    let path: String
    private var db: OpaquePointer?
    private var cache: [String: SQLiteStatement] = [:]

    /// Opens (with `create`, creates) the database at `path`. SQLite reads nothing yet: a file that is
    /// not a database fails at the first statement, not here.
    ///
    /// A file the process cannot write opens read-only (see ``isReadOnly``).
    /// `vfs`: a registered SQLite VFS by name (tests count syncs with one); nil: the default.
    init(path: String, create: Bool = true, busyTimeoutMilliseconds: Int32 = 5_000, vfs: String? = nil) throws(SQLiteError) {
        self.path = path
        var flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX
        if create { flags |= SQLITE_OPEN_CREATE }
        var handle: OpaquePointer?
        let rc = sqlite3_open_v2(path, &handle, flags, vfs)
        guard rc == SQLITE_OK, let handle else {
            let error = SQLiteError.make(rc, handle, "open \(path)")
            sqlite3_close_v2(handle)
            throw error
        }
        db = handle
        sqlite3_extended_result_codes(handle, 1)
        sqlite3_busy_timeout(handle, busyTimeoutMilliseconds)
    }

    deinit { close() }

    /// Checkpoints a WAL database (when writable), finalizes the cached statements and closes the
    /// connection. Idempotent.
    func close() {
        close(checkpoint: true)
    }

    /// Closes the connection without a checkpoint of its own (a second connection to a file whose
    /// writer checkpoints at its close). Idempotent.
    func closeWithoutCheckpoint() {
        close(checkpoint: false)
    }

    private func close(checkpoint: Bool) {
        for statement in cache.values { statement.finalize() }
        cache = [:]
        // Leave an empty -wal behind (it persists, see persistWAL): everything is in the main file.
        if checkpoint, let db, !isReadOnly { sqlite3_wal_checkpoint_v2(db, nil, SQLITE_CHECKPOINT_TRUNCATE, nil, nil) }
        if let db { sqlite3_close_v2(db) }
        db = nil
    }

    /// True while the connection is open.
    var isOpen: Bool { db != nil }

    /// Keeps the `-wal` and `-shm` files when the last connection closes (SQLITE_FCNTL_PERSIST_WAL),
    /// so the database can still be opened read-only later from a directory that became read-only.
    func persistWAL() {
        var on: Int32 = 1
        sqlite3_file_control(db, "main", SQLITE_FCNTL_PERSIST_WAL, &on)
    }

    /// The raw handle, for SQLite calls this wrapper does not cover (the WAL hook); nil once closed.
    var handle: OpaquePointer? { db }

    /// What one `sqlite3_wal_checkpoint_v2` call did.
    struct CheckpointResult: Sendable, Equatable {
        /// SQLite's result code (`SQLITE_OK`, `SQLITE_BUSY`, an I/O error …).
        var code: Int32
        /// Frames in the WAL (-1 when the call failed before looking).
        var walFrames: Int32
        /// Frames of it now copied into the database file.
        var checkpointedFrames: Int32
    }

    /// Runs a checkpoint of `mode` (`SQLITE_CHECKPOINT_PASSIVE`, `_RESTART`, `_TRUNCATE`) on this
    /// connection. Never throws: the result says what happened.
    func checkpoint(_ mode: Int32) -> CheckpointResult {
        guard let db else { return CheckpointResult(code: SQLITE_MISUSE, walFrames: -1, checkpointedFrames: -1) }
        var log: Int32 = -1
        var done: Int32 = -1
        let rc = sqlite3_wal_checkpoint_v2(db, "main", mode, &log, &done)
        return CheckpointResult(code: rc, walFrames: log, checkpointedFrames: done)
    }

    /// True when the main database was opened read-only (the file or its directory is not writable).
    var isReadOnly: Bool { sqlite3_db_readonly(db, "main") == 1 }

    /// Rows changed by the last INSERT, UPDATE or DELETE.
    var changes: Int { Int(sqlite3_changes64(db)) }

    /// The cached statement for `sql`, reset with its bindings cleared; prepared on first use.
    func prepare(_ sql: String) throws(SQLiteError) -> SQLiteStatement {
        guard let db else { throw SQLiteError(code: SQLITE_MISUSE, message: "connection closed", context: path) }
        if let statement = cache[sql] {
            statement.reset()
            return statement
        }
        let statement = try SQLiteStatement(db: db, sql: sql)
        cache[sql] = statement
        return statement
    }

    /// Runs one or more statements without parameters (DDL, PRAGMAs), uncached.
    func execute(_ sql: String) throws(SQLiteError) {
        guard let db else { throw SQLiteError(code: SQLITE_MISUSE, message: "connection closed", context: path) }
        var message: UnsafeMutablePointer<CChar>?
        let rc = sqlite3_exec(db, sql, nil, nil, &message)
        if rc != SQLITE_OK {
            let text = message.map { String(cString: $0) } ?? String(cString: sqlite3_errstr(rc))
            sqlite3_free(message)
            throw SQLiteError(code: sqlite3_extended_errcode(db), message: text, context: "execute \"\(sql)\"")
        }
    }

    /// The first column of the first row of `sql` as an integer (nil when there is no row).
    func scalar(_ sql: String, _ values: SQLiteStatement.Value...) throws(SQLiteError) -> Int64? {
        let statement = try prepare(sql)
        for (offset, value) in values.enumerated() { try statement.bind(value, at: Int32(offset + 1)) }
        defer { statement.reset() }
        return try statement.step() ? statement.int64(0) : nil
    }

    /// The first column of the first row of `sql` as text (nil when there is no row).
    func scalarText(_ sql: String) throws(SQLiteError) -> String? {
        let statement = try prepare(sql)
        defer { statement.reset() }
        return try statement.step() ? statement.text(0) : nil
    }

    /// True inside a transaction (`BEGIN` … `COMMIT`/`ROLLBACK`).
    var inTransaction: Bool { db != nil && sqlite3_get_autocommit(db) == 0 }

    /// Starts a write transaction, taking the write lock now (`BEGIN IMMEDIATE`).
    func begin() throws(SQLiteError) { try prepare("BEGIN IMMEDIATE").run() }

    /// Commits the open transaction.
    func commit() throws(SQLiteError) { try prepare("COMMIT").run() }

    /// Runs `body` in a write transaction (``begin()``): committed when it returns, rolled back
    /// when it throws (the error is thrown on).
    func transaction<T>(_ body: () throws(SQLiteError) -> T) throws(SQLiteError) -> T {
        try begin()
        do throws(SQLiteError) {
            let result = try body()
            try commit()
            return result
        } catch {
            rollback()
            throw error
        }
    }

    /// Rolls the open transaction back, if SQLite has not already done so (it does after some I/O
    /// and full-disk errors). Never throws: a rollback that fails leaves nothing committed either.
    func rollback() {
        guard inTransaction else { return }
        _ = try? execute("ROLLBACK")
    }
}
