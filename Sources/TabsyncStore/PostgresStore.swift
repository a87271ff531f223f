import Synchronization
import TabsyncCore
import TabsyncLock

/// A ``WorkspaceStore`` in PostgreSQL, shared by several server nodes.
///
/// Guarantees:
/// - ``commit(_:)`` is one transaction: after it returns the batch is durable (as PostgreSQL's
///   `synchronous_commit` makes it); when it throws, none of the batch is stored, except when the
///   connection broke during `COMMIT` itself (then the batch may be stored: a writer that retries
///   with base versions gets ``StoreError/behind(storedVersions:)`` and finds its own ops, whose
///   clientId and seq dedup recognises).
/// - Ordering between writers: each commit first locks and moves the workspace's version row
///   (in workspace order, so two nodes never deadlock); a batch whose base version is not the
///   stored one is refused whole with `behind`. Every committed batch sends one
///   `pg_notify(channel, "workspace:version")` per workspace it touched (never one per op), which
///   ``PostgresListener`` receives on the other nodes.
/// - Per workspace it keeps what ``SQLiteStore`` keeps: a snapshot every ``Options/snapshotInterval``
///   ops, the op log of at most the batch's `logRetention` ops, the last consumed seq per client,
///   the recent refusals and the rekeys inside the log.
/// - Schema created or migrated at open under an advisory lock (see ``migrate(url:options:)``).
/// - PostgreSQL down or restarting: calls throw ``StoreError`` within the connect timeout; the next
///   call after it is back reconnects by itself.
///
/// Every statement is parameterised (`PQexecParams`, binary). Thread-safe: one `Lock` serializes
/// every call on the single connection; the server calls it from its store thread only.
public final class PostgresStore: WorkspaceStore {
    /// How the store connects and what it keeps.
    public struct Options: Sendable, Equatable {
        /// Ops between snapshots of a workspace (at most the log retention is used).
        public var snapshotInterval: Int
        /// How long a connection attempt may take before the call fails.
        public var connectTimeoutSeconds: Int
        /// The PostgreSQL schema (namespace) holding the tables, created when missing; nil: the
        /// connection's default (`public`).
        public var schema: String?
        /// The `application_name` the connections show in `pg_stat_activity`.
        public var applicationName: String

        public init(
            snapshotInterval: Int = 256, connectTimeoutSeconds: Int = 3, schema: String? = nil,
            applicationName: String = "tabsync-server"
        ) {
            self.snapshotInterval = snapshotInterval
            self.connectTimeoutSeconds = connectTimeoutSeconds
            self.schema = schema
            self.applicationName = applicationName
        }

        /// The NOTIFY channel commits announce on: `tabsync`, or `tabsync.<schema>`.
        public var channel: String { schema.map { "tabsync." + $0 } ?? "tabsync" }
    }

    /// Why the store could not be opened. The URL is never repeated (it may hold a password).
    public enum OpenError: Error, Sendable, Equatable, CustomStringConvertible {
        /// No connection to PostgreSQL could be made.
        case cannotConnect(String)
        /// The schema could not be created or migrated.
        case migrationFailed(String)
        /// The database was migrated by a newer tabsync (a schema version this build does not know).
        case newerSchema(found: Int64, supported: Int64)

        public var description: String {
            switch self {
            case .cannotConnect(let why): "cannot connect to the PostgreSQL store: \(why)"
            case .migrationFailed(let why): "cannot migrate the PostgreSQL store: \(why)"
            case .newerSchema(let found, let supported):
                "the PostgreSQL store has schema version \(found), newer than this build's \(supported); nothing was changed"
            }
        }
    }

    public let epoch: String
    public let options: Options
    private let url: String
    /// nil while disconnected (the next call reconnects) and once closed.
    private let connection: Lock<PGConnection?>
    private let closed = Atomic<Bool>(false)

    /// Connects to `url`, creates or migrates the schema and reads the epoch.
    public init(url: String, options: Options = Options()) throws(OpenError) {
        self.url = url
        self.options = options
        let db = try Self.connect(url: url, options: options)
        epoch = try Self.migrate(db, schema: options.schema, newEpoch: SQLiteStore.randomEpoch())
        connection = Lock(db)
    }

