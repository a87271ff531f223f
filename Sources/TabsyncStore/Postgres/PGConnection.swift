import CLibpq
import Foundation

/// A value sent to PostgreSQL as a parameter: always in binary form, never spliced into SQL text.
enum PGValue: Sendable, Equatable {
    case text(String)
    case int64(Int64)
    case bytes([UInt8])
    case null
    /// A one-dimensional array of `element` values (`text[]`, `int8[]`, `bytea[]`), NULLs allowed:
    /// how one statement carries the rows of a whole batch (`unnest($1::text[], ...)`).
    indirect case array(PGArrayElement, [PGValue])

    /// PostgreSQL's type OID for the value (`text`, `int8`, `bytea` and their arrays; 0 lets the
    /// server infer it).
    var oid: Oid {
        switch self {
        case .text: 25
        case .int64: 20
        case .bytes: 17
        case .null: 0
        case .array(let element, _): element.arrayOid
        }
    }

    /// The binary wire form (int8 big-endian, text as UTF-8, arrays as PostgreSQL's `array_send`
    /// writes them); nil for NULL.
    var binary: [UInt8]? {
        switch self {
        case .text(let value): return Array(value.utf8)
        case .int64(let value): return withUnsafeBytes(of: value.bigEndian) { Array($0) }
        case .bytes(let value): return value
        case .null: return nil
        case .array(let element, let values):
            // ndim, has-null flag, element type, then per dimension: length and lower bound (1).
            var out: [UInt8] = []
            func int32(_ value: Int32) { withUnsafeBytes(of: value.bigEndian) { out.append(contentsOf: $0) } }
            let hasNull = values.contains { $0 == .null }
            int32(values.isEmpty ? 0 : 1)
            int32(hasNull ? 1 : 0)
            int32(Int32(bitPattern: element.oid))
            if !values.isEmpty {
                int32(Int32(values.count))
                int32(1)
            }
            for value in values {
                if let bytes = value.binary {
                    int32(Int32(bytes.count))
                    out.append(contentsOf: bytes)
                } else {
                    int32(-1)
                }
            }
            return out
        }
    }
}

/// The element types ``PGValue/array(_:_:)`` carries.
enum PGArrayElement: Sendable, Equatable {
    case text, int64, bytes

    var oid: Oid {
        switch self {
        case .text: 25
        case .int64: 20
        case .bytes: 17
        }
    }

    var arrayOid: Oid {
        switch self {
        case .text: 1009
        case .int64: 1016
        case .bytes: 1001
        }
    }
}

/// One statement of a ``PGConnection/pipeline(_:)``: its text, its parameters, and whether it is
/// prepared once per connection (the default) or sent whole each time (`BEGIN`, `COMMIT`: nothing
/// to plan).
struct PGStatement {
    let sql: String
    let parameters: [PGValue]
    let prepared: Bool

    init(_ sql: String, _ parameters: [PGValue] = [], prepared: Bool = true) {
        self.sql = sql
        self.parameters = parameters
        self.prepared = prepared
    }

    static let begin = PGStatement("BEGIN", prepared: false)
    static let commit = PGStatement("COMMIT", prepared: false)
}

/// One PostgreSQL connection through libpq (Debian's libpq-dev, the `CLibpq` target): a thin typed
/// wrapper, chosen like the SQLite one for its near-zero build cost.
///
/// Guarantees: every statement goes through `PQexecParams`, `PQexecPrepared` or a pipeline of
/// `PQsendQueryPrepared` with binary parameters and binary results (no SQL is built from values;
/// bytes round-trip unchanged); every failure throws ``PGError``, `.connection` when the connection
/// is unusable afterwards. Connecting waits at most `connectTimeoutSeconds`; TCP keepalives and
/// `tcp_user_timeout` make a dead peer fail a call instead of hanging it.
///
/// Thread rule: not thread-safe; its owner uses it from one thread at a time.
final class PGConnection {
    private var conn: OpaquePointer?
    /// Statements prepared on this connection (``execute(_:_:prepared:)``), by their text.
    private var prepared: [String: String] = [:]

