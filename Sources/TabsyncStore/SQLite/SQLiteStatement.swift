import CSQLite

/// One prepared statement of a ``SQLiteConnection``, reused through the connection's cache.
///
/// Use: ``bind(_:)`` the parameters (1-based, in order), ``step()`` until it returns false, read
/// columns (0-based) while it returns true. ``SQLiteConnection/prepare(_:)`` hands it out reset with
/// its bindings cleared. Same thread rule as its connection; it dies with it.
final class SQLiteStatement {
    /// A value for a parameter.
    enum Value {
        case integer(Int64)
        case text(String)
        case blob([UInt8])
        case null
    }

    private(set) var handle: OpaquePointer?
    private let db: OpaquePointer
    let sql: String

    init(db: OpaquePointer, sql: String) throws(SQLiteError) {
        self.db = db
        self.sql = sql
        var statement: OpaquePointer?
        let rc = sqlite3_prepare_v3(db, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil)
        guard rc == SQLITE_OK, let statement else {
            throw SQLiteError.make(rc, db, "prepare \"\(sql)\"")
        }
        handle = statement
    }

    deinit { finalize() }

    /// Frees the statement; later use traps. The connection calls it before closing.
    func finalize() {
        if let handle { sqlite3_finalize(handle) }
        handle = nil
    }

    /// Makes the statement ready to run again and clears its bindings.
    func reset() {
        sqlite3_reset(handle)
        sqlite3_clear_bindings(handle)
    }

    /// Binds `values` to parameters 1, 2, … in order.
    func bind(_ values: Value...) throws(SQLiteError) {
        for (offset, value) in values.enumerated() {
            try bind(value, at: Int32(offset + 1))
        }
    }

    /// Binds one parameter (1-based). Text and blobs are copied now.
    func bind(_ value: Value, at index: Int32) throws(SQLiteError) {
        let rc: Int32
        switch value {
        case .integer(let number):
            rc = sqlite3_bind_int64(handle, index, number)
        case .text(let string):
            var string = string
            rc = string.withUTF8 { bytes in
                // An empty buffer may have no base address, which SQLite would take as NULL.
                guard let base = bytes.baseAddress, !bytes.isEmpty else {
                    return sqlite3_bind_text(handle, index, "", 0, csqlite_transient())
                }
                return base.withMemoryRebound(to: CChar.self, capacity: bytes.count) {
                    sqlite3_bind_text(handle, index, $0, Int32(bytes.count), csqlite_transient())
                }
            }
        case .blob(let bytes):
            rc = bytes.withUnsafeBytes { raw in
                guard let base = raw.baseAddress, !raw.isEmpty else {
                    return sqlite3_bind_zeroblob(handle, index, 0)
                }
                return sqlite3_bind_blob(handle, index, base, Int32(raw.count), csqlite_transient())
            }
        case .null:
            rc = sqlite3_bind_null(handle, index)
        }
        guard rc == SQLITE_OK else { throw SQLiteError.make(rc, db, "bind parameter \(index) of \"\(sql)\"") }
    }

    /// Runs one step: true when a row is ready to read, false when the statement is done.
    func step() throws(SQLiteError) -> Bool {
        let rc = sqlite3_step(handle)
        switch rc {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default:
            let error = SQLiteError.make(sqlite3_extended_errcode(db), db, "step \"\(sql)\"")
            sqlite3_reset(handle)
            throw error
        }
    }

    /// Runs the statement to its end, ignoring rows (INSERT, UPDATE, DELETE, DDL).
    func run() throws(SQLiteError) {
        while try step() {}
    }

    /// True when column `index` is NULL.
    func isNull(_ index: Int32) -> Bool {
        sqlite3_column_type(handle, index) == SQLITE_NULL
    }

    /// Column `index` as an integer (NULL reads 0).
    func int64(_ index: Int32) -> Int64 {
        sqlite3_column_int64(handle, index)
    }

    /// Column `index` as text (NULL reads "").
    func text(_ index: Int32) -> String {
        guard let bytes = sqlite3_column_text(handle, index) else { return "" }
        let count = Int(sqlite3_column_bytes(handle, index))
        return String(decoding: UnsafeBufferPointer(start: bytes, count: count), as: UTF8.self)
    }

    /// Column `index` as bytes (NULL reads empty).
    func blob(_ index: Int32) -> [UInt8] {
        let count = Int(sqlite3_column_bytes(handle, index))
        guard count > 0, let bytes = sqlite3_column_blob(handle, index) else { return [] }
        return Array(UnsafeRawBufferPointer(start: bytes, count: count))
    }
}