    /// Creates or migrates the schema and returns; for operators who migrate separately
    /// (`tabsync-server migrate`). Safe to run while nodes start: it takes the same lock.
    public static func migrate(url: String, options: Options = Options()) throws(OpenError) {
        let db = try connect(url: url, options: options)
        defer { db.close() }
        _ = try migrate(db, schema: options.schema, newEpoch: SQLiteStore.randomEpoch())
    }

    private static func connect(url: String, options: Options) throws(OpenError) -> PGConnection {
        do {
            return try PGConnection(
                url: url, connectTimeoutSeconds: options.connectTimeoutSeconds,
                applicationName: options.applicationName, schema: options.schema)
        } catch {
            throw .cannotConnect(error.description)
        }
    }

    /// Closes the connection. Later calls throw.
    public func close() {
        closed.store(true, ordering: .sequentiallyConsistent)
        connection.withLock { db in
            db?.close()
            db = nil
        }
    }

    // MARK: - WorkspaceStore

    public func load(workspaceId: String) throws(StoreError) -> StoredWorkspace? {
        try readSnapshot { db throws(PGError) in try self.load(workspaceId, db) }
    }

    public func commit(_ batch: CommitBatch) throws(StoreError) {
        try withConnection(failure: StoreError.writeFailed) { db throws(PGError) in try self.commit(batch, db) }
    }

    public func ops(workspaceId: String, after version: UInt64, limit: Int) throws(StoreError) -> [AppliedOp]? {
        try withConnection(failure: StoreError.readFailed) { db throws(PGError) in
            let ops = try self.ops(workspaceId, after: version, limit: limit, db)
            if let first = ops.first, first.version != version + 1 { return nil }
            return ops
        }
    }

    public func dedupState(workspaceId: String) throws(StoreError) -> DedupState? {
        try readSnapshot { db throws(PGError) in
            let row = try db.execute("SELECT version FROM tabsync_workspaces WHERE workspace = $1", [.text(workspaceId)])
            let lastSeqs = try self.lastSeqs(workspaceId, db)
            guard row.rowCount > 0 || !lastSeqs.isEmpty else { return nil }
            let version = row.rowCount > 0 ? UInt64(bitPattern: try row.int64(0, 0) ?? 0) : 0
            let oldest = try db.execute("SELECT min(version) FROM tabsync_ops WHERE workspace = $1", [.text(workspaceId)])
            let firstLogged = try oldest.int64(0, 0).map { UInt64(bitPattern: $0) } ?? UInt64(Int64.max)
            return DedupState(
                version: version, lastSeqs: lastSeqs, rejections: try self.rejections(workspaceId, db),
                rekeys: try self.rekeys(workspaceId, from: firstLogged, db))
        }
    }

    /// One query for all of them (workspace ids hold no comma).
    public func storedVersions(workspaceIds: [String]) throws(StoreError) -> [String: UInt64] {
        guard !workspaceIds.isEmpty else { return [:] }
        return try withConnection(failure: StoreError.readFailed) { db throws(PGError) in
            let rows = try db.execute(
                "SELECT workspace, version FROM tabsync_workspaces WHERE workspace = ANY(string_to_array($1, ','))",
                [.text(workspaceIds.joined(separator: ","))])
            var versions: [String: UInt64] = [:]
            for row in 0..<rows.rowCount { versions[rows.text(row, 0)] = UInt64(bitPattern: try rows.int64(row, 1) ?? 0) }
            return versions
        }
    }

    // MARK: - connection

    /// Runs `body` on the connection, opening one first when there is none (PostgreSQL restarted).
    /// A broken connection is dropped, so the next call reconnects.
    private func withConnection<T: Sendable>(
        failure: @escaping (String) -> StoreError, _ body: (PGConnection) throws(PGError) -> T
    ) throws(StoreError) -> T {
        try connection.withLock { (db: inout PGConnection?) throws(StoreError) -> T in
            if closed.load(ordering: .sequentiallyConsistent) { throw failure("the PostgreSQL store is closed") }
            if db.map({ !$0.isUsable }) ?? true {
                db?.close()
                db = nil
                do throws(PGError) {
                    db = try PGConnection(
                        url: url, connectTimeoutSeconds: options.connectTimeoutSeconds,
                        applicationName: options.applicationName, schema: options.schema)
                } catch {
                    throw failure(error.description)
                }
            }
            do throws(PGError) {
                return try body(db!)
            } catch {
                if error.isConnectionLost || !db!.isUsable {
                    db?.close()
                    db = nil
                }
                if case .unexpectedResult(let why) = error, why.hasPrefix(StoreError.marker) {
                    throw Self.decode(why, failure)
                }
                throw failure(error.description)
            }
        }
    }