    /// Connects to `url` (a `postgres://` URL or a `key=value` conninfo; its own parameters win over
    /// the defaults given here) and, when `schema` is set, uses that schema for unqualified names.
    /// `idleInTransactionSeconds`: PostgreSQL ends this connection's transaction (and the
    /// connection) when it waits on the client that long inside it, so a client that stopped
    /// mid-transaction (a paused or frozen node) frees its row locks; nil: the server's setting.
    init(
        url: String, connectTimeoutSeconds: Int = 3, applicationName: String = "tabsync", schema: String? = nil,
        idleInTransactionSeconds: Double? = nil
    ) throws(PGError) {
        // Later keys override earlier ones; `dbname` (the URL, expanded) comes last so it wins.
        var parameters: [(String, String)] = [
            ("connect_timeout", String(max(1, connectTimeoutSeconds))),
            ("application_name", applicationName),
            ("keepalives", "1"), ("keepalives_idle", "5"), ("keepalives_interval", "2"), ("keepalives_count", "3"),
            ("tcp_user_timeout", "10000"),
        ]
        // Prepared statements run their generic plan: each one this store prepares finds its rows
        // by key, so its plan does not depend on the values, and PostgreSQL's default (a custom
        // plan per execution while it looks cheaper) planned every commit's statements again: 15%
        // of PostgreSQL's CPU at 1,000 one-op commits a second (docs/architecture.md).
        var settings = ["-c plan_cache_mode=force_generic_plan"]
        if let idleInTransactionSeconds {
            let millis = max(1, Int((idleInTransactionSeconds * 1_000).rounded()))
            settings.append("-c idle_in_transaction_session_timeout=\(millis)")
        }
        parameters.append(("options", settings.joined(separator: " ")))
        parameters.append(("dbname", url))
        let keys = parameters.map { strdup($0.0) }
        let values = parameters.map { strdup($0.1) }
        defer {
            keys.forEach { free($0) }
            values.forEach { free($0) }
        }
        let handle: OpaquePointer? = (keys.map { UnsafePointer($0) } + [nil]).withUnsafeBufferPointer { keyPointers in
            (values.map { UnsafePointer($0) } + [nil]).withUnsafeBufferPointer { valuePointers in
                PQconnectdbParams(keyPointers.baseAddress, valuePointers.baseAddress, 1)
            }
        }
        guard let handle else { throw .connection("out of memory") }
        guard PQstatus(handle) == CONNECTION_OK else {
            let message = Self.message(handle)
            PQfinish(handle)
            throw .connection(message)
        }
        conn = handle
        // Notices (e.g. "relation already exists, skipping") are not errors: never printed.
        PQsetNoticeProcessor(handle, { _, _ in }, nil)
        if let schema {
            try execute("SELECT set_config('search_path', $1, false)", [.text(Self.quoteIdentifier(schema))])
        }
    }

    deinit { close() }

    /// Closes the connection. Idempotent.
    func close() {
        if let conn { PQfinish(conn) }
        conn = nil
    }

    /// False once closed or broken (the server went away): reopen.
    var isUsable: Bool { conn.map { PQstatus($0) == CONNECTION_OK } ?? false }

    /// The server process serving this connection (tells notifications of our own commits apart).
    var backendPID: Int32 { conn.map { PQbackendPID($0) } ?? 0 }

