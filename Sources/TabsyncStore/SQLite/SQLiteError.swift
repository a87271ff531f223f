import CSQLite

/// A failed SQLite call: SQLite's extended result code, its message, and what was being done.
///
/// `code` is the extended code (`SQLITE_IOERR_WRITE`, …); ``primaryCode`` is its low byte
/// (`SQLITE_IOERR`), which the `is…` helpers test.
struct SQLiteError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The extended result code.
    var code: Int32
    /// SQLite's message for it (`sqlite3_errmsg`, or `sqlite3_errstr` when there is no connection).
    var message: String
    /// What the wrapper was doing, e.g. `prepare "INSERT INTO ops …"` or `open /data/x.sqlite3`.
    var context: String

    init(code: Int32, message: String, context: String) {
        self.code = code
        self.message = message
        self.context = context
    }

    /// The primary result code (the low byte of ``code``).
    var primaryCode: Int32 { code & 0xff }

    /// The database or its directory cannot be written.
    var isReadOnly: Bool { primaryCode == SQLITE_READONLY || primaryCode == SQLITE_PERM }
    /// The file is not a database, or its pages are damaged.
    var isCorrupt: Bool { primaryCode == SQLITE_CORRUPT || primaryCode == SQLITE_NOTADB }

    var description: String {
        "\(context): \(message) (SQLite code \(code))"
    }

    /// The error a result code means, with the connection's message when there is one.
    static func make(_ code: Int32, _ db: OpaquePointer?, _ context: @autoclosure () -> String) -> SQLiteError {
        let message: String
        if let db, let text = sqlite3_errmsg(db) {
            message = String(cString: text)
        } else if let text = sqlite3_errstr(code) {
            message = String(cString: text)
        } else {
            message = "unknown error"
        }
        return SQLiteError(code: code, message: message, context: context())
    }
}