    /// A read in one REPEATABLE READ transaction: its queries see one consistent state.
    private func readSnapshot<T: Sendable>(_ body: (PGConnection) throws(PGError) -> T) throws(StoreError) -> T {
        try withConnection(failure: StoreError.readFailed) { db throws(PGError) in
            try db.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            do throws(PGError) {
                let result = try body(db)
                try db.execute("COMMIT")
                return result
            } catch {
                _ = try? db.execute("ROLLBACK")
                throw error
            }
        }
    }

    /// A ``StoreError`` carried through the `PGError`-typed closures as `.unexpectedResult`.
    private static func carry(_ error: StoreError) -> PGError {
        switch error {
        case .behind(let versions):
            .unexpectedResult(StoreError.marker + "behind:" + versions.map { "\($0.key)\u{1}\($0.value)" }.joined(separator: "\u{2}"))
        case .readFailed(let why): .unexpectedResult(StoreError.marker + "read:" + why)
        case .writeFailed(let why): .unexpectedResult(StoreError.marker + "write:" + why)
        }
    }

    private static func decode(_ carried: String, _ failure: (String) -> StoreError) -> StoreError {
        let body = carried.dropFirst(StoreError.marker.count)
        if body.hasPrefix("behind:") {
            var versions: [String: UInt64] = [:]
            for pair in body.dropFirst("behind:".count).split(separator: "\u{2}") {
                let parts = pair.split(separator: "\u{1}", omittingEmptySubsequences: false)
                if parts.count == 2, let version = UInt64(parts[1]) { versions[String(parts[0])] = version }
            }
            return .behind(storedVersions: versions)
        }
        if body.hasPrefix("read:") { return .readFailed(String(body.dropFirst(5))) }
        if body.hasPrefix("write:") { return .writeFailed(String(body.dropFirst(6))) }
        return failure(String(body))
    }

    // MARK: - reads

    private func load(_ workspaceId: String, _ db: PGConnection) throws(PGError) -> StoredWorkspace? {
        let id = PGValue.text(workspaceId)
        let snapshotRow = try db.execute("SELECT snapshot FROM tabsync_snapshots WHERE workspace = $1", [id])
        var workspace: Workspace?
        if snapshotRow.rowCount > 0 {
            workspace = try decoded { () throws(StoreError) in
                try StoreEncoding.decodeSnapshot(snapshotRow.bytes(0, 0), context: "snapshot of \(workspaceId)")
            }
        }
        let lastSeqs = try self.lastSeqs(workspaceId, db)
        let log = try ops(workspaceId, after: 0, limit: .max, db)
        if workspace == nil && lastSeqs.isEmpty && log.isEmpty { return nil }
        let rejections = try self.rejections(workspaceId, db)
        // Only the rekeys inside the log window translate keys (as the sequencer keeps them).
        let rekeys = try self.rekeys(workspaceId, from: log.first?.version ?? UInt64(Int64.max), db)

        var state = workspace ?? Workspace(id: workspaceId, epoch: epoch)
        for applied in log where applied.version > state.version {
            do throws(OpError) {
                try state.apply(applied: applied)
            } catch {
                throw Self.carry(.readFailed("op log of \(workspaceId) does not replay at version \(applied.version): \(error)"))
            }
        }
        if let last = log.last, last.version != state.version {
            throw Self.carry(.readFailed("op log of \(workspaceId) ends at \(last.version), snapshot is at \(state.version)"))
        }
        return StoredWorkspace(workspace: state, lastSeqs: lastSeqs, log: log, rejections: rejections, rekeys: rekeys)
    }

    private func decoded<T>(_ body: () throws(StoreError) -> T) throws(PGError) -> T {
        do {
            return try body()
        } catch {
            throw Self.carry(error)
        }
    }

    private func lastSeqs(_ workspaceId: String, _ db: PGConnection) throws(PGError) -> [String: UInt64] {
        let rows = try db.execute("SELECT client_id, seq FROM tabsync_client_seqs WHERE workspace = $1", [.text(workspaceId)])
        var result: [String: UInt64] = [:]
        for row in 0..<rows.rowCount { result[rows.text(row, 0)] = UInt64(bitPattern: try rows.int64(row, 1) ?? 0) }
        return result
    }