    /// Runs one statement with `parameters` (`$1`, `$2`, …) and returns its rows. `prepared`: the
    /// statement is parsed and planned once per connection (`PQprepare`) and only executed after
    /// that; for the statements of the hot path, whose text never changes.
    @discardableResult
    func execute(_ sql: String, _ parameters: [PGValue] = [], prepared usePrepared: Bool = false) throws(PGError) -> PGResult {
        guard let conn, PQstatus(conn) == CONNECTION_OK else { throw .connection("not connected") }
        let name = usePrepared ? try preparedName(sql, parameters) : nil
        let result: OpaquePointer? = Self.withParameters(parameters) { values, lengths, formats in
            if let name { return PQexecPrepared(conn, name, Int32(parameters.count), values, lengths, formats, 1) }
            return PQexecParams(conn, sql, Int32(parameters.count), parameters.map(\.oid), values, lengths, formats, 1)
        }
        guard let result else { throw .connection(Self.message(conn)) }
        let status = PQresultStatus(result)
        guard status == PGRES_TUPLES_OK || status == PGRES_COMMAND_OK else {
            let error = Self.error(result, conn, context: sql)
            PQclear(result)
            throw error
        }
        return PGResult(result)
    }

    /// Runs `statements` in one round trip (libpq's pipeline mode, one Sync after the last), run
    /// by PostgreSQL one after another in order, each with its own snapshot, exactly as if sent one
    /// by one. Returns their rows in order.
    ///
    /// On a failure PostgreSQL skips the statements after it up to the Sync, and this throws the
    /// first failure; inside a transaction block the transaction is then failed
    /// (``inTransaction`` stays true until `ROLLBACK`). A connection that broke on the way throws
    /// `.connection` and is unusable afterwards.
    func pipeline(_ statements: [PGStatement]) throws(PGError) -> [PGResult] {
        guard let conn, PQstatus(conn) == CONNECTION_OK else { throw .connection("not connected") }
        var names: [String?] = []
        for statement in statements {
            names.append(statement.prepared ? try preparedName(statement.sql, statement.parameters) : nil)
        }
        guard PQenterPipelineMode(conn) == 1 else { throw .connection(Self.message(conn)) }
        // Whatever went wrong after this point, a connection left in pipeline mode with results
        // unread is closed rather than reused.
        var clean = false
        defer { if !clean { close() } }
        for (statement, name) in zip(statements, names) {
            let count = Int32(statement.parameters.count)
            let sent = Self.withParameters(statement.parameters) { values, lengths, formats in
                if let name { return PQsendQueryPrepared(conn, name, count, values, lengths, formats, 1) }
                return PQsendQueryParams(conn, statement.sql, count, statement.parameters.map(\.oid), values, lengths, formats, 1)
            }
            guard sent == 1 else { throw .connection(Self.message(conn)) }
        }
        guard PQpipelineSync(conn) == 1 else { throw .connection(Self.message(conn)) }
        var results: [PGResult] = []
        var failure: PGError?
        for statement in statements {
            guard let result = PQgetResult(conn) else { throw .connection(Self.message(conn)) }
            let status = PQresultStatus(result)
            if status == PGRES_TUPLES_OK || status == PGRES_COMMAND_OK {
                results.append(PGResult(result))
            } else {
                if status != PGRES_PIPELINE_ABORTED && failure == nil {
                    failure = Self.error(result, conn, context: statement.sql)
                }
                PQclear(result)
                if PQstatus(conn) != CONNECTION_OK { throw failure ?? .connection(Self.message(conn)) }
            }
            // Each statement's results end with a NULL.
            if let extra = PQgetResult(conn) {
                PQclear(extra)
                throw .unexpectedResult("a pipelined statement returned more than one result: \(statement.sql.prefix(60))")
            }
        }
        guard let sync = PQgetResult(conn) else { throw .connection(Self.message(conn)) }
        let synced = PQresultStatus(sync) == PGRES_PIPELINE_SYNC
        PQclear(sync)
        guard synced, PQexitPipelineMode(conn) == 1 else {
            throw PQstatus(conn) == CONNECTION_OK ? .unexpectedResult("the pipeline did not end at its Sync") : .connection(Self.message(conn))
        }
        clean = true
        if let failure { throw failure }
        return results
    }

