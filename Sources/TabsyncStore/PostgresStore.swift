import Foundation
import Synchronization
import TabsyncCore
import TabsyncLock

/// A ``WorkspaceStore`` in PostgreSQL, shared by several server nodes.
///
/// Guarantees:
/// - ``commit(_:)`` is one transaction: after it returns the batch is durable (as PostgreSQL's
///   `synchronous_commit` makes it); when it throws `writeFailed` or `behind`, none of the batch is
///   stored. When the connection breaks during `COMMIT` itself the outcome is not known from the
///   answer: the store asks PostgreSQL on a new connection whether the batch's transaction
///   committed (`pg_xact_status` of the id it noted inside the transaction), for at most
///   ``Options/commitResolveTimeoutSeconds``. Committed: `commit` returns (the batch is stored);
///   rolled back: `writeFailed`; no answer in time: ``StoreError/outcomeUnknown(_:)``, the one
///   error after which the batch may or may not be stored.
/// - Ordering between writers: each commit first locks and moves the workspace's version row
///   (in workspace order, so two nodes never deadlock); a batch whose base version is not the
///   stored one is refused whole with `behind`, and so is one consuming a client's seq another
///   writer already consumed (the seq fence, ``CommitBatch/firstSeqs``). A committed batch sends one
///   `pg_notify` per workspace it touched that another live node holds (``HolderRegistry``; never
///   one per op): `workspace:version`, with the batch's ops, refusals and last seqs when they fit
///   (``CommitNotification``), which ``PostgresListener`` receives on the other nodes.
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
        /// How long a commit whose `COMMIT` lost its answer keeps asking PostgreSQL whether it took
        /// effect (reconnecting meanwhile) before it gives up with `outcomeUnknown`.
        public var commitResolveTimeoutSeconds: Double
        /// How long a node's holds stay live after its last heartbeat (``HolderRegistry``): past
        /// it the node is taken for gone and commits stop notifying it (it still polls).
        public var holderTimeoutSeconds: Double
        /// A node's transaction that waits on the node this long (the node was paused or froze
        /// mid-commit) is ended by PostgreSQL, freeing the workspace rows it locked, so the other
        /// nodes' commits to them go on; the node's own commit then fails (its `COMMIT` finds the
        /// connection gone, and it learns the transaction rolled back).
        public var idleInTransactionSeconds: Double
        /// How long history is kept (``HistoryRetention``; off: the resume window only).
        public var history: HistoryRetention = .off
        /// Ops a load reads before the snapshot at most (the server's log retention).
        public var loadWindow = 10_000
        /// The node's clock, for when a commit writes a milestone (commit times are PostgreSQL's).
        public var clock = CommitClock()
        /// Stamp commits with ``clock`` instead of the database's `now()` (tests of retention; every
        /// node's ops are otherwise on the database's one clock).
        public var stampsWithNodeClock = false

        public init(
            snapshotInterval: Int = 256, connectTimeoutSeconds: Int = 3, schema: String? = nil,
            applicationName: String = "tabsync-server", commitResolveTimeoutSeconds: Double = 15,
            holderTimeoutSeconds: Double = 10, idleInTransactionSeconds: Double = 5
        ) {
            self.idleInTransactionSeconds = idleInTransactionSeconds
            self.holderTimeoutSeconds = holderTimeoutSeconds
            self.snapshotInterval = snapshotInterval
            self.connectTimeoutSeconds = connectTimeoutSeconds
            self.schema = schema
            self.applicationName = applicationName
            self.commitResolveTimeoutSeconds = commitResolveTimeoutSeconds
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
    /// The server process of the store's connection (0: none open): its notifications are this
    /// node's own, which its listener can skip (``PostgresListener``'s `ownBackend`).
    private let currentBackendPID = Atomic<Int32>(0)

    /// This node's name in the holder registry (``HolderRegistry``): one per store instance, so a
    /// restarted node is a new one and the old one's holds expire.
    public let node: String
    /// Notifications sent by this store's commits (``HolderRegistry/notificationsSent``).
    let notified = Atomic<UInt64>(0)

    /// The PostgreSQL server process of the connection commits go through now; 0 when none is open.
    public var backendPID: Int32 { currentBackendPID.load(ordering: .relaxed) }

    /// Connects to `url`, creates or migrates the schema and reads the epoch.
    public init(url: String, options: Options = Options()) throws(OpenError) {
        self.url = url
        self.options = options
        node = "\(ProcessInfo.processInfo.hostName):\(ProcessInfo.processInfo.processIdentifier):\(StoreEpoch.random().prefix(8))"
        let db = try Self.connect(url: url, options: options)
        epoch = try Self.migrate(db, schema: options.schema, newEpoch: StoreEpoch.random())
        let pid = db.backendPID
        connection = Lock(db)
        currentBackendPID.store(pid, ordering: .relaxed)
    }

    /// Creates or migrates the schema and returns; for operators who migrate separately
    /// (`tabsync-server migrate`). Safe to run while nodes start: it takes the same lock.
    public static func migrate(url: String, options: Options = Options()) throws(OpenError) {
        let db = try connect(url: url, options: options)
        defer { db.close() }
        _ = try migrate(db, schema: options.schema, newEpoch: StoreEpoch.random())
    }

    private static func connect(url: String, options: Options) throws(OpenError) -> PGConnection {
        do {
            return try PGConnection(
                url: url, connectTimeoutSeconds: options.connectTimeoutSeconds,
                applicationName: options.applicationName, schema: options.schema,
                idleInTransactionSeconds: options.idleInTransactionSeconds)
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
        // Set when the connection broke during COMMIT: the id of the transaction whose fate is unknown.
        var lostCommit: String?
        do throws(StoreError) {
            try withConnection(failure: StoreError.writeFailed) { db throws(PGError) in
                try self.commit(batch, db, lostCommit: &lostCommit)
            }
        } catch {
            guard let xid = lostCommit else { throw error }
            try resolveLostCommit(xid: xid, lost: error)
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

    /// The connection broke while `COMMIT` of transaction `xid` was under way: asks PostgreSQL on a
    /// new connection whether it committed, until ``Options/commitResolveTimeoutSeconds`` has
    /// passed. Returns when it committed; throws `writeFailed` when it was rolled back,
    /// `outcomeUnknown` when no answer came in time (or the id is too old to look up).
    private func resolveLostCommit(xid: String, lost: StoreError) throws(StoreError) {
        let deadline = ContinuousClock.now + .milliseconds(Int(options.commitResolveTimeoutSeconds * 1000))
        var why = "\(lost)"
        while true {
            let status: Result<String?, StoreError>
            do throws(StoreError) {
                status = .success(try withConnection(failure: StoreError.readFailed) { db throws(PGError) in
                    let row = try db.execute("SELECT pg_xact_status($1::xid8)", [.text(xid)])
                    return row.rowCount == 1 && !row.isNull(0, 0) ? row.text(0, 0) : nil
                })
            } catch {
                status = .failure(error)
            }
            switch status {
            case .success("committed"?):
                return
            case .success("aborted"?):
                throw .writeFailed("the connection broke during COMMIT and PostgreSQL rolled the transaction back")
            case .success(nil):
                throw .outcomeUnknown("the connection broke during COMMIT and transaction \(xid) can no longer be looked up")
            case .success(let other?):
                why = "transaction \(xid) is still \(other)"
            case .failure(let error):
                why = "\(error)"
            }
            if ContinuousClock.now >= deadline {
                throw .outcomeUnknown("the connection broke during COMMIT and PostgreSQL could not be asked how it ended: \(why)")
            }
            // A pause between two tries on the store thread (PostgreSQL restarting refuses at once).
            Thread.sleep(forTimeInterval: 0.2)
        }
    }

    /// One statement for every workspace asked (one consistent snapshot): its version row, the ops
    /// after the version asked, and the refusals made at or after it (``StoredChanges``: last seqs
    /// follow from those). Each workspace is a `LATERAL` index range scan (`OFFSET 0` keeps the
    /// planner from flattening it into a hash join over the whole log: a generic plan did that, and
    /// a read of 5 workspaces took 23 ms on a 59,000-op log instead of 1.7). Only when refusals after that version may have been trimmed (the oldest
    /// one kept is younger) are the workspace's dedup rows read whole, in the same transaction.
    public func changes(after versions: [String: UInt64]) throws(StoreError) -> [String: StoredChanges] {
        guard !versions.isEmpty else { return [:] }
        // One statement reads in one snapshot: most catch-ups need no transaction around it (two
        // round trips fewer on every node for every commit another node makes).
        if let changes = try withConnection(failure: StoreError.readFailed, { db throws(PGError) in
            try self.changes(after: versions, db, wholeLastSeqs: false)
        }) {
            return changes
        }
        // A workspace's refusals may have been trimmed since its version: its last seqs are read
        // whole, in the same snapshot as the rest.
        return try readSnapshot { db throws(PGError) in
            try self.changes(after: versions, db, wholeLastSeqs: true) ?? [:]
        }
    }

    /// ``changes(after:)`` on `db`; nil when a workspace needs its last seqs read whole and
    /// `wholeLastSeqs` is false (the caller reads again in a transaction).
    private func changes(
        after versions: [String: UInt64], _ db: PGConnection, wholeLastSeqs: Bool
    ) throws(PGError) -> [String: StoredChanges]? {
        let ids = versions.keys.sorted()
        do {
            let rows = try db.execute(
                """
                WITH h AS (SELECT * FROM unnest($1::text[], $2::int8[]) AS h(workspace, after))
                SELECT 0 AS kind, w.workspace, w.version, NULL::text, NULL::int8, NULL::text, NULL::bytea, NULL::int8,
                       (SELECT min(r.at_version) FROM tabsync_rejections r WHERE r.workspace = w.workspace)
                  FROM h CROSS JOIN LATERAL (SELECT * FROM tabsync_workspaces x WHERE x.workspace = h.workspace OFFSET 0) w
                UNION ALL
                SELECT 1, o.workspace, o.version, o.client_id, o.seq, o.active_tab_id, o.op, NULL, NULL
                  FROM h CROSS JOIN LATERAL (
                      SELECT * FROM tabsync_ops x WHERE x.workspace = h.workspace AND x.version > h.after OFFSET 0) o
                UNION ALL
                SELECT 2, r.workspace, r.n, r.client_id, r.seq, r.error_detail, NULL, r.error_code, NULL
                  FROM h CROSS JOIN LATERAL (
                      SELECT * FROM tabsync_rejections x WHERE x.workspace = h.workspace AND x.at_version >= h.after OFFSET 0) r
                ORDER BY 2, 1, 3
                """, [.array(.text, ids.map(PGValue.text)), .array(.int64, ids.map { .int64(Int64(bitPattern: versions[$0]!)) })],
                prepared: true)
            var stored: [String: (version: UInt64, oldestRefusal: Int64?)] = [:]
            var ops: [String: [AppliedOp]] = [:]
            var refusals: [String: [Sequencer.Rejection]] = [:]
            for row in 0..<rows.rowCount {
                let id = rows.text(row, 1)
                let number = UInt64(bitPattern: try rows.int64(row, 2) ?? 0)
                switch try rows.int64(row, 0) {
                case 0:
                    stored[id] = (number, try rows.int64(row, 8))
                case 1:
                    let op = try decoded { () throws(StoreError) in
                        try StoreEncoding.decodeOp(rows.bytes(row, 6), context: "op \(number) of \(id)")
                    }
                    ops[id, default: []].append(AppliedOp(
                        version: number, op: op, clientId: rows.text(row, 3), seq: UInt64(bitPattern: try rows.int64(row, 4) ?? 0),
                        activeTabId: rows.text(row, 5)))
                default:
                    let code = try rows.int64(row, 7) ?? -1
                    guard let error = StoreEncoding.decodeError(code: code, detail: rows.text(row, 5)) else {
                        throw PGError.store(.readFailed("unknown refusal code \(code) in \(id)"))
                    }
                    refusals[id, default: []].append(Sequencer.Rejection(
                        clientId: rows.text(row, 3), seq: UInt64(bitPattern: try rows.int64(row, 4) ?? 0), error: error))
                }
            }
            var result: [String: StoredChanges] = [:]
            for id in ids {
                let after = versions[id]!
                guard let (version, oldestRefusal) = stored[id] else {
                    // No version row: never stored (a refusal-only history still has its row).
                    result[id] = after == 0 ? .changes(ops: [], dedup: nil) : .compacted
                    continue
                }
                let missed = ops[id] ?? []
                let contiguous = missed.enumerated().allSatisfy { $0.element.version == after + 1 + UInt64($0.offset) }
                guard version >= after, contiguous, UInt64(missed.count) == version - after else {
                    result[id] = .compacted
                    continue
                }
                var lastSeqs: [String: UInt64] = [:]
                if let oldest = oldestRefusal, oldest > Int64(bitPattern: after) {
                    // Refusals made since `after` may have been trimmed: the last seqs, whole.
                    guard wholeLastSeqs else { return nil }
                    lastSeqs = try self.lastSeqs(id, db)
                }
                result[id] = .changes(
                    ops: missed, dedup: DedupState(version: version, lastSeqs: lastSeqs, rejections: refusals[id] ?? [], rekeys: []))
            }
            return result
        }
    }

    // MARK: - connection

    /// Runs `body` on the connection, opening one first when there is none (PostgreSQL restarted).
    /// A broken connection is dropped, so the next call reconnects.
    func withConnection<T: Sendable>(
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
                        applicationName: options.applicationName, schema: options.schema,
                        idleInTransactionSeconds: options.idleInTransactionSeconds)
                    currentBackendPID.store(db!.backendPID, ordering: .relaxed)
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
                if case .store(let carried) = error { throw carried }
                throw failure(error.description)
            }
        }
    }

    /// A read in one REPEATABLE READ transaction: its queries see one consistent state.
    private func readSnapshot<T: Sendable>(_ body: (PGConnection) throws(PGError) -> T) throws(StoreError) -> T {
        try inTransaction("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", failure: StoreError.readFailed, body)
    }

    /// `body` in one transaction opened with `begin`: committed when it returns, rolled back when it
    /// throws.
    func inTransaction<T: Sendable>(
        _ begin: String = "BEGIN", failure: @escaping (String) -> StoreError, _ body: (PGConnection) throws(PGError) -> T
    ) throws(StoreError) -> T {
        try withConnection(failure: failure) { db throws(PGError) in
            try db.execute(begin)
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
        let bounds = try db.execute(
            """
            SELECT coalesce((SELECT version FROM tabsync_snapshots WHERE workspace = $1), 0),
                   coalesce((SELECT max(version) FROM tabsync_ops WHERE workspace = $1), 0)
            """, [id])
        // Everything after the snapshot, and at most loadWindow ops in all (history keeps more).
        let start = max(0, min(try bounds.int64(0, 0) ?? 0, (try bounds.int64(0, 1) ?? 0) - Int64(max(1, options.loadWindow))))
        let log = try ops(workspaceId, after: UInt64(start), limit: .max, db)
        if StoredWorkspace.neverStored(snapshot: workspace, lastSeqs: lastSeqs, log: log) { return nil }
        let rejections = try self.rejections(workspaceId, db)
        let rekeys = try self.rekeys(workspaceId, from: StoredWorkspace.rekeyWindowStart(of: log), db)

        let state = try encoded { () throws(StoreError) in
            try StoredWorkspace.replayed(snapshot: workspace, log: log, workspaceId: workspaceId, epoch: epoch, source: "")
        }
        return StoredWorkspace(workspace: state, lastSeqs: lastSeqs, log: log, rejections: rejections, rekeys: rekeys)
    }

    private func decoded<T>(_ body: () throws(StoreError) -> T) throws(PGError) -> T {
        do {
            return try body()
        } catch {
            throw PGError.store(error)
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
                throw PGError.store(.readFailed("unknown refusal code \(code) in \(workspaceId)"))
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
                throw PGError.store(.readFailed("rekey \(rekeyVersion) of \(workspaceId) maps \(oldKeys.count) keys to \(newKeys.count)"))
            }
            result.append(RekeyRecord(version: rekeyVersion, oldKeys: oldKeys, newKeys: newKeys))
        }
        return result
    }

    /// From the log table itself, not through ``load(workspaceId:)``, whose window is the
    /// retention: a webhook cursor the compaction floor kept further back reads its ops here.
    public func ops(workspaceId: String, after version: UInt64, limit: Int) throws(StoreError) -> [AppliedOp]? {
        try withConnection(failure: StoreError.readFailed) { db throws(PGError) -> [AppliedOp]? in
            let ops = try self.ops(workspaceId, after: version, limit: limit, db)
            return ops.first.map { $0.version == version + 1 } ?? true ? ops : nil
        }
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
                throw PGError.store(.readFailed("op log of \(workspaceId) jumps from \(previous.version) to \(opVersion)"))
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

    /// Runs an encoding step inside a PostgreSQL call (its `StoreError` as a `PGError`).
    func encoded<T>(_ body: () throws(StoreError) -> T) throws(PGError) -> T {
        do {
            return try body()
        } catch {
            throw PGError.store(error)
        }
    }
}