    private func rejections(_ workspaceId: String, _ db: PGConnection) throws(PGError) -> [Sequencer.Rejection] {
        let rows = try db.execute(
            "SELECT client_id, seq, error_code, error_detail FROM tabsync_rejections WHERE workspace = $1 ORDER BY n",
            [.text(workspaceId)])
        var result: [Sequencer.Rejection] = []
        for row in 0..<rows.rowCount {
            let code = try rows.int64(row, 2) ?? -1
            guard let error = StoreEncoding.decodeError(code: code, detail: rows.text(row, 3)) else {
                throw Self.carry(.readFailed("unknown refusal code \(code) in \(workspaceId)"))
            }
            result.append(Sequencer.Rejection(clientId: rows.text(row, 0), seq: UInt64(bitPattern: try rows.int64(row, 1) ?? 0), error: error))
        }
        return result
    }

    private func rekeys(_ workspaceId: String, from version: UInt64, _ db: PGConnection) throws(PGError) -> [RekeyRecord] {
        let rows = try db.execute(
            "SELECT version, old_keys, new_keys FROM tabsync_rekeys WHERE workspace = $1 AND version >= $2 ORDER BY version",
            [.text(workspaceId), .int64(Int64(bitPattern: version))])
        var result: [RekeyRecord] = []
        for row in 0..<rows.rowCount {
            let rekeyVersion = UInt64(bitPattern: try rows.int64(row, 0) ?? 0)
            let oldKeys = StoreEncoding.decodeKeys(rows.text(row, 1))
            let newKeys = StoreEncoding.decodeKeys(rows.text(row, 2))
            guard oldKeys.count == newKeys.count else {
                throw Self.carry(.readFailed("rekey \(rekeyVersion) of \(workspaceId) maps \(oldKeys.count) keys to \(newKeys.count)"))
            }
            result.append(RekeyRecord(version: rekeyVersion, oldKeys: oldKeys, newKeys: newKeys))
        }
        return result
    }

    /// The stored ops after `version`, oldest first, at most `limit`; throws when not contiguous.
    private func ops(_ workspaceId: String, after version: UInt64, limit: Int, _ db: PGConnection) throws(PGError) -> [AppliedOp] {
        let rows = try db.execute(
            """
            SELECT version, client_id, seq, active_tab_id, op FROM tabsync_ops
            WHERE workspace = $1 AND version > $2 ORDER BY version LIMIT $3
            """, [.text(workspaceId), .int64(Int64(bitPattern: version)), .int64(Int64(max(0, min(limit, Int(Int64.max)))))])
        var result: [AppliedOp] = []
        result.reserveCapacity(rows.rowCount)
        for row in 0..<rows.rowCount {
            let opVersion = UInt64(bitPattern: try rows.int64(row, 0) ?? 0)
            if let previous = result.last, previous.version + 1 != opVersion {
                throw Self.carry(.readFailed("op log of \(workspaceId) jumps from \(previous.version) to \(opVersion)"))
            }
            let op = try decoded { () throws(StoreError) in
                try StoreEncoding.decodeOp(rows.bytes(row, 4), context: "op \(opVersion) of \(workspaceId)")
            }
            result.append(AppliedOp(
                version: opVersion, op: op, clientId: rows.text(row, 1), seq: UInt64(bitPattern: try rows.int64(row, 2) ?? 0),
                activeTabId: rows.text(row, 3)))
        }
        return result
    }

    // MARK: - commit

    /// The batch in one transaction; rolled back whole on any failure.
    private func commit(_ batch: CommitBatch, _ db: PGConnection) throws(PGError) {
        var byWorkspace: [String: [CommitRecord]] = [:]
        for record in batch.records { byWorkspace[record.workspaceId, default: []].append(record) }
        let touched = Set(byWorkspace.keys).union(batch.workspaces.keys).union(batch.baseVersions.keys).sorted()
        try db.execute("BEGIN")
        var rolledBack = false
        do throws(PGError) {
            var stale: [String: UInt64] = [:]
            for id in touched {
                let records = byWorkspace[id] ?? []
                guard let snapshotVersion = try lockVersionRow(id, records, batch, db) else {
                    stale[id] = 0
                    continue
                }
                guard stale.isEmpty else { continue }
                try write(id, records, batch, snapshotVersion: snapshotVersion, db)
            }
            guard stale.isEmpty else {
                try db.execute("ROLLBACK")
                rolledBack = true
                // Report every workspace behind its base (at least the ones found above).
                for (id, base) in batch.baseVersions {
                    let row = try db.execute("SELECT version FROM tabsync_workspaces WHERE workspace = $1", [.text(id)])
                    let version = row.rowCount > 0 ? UInt64(bitPattern: try row.int64(0, 0) ?? 0) : 0
                    if version != base || stale[id] != nil { stale[id] = version }
                }
                throw Self.carry(.behind(storedVersions: stale))
            }
            try db.execute("COMMIT")
        } catch {
            if db.isUsable && !rolledBack { _ = try? db.execute("ROLLBACK") }
            throw error
        }
    }