    /// True while the connection is inside a transaction block (idle in it, or failed in it and
    /// waiting for `ROLLBACK`).
    var inTransaction: Bool {
        guard let conn else { return false }
        let status = PQtransactionStatus(conn)
        return status == PQTRANS_INTRANS || status == PQTRANS_INERROR
    }

    /// The name `sql` is prepared under on this connection, preparing it the first time.
    private func preparedName(_ sql: String, _ parameters: [PGValue]) throws(PGError) -> String {
        if let known = prepared[sql] { return known }
        guard let conn else { throw .connection("not connected") }
        let fresh = "tabsync_\(prepared.count + 1)"
        let oids = parameters.map(\.oid)
        guard let made = PQprepare(conn, fresh, sql, Int32(oids.count), oids) else { throw .connection(Self.message(conn)) }
        defer { PQclear(made) }
        guard PQresultStatus(made) == PGRES_COMMAND_OK else { throw Self.error(made, conn, context: sql) }
        prepared[sql] = fresh
        return fresh
    }

    /// Calls `body` with libpq's parameter arrays for `parameters`: every value binary, from one
    /// contiguous buffer (at least one byte, so an empty value still has an address).
    private static func withParameters<T>(
        _ parameters: [PGValue],
        _ body: ([UnsafePointer<CChar>?], [Int32], [Int32]) -> T
    ) -> T {
        let buffers = parameters.map(\.binary)
        let lengths = buffers.map { Int32($0?.count ?? 0) }
        let formats = [Int32](repeating: 1, count: parameters.count)
        var storage: [UInt8] = []
        var offsets: [Int?] = []
        for buffer in buffers {
            if let buffer {
                offsets.append(storage.count)
                storage.append(contentsOf: buffer)
            } else {
                offsets.append(nil)
            }
        }
        storage.append(0)
        return storage.withUnsafeBufferPointer { bytes in
            let base = UnsafeRawPointer(bytes.baseAddress!).assumingMemoryBound(to: CChar.self)
            return body(offsets.map { $0.map { base + $0 } }, lengths, formats)
        }
    }

    /// Runs a statement whose text has no parameters and may hold several commands (DDL).
    func executeScript(_ sql: String) throws(PGError) {
        guard let conn, PQstatus(conn) == CONNECTION_OK else { throw .connection("not connected") }
        guard let result = PQexec(conn, sql) else { throw .connection(Self.message(conn)) }
        defer { PQclear(result) }
        let status = PQresultStatus(result)
        guard status == PGRES_TUPLES_OK || status == PGRES_COMMAND_OK else {
            throw Self.error(result, conn, context: String(sql.prefix(80)))
        }
    }

    /// `identifier` quoted for SQL (`"a""b"`), for the few places a name cannot be a parameter.
    static func quoteIdentifier(_ identifier: String) -> String {
        "\"" + identifier.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }

    // MARK: - asynchronous use (the listener)

    /// The socket to wait on for notifications (-1 when not connected).
    var socket: Int32 { conn.map { PQsocket($0) } ?? -1 }

    /// Reads what arrived on the socket without blocking.
    func consumeInput() throws(PGError) {
        guard let conn else { throw .connection("not connected") }
        if PQconsumeInput(conn) == 0 || PQstatus(conn) != CONNECTION_OK { throw .connection(Self.message(conn)) }
    }

    /// The notifications received so far (after ``consumeInput()``), as (channel, payload, sender PID).
    func takeNotifications() -> [(channel: String, payload: String, pid: Int32)] {
        guard let conn else { return [] }
        var result: [(channel: String, payload: String, pid: Int32)] = []
        while let notify = PQnotifies(conn) {
            result.append((String(cString: notify.pointee.relname), String(cString: notify.pointee.extra), notify.pointee.be_pid))
            PQfreemem(notify)
        }
        return result
    }