    /// Locks the workspace's version row and moves it to the batch's version, checking the base
    /// version when the batch gives one; also announces the commit (`pg_notify` is sent only if the
    /// transaction commits). Returns the workspace's snapshot version (-1: none), or nil when the
    /// stored version is not the base (another writer got there first).
    private func lockVersionRow(_ id: String, _ records: [CommitRecord], _ batch: CommitBatch, _ db: PGConnection) throws(PGError) -> Int64? {
        let base = batch.baseVersions[id]
        var newVersion = batch.workspaces[id]?.version ?? base ?? 0
        for record in records {
            if case .applied(let ops) = record.outcome, let last = ops.last { newVersion = max(newVersion, last.version) }
        }
        let announce = """
            RETURNING coalesce((SELECT s.version FROM tabsync_snapshots s WHERE s.workspace = $1), -1),
                      pg_notify($3, $1 || ':' || w.version)
            """
        var parameters: [PGValue] = [.text(id), .int64(Int64(bitPattern: newVersion)), .text(options.channel)]
        let sql: String
        switch base {
        case nil:
            sql = """
                INSERT INTO tabsync_workspaces AS w (workspace, version) VALUES ($1, $2)
                ON CONFLICT (workspace) DO UPDATE SET version = greatest(w.version, excluded.version)
                """
        case 0:
            sql = """
                INSERT INTO tabsync_workspaces AS w (workspace, version) VALUES ($1, $2)
                ON CONFLICT (workspace) DO UPDATE SET version = excluded.version WHERE w.version = 0
                """
        case let base?:
            sql = "UPDATE tabsync_workspaces AS w SET version = $2 WHERE workspace = $1 AND version = $4"
            parameters.append(.int64(Int64(bitPattern: base)))
        }
        let row = try db.execute(sql + "\n" + announce, parameters)
        guard row.rowCount == 1 else { return nil }
        return try row.int64(0, 0) ?? -1
    }

    /// Writes one workspace's records: dedup rows, ops, refusals, rekeys, then snapshot and compaction.
    private func write(_ id: String, _ records: [CommitRecord], _ batch: CommitBatch, snapshotVersion: Int64, _ db: PGConnection) throws(PGError) {
        let workspace = PGValue.text(id)
        // The dedup rows: one per client (its highest seq in the batch), never moved backwards.
        var lastRecord: [String: CommitRecord] = [:]
        for record in records where record.seq > 0 && record.seq > (lastRecord[record.clientId]?.seq ?? 0) {
            lastRecord[record.clientId] = record
        }
        try insertRows(
            "INSERT INTO tabsync_client_seqs AS c (workspace, client_id, seq, error_code, error_detail) VALUES",
            """
            ON CONFLICT (workspace, client_id) DO UPDATE
            SET seq = excluded.seq, error_code = excluded.error_code, error_detail = excluded.error_detail
            WHERE excluded.seq > c.seq
            """,
            lastRecord.values.sorted { $0.clientId < $1.clientId }.map { record in
                if case .rejected(let error) = record.outcome {
                    let (code, detail) = StoreEncoding.encode(error)
                    return [workspace, .text(record.clientId), .int64(Int64(bitPattern: record.seq)), .int64(code), .text(detail)]
                }
                return [workspace, .text(record.clientId), .int64(Int64(bitPattern: record.seq)), .null, .null]
            }, db)

        var ops: [[PGValue]] = []
        var rekeys: [[PGValue]] = []
        var refusals: [[PGValue]] = []
        for record in records {
            switch record.outcome {
            case .applied(let applied):
                for op in applied {
                    let bytes = try encoded { () throws(StoreError) in try StoreEncoding.encode(op.op) }
                    ops.append([
                        workspace, .int64(Int64(bitPattern: op.version)), .text(op.clientId), .int64(Int64(bitPattern: op.seq)),
                        .text(op.activeTabId), .bytes(bytes),
                    ])
                }
                for rekey in record.rekeys {
                    rekeys.append([
                        workspace, .int64(Int64(bitPattern: rekey.version)), .text(StoreEncoding.encodeKeys(rekey.oldKeys)),
                        .text(StoreEncoding.encodeKeys(rekey.newKeys)),
                    ])
                }
            case .rejected(let error):
                let (code, detail) = StoreEncoding.encode(error)
                refusals.append([
                    .int64(Int64(refusals.count + 1)), .text(record.clientId), .int64(Int64(bitPattern: record.seq)),
                    .int64(code), .text(detail),
                ])
            }
        }
        try insertRows("INSERT INTO tabsync_ops (workspace, version, client_id, seq, active_tab_id, op) VALUES", "", ops, db)
        try insertRows("INSERT INTO tabsync_rekeys (workspace, version, old_keys, new_keys) VALUES", "", rekeys, db)
        let retention = max(batch.logRetention, 1)
        if !refusals.isEmpty {
            // n counts up per workspace; the version row's lock orders concurrent writers.
            let first = try db.execute(
                "SELECT coalesce(max(n), 0) FROM tabsync_rejections WHERE workspace = $1", [workspace]).int64(0, 0) ?? 0
            try insertRows(
                "INSERT INTO tabsync_rejections (workspace, n, client_id, seq, error_code, error_detail) VALUES", "",
                refusals.map { row in
                    guard case .int64(let offset) = row[0] else { return row }
                    return [workspace, .int64(first + offset)] + row.dropFirst()
                }, db)
            // The last `retention` refusals stay answerable.
            try db.execute(
                "DELETE FROM tabsync_rejections WHERE workspace = $1 AND n <= $2",
                [workspace, .int64(first + Int64(refusals.count) - Int64(retention))])
        }

        guard let state = batch.workspaces[id], state.version > 0 else { return }
        let version = Int64(bitPattern: state.version)
        let interval = max(1, min(options.snapshotInterval, retention))
        var snapshot = snapshotVersion
        if snapshot < 0 || version - snapshot >= Int64(interval) {
            let bytes = try encoded { () throws(StoreError) in try StoreEncoding.encode(state) }
            try db.execute(
                """
                INSERT INTO tabsync_snapshots (workspace, version, snapshot) VALUES ($1, $2, $3)
                ON CONFLICT (workspace) DO UPDATE SET version = excluded.version, snapshot = excluded.snapshot
                """, [workspace, .int64(version), .bytes(bytes)])
            snapshot = version
        }
        // Log rows older than the retention are covered by the snapshot (interval ≤ retention); a
        // rekey leaves with the log window it translates keys of.
        let horizon = min(snapshot, version - Int64(retention))
        if horizon > 0 {
            try db.execute(
                """
                WITH gone AS (DELETE FROM tabsync_rekeys WHERE workspace = $1 AND version <= $2)
                DELETE FROM tabsync_ops WHERE workspace = $1 AND version <= $2
                """, [workspace, .int64(horizon)])
        }
    }

    private func encoded<T>(_ body: () throws(StoreError) -> T) throws(PGError) -> T {
        do {
            return try body()
        } catch {
            throw Self.carry(error)
        }
    }

    /// Inserts `rows` with as few statements as PostgreSQL's parameter limit allows.
    private func insertRows(_ head: String, _ tail: String, _ rows: [[PGValue]], _ db: PGConnection) throws(PGError) {
        guard let width = rows.first?.count else { return }
        let chunk = max(1, 30_000 / width)
        var start = 0
        while start < rows.count {
            let slice = rows[start..<min(rows.count, start + chunk)]
            var sql = head
            var parameter = 0
            for (index, _) in slice.enumerated() {
                sql += index == 0 ? " (" : ", ("
                sql += (0..<width).map { _ in
                    parameter += 1
                    return "$\(parameter)"
                }.joined(separator: ", ")
                sql += ")"
            }
            sql += " " + tail
            try db.execute(sql, Array(slice.joined()))
            start += chunk
        }
    }
}

extension StoreError {
    /// Prefix of a ``StoreError`` carried inside a `PGError` (see `PostgresStore.carry`).
    static let marker = "\u{0}tabsync-store-error:"
}