    /// Sends a statement without waiting for its result (see ``resultIfReady()``).
    func send(_ sql: String) throws(PGError) {
        guard let conn, PQsendQuery(conn, sql) == 1 else { throw .connection(conn.map(Self.message) ?? "not connected") }
    }

    /// After ``send(_:)`` and ``consumeInput()``: true once the statement's result arrived (and was
    /// read), false while it is still pending. Throws when the statement failed.
    func resultIfReady() throws(PGError) -> Bool {
        guard let conn else { throw .connection("not connected") }
        if PQisBusy(conn) == 1 { return false }
        var failure: PGError?
        while let result = PQgetResult(conn) {
            let status = PQresultStatus(result)
            if status != PGRES_TUPLES_OK && status != PGRES_COMMAND_OK && failure == nil {
                failure = Self.error(result, conn, context: "async statement")
            }
            PQclear(result)
        }
        if let failure { throw failure }
        return true
    }

    // MARK: - errors

    /// libpq's message for the connection, on one line (it breaks its own across several, which
    /// would split a log line).
    private static func message(_ conn: OpaquePointer) -> String {
        String(cString: PQerrorMessage(conn)).split(whereSeparator: \.isNewline)
            .map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }.joined(separator: " ")
    }

    /// The error of a failed result: `.connection` when the connection broke with it.
    private static func error(_ result: OpaquePointer, _ conn: OpaquePointer, context: String) -> PGError {
        if PQstatus(conn) != CONNECTION_OK { return .connection(message(conn)) }
        let field = { (code: UInt8) -> String in
            PQresultErrorField(result, Int32(code)).map { String(cString: $0) } ?? ""
        }
        let state = field(UInt8(ascii: "C"))
        let primary = field(UInt8(ascii: "M"))
        let message = primary.isEmpty ? String(cString: PQresultErrorMessage(result)) : primary
        // Class 08 (connection exception) and 57P0x (admin/crash shutdown) mean the session is gone.
        if state.hasPrefix("08") || state.hasPrefix("57P0") { return .connection("\(state): \(message)") }
        return .statement(sqlState: state, message: message, context: context)
    }
}

/// The rows of one statement, in binary form; frees libpq's result when released.
final class PGResult {
    private let result: OpaquePointer

    init(_ result: OpaquePointer) { self.result = result }
    deinit { PQclear(result) }

    var rowCount: Int { Int(PQntuples(result)) }
    var columnCount: Int { Int(PQnfields(result)) }

    func isNull(_ row: Int, _ column: Int) -> Bool { PQgetisnull(result, Int32(row), Int32(column)) == 1 }

    /// The raw binary value (empty for NULL).
    func bytes(_ row: Int, _ column: Int) -> [UInt8] {
        let length = Int(PQgetlength(result, Int32(row), Int32(column)))
        guard length > 0, let value = PQgetvalue(result, Int32(row), Int32(column)) else { return [] }
        return value.withMemoryRebound(to: UInt8.self, capacity: length) { Array(UnsafeBufferPointer(start: $0, count: length)) }
    }

    func text(_ row: Int, _ column: Int) -> String {
        String(decoding: bytes(row, column), as: UTF8.self)
    }

    /// An integer column (`int2`, `int4`, `int8`); throws for another type. NULL reads as nil.
    func int64(_ row: Int, _ column: Int) throws(PGError) -> Int64? {
        if isNull(row, column) { return nil }
        let value = bytes(row, column)
        let type = PQftype(result, Int32(column))
        guard [20, 23, 21].contains(type), [8, 4, 2].contains(value.count) else {
            throw .unexpectedResult("column \(column) has type \(type) and \(value.count) bytes, not an integer")
        }
        var number: Int64 = value[0] & 0x80 != 0 ? -1 : 0  // sign-extended
        for byte in value { number = (number << 8) | Int64(byte) }
        return number
    }
}
