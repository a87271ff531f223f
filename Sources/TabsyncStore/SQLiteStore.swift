import CSQLite
import Foundation
import TabsyncCore
import TabsyncLock

/// A ``WorkspaceStore`` in one SQLite file, in WAL mode: the embedded default.
///
/// Guarantees:
/// - ``commit(_:)`` is one transaction: after it returns, the whole batch survives a killed process
///   (`synchronous=NORMAL`, ``Options/Sync/normal``) or also a power loss (`FULL`); when it throws,
///   none of the batch is stored and the store keeps working (a full disk or read-only directory
///   refuses writes; reads go on; writes resume when the disk allows them).
/// - Per workspace it keeps a snapshot, the op log (every `Applied`, with clientId and seq) of at
///   most the batch's `logRetention` ops, and the last consumed seq per client with its refusal, if
///   it was one. A snapshot is written when a workspace first commits and again every
///   ``Options/snapshotInterval`` ops (at most `logRetention`), so log rows older than the retention
///   can always be deleted: ``load(workspaceId:)`` replays the log after the snapshot.
/// - The store-wide ``epoch`` is made when the file is created; a wiped store gets a new one.
/// - A file that is not a tabsync store is refused at open (``OpenError``) and never written.
/// - With ``Options/Checkpoint/background`` (the default) no WAL checkpoint runs inside a commit:
///   ``WALCheckpointer`` runs them on its own thread and connection, and the WAL file stays under
///   about ``Options/walLimitBytes``.
///
/// Thread-safe: one `Lock` serializes every call on the single connection. The server calls it
/// from its store thread only.
public final class SQLiteStore: WorkspaceStore {
    /// How the store is opened.
    public struct Options: Sendable, Equatable {
        /// SQLite's `synchronous` setting in WAL mode.
        public enum Sync: String, Sendable, CaseIterable {
            /// `synchronous=NORMAL`: a commit survives a killed process; the last commits before a
            /// power loss or OS crash may be lost (never half of one).
            case normal
            /// `synchronous=FULL`: every commit is fsynced: it also survives a power loss.
            case full
        }

        public var sync: Sync
        /// Where WAL checkpoints run (``Checkpoint``).
        public var checkpoint: Checkpoint
        /// With background checkpoints, the WAL size past which commits pause for a RESTART
        /// checkpoint (``WALCheckpointer``).
        public var walLimitBytes: Int64
        /// A file to append one line per commit and per checkpoint to (``StoreTrace``); nil: none.
        public var tracePath: String?
        /// WAL frames that start a checkpoint (SQLite's auto-checkpoint default).
        var checkpointStartFrames: Int32 = 1000
        /// Time without a commit after which the WAL is truncated.
        var idleCheckpointInterval: Duration = .seconds(1)
        /// Ops between snapshots of a workspace (at most the log retention is used).
        var snapshotInterval = 256
        /// How long a call waits for another connection's lock before failing.
        var busyTimeoutMilliseconds: Int32 = 5_000
        /// Runs `PRAGMA quick_check` on an existing file at open (time grows with the file's size).
        var verifyAtOpen = true
        /// A registered SQLite VFS to open the file with (tests); nil: the default.
        var vfs: String?
        /// How long history is kept (``HistoryRetention``; off: the resume window only).
        public var history: HistoryRetention = .off
        /// Ops a load reads before the snapshot at most (the server's log retention): with history
        /// on the stored log reaches much further back than a sequencer keeps.
        public var loadWindow = 10_000
        /// The clock commit times are read from (tests of retention turn it).
        public var clock = CommitClock()

        public init(
            sync: Sync = .normal, checkpoint: Checkpoint = .background, walLimitBytes: Int64 = SQLiteStore.Options.defaultWALLimitBytes,
            tracePath: String? = nil
        ) {
            self.sync = sync
            self.checkpoint = checkpoint
            self.walLimitBytes = walLimitBytes
            self.tracePath = tracePath
        }

        /// Options with the knobs tests turn (a short snapshot interval).
        init(sync: Sync = .normal, snapshotInterval: Int, busyTimeoutMilliseconds: Int32 = 5_000, verifyAtOpen: Bool = true) {
            self.sync = sync
            self.checkpoint = .background
            self.walLimitBytes = Self.defaultWALLimitBytes
            self.snapshotInterval = snapshotInterval
            self.busyTimeoutMilliseconds = busyTimeoutMilliseconds
            self.verifyAtOpen = verifyAtOpen
        }
    }

    /// The file name inside the data directory.
    public static let fileName = "tabsync.sqlite3"

    public let epoch: String
    /// The database file.
    public let path: String
    public let options: Options
    /// nil once closed.
    let connection: Lock<SQLiteConnection?>
    /// The writing connection's WAL hook (kept alive here: SQLite holds it unretained).
    private let walHook: WALHook
    /// The background checkpoints (nil with ``Options/Checkpoint/inline``).
    private let checkpointer: WALCheckpointer?
    private let trace: StoreTrace?

    /// Opens the store in `dataDirectory` (created when missing), file ``fileName``.
    public convenience init(dataDirectory: String = "data", options: Options = Options()) throws(OpenError) {
        do {
            try FileManager.default.createDirectory(atPath: dataDirectory, withIntermediateDirectories: true)
        } catch {
            throw .cannotCreateDirectory(path: dataDirectory, reason: "\(error.localizedDescription)")
        }
        try self.init(path: dataDirectory + "/" + Self.fileName, options: options)
    }

    /// Opens the store file at `path`, creating it when missing. A file that is not an empty or a
    /// tabsync database is left untouched and refused.
    public init(path: String, options: Options = Options()) throws(OpenError) {
        self.path = path
        self.options = options
        let trace = options.tracePath.flatMap { StoreTrace(path: $0) }
        let checkpointer = options.checkpoint == .background
            ? WALCheckpointer(
                path: path, vfs: options.vfs, synchronous: Self.synchronous(options.sync),
                settings: .init(
                    startFrames: options.checkpointStartFrames, limitBytes: options.walLimitBytes,
                    idleInterval: options.idleCheckpointInterval),
                trace: trace)
            : nil
        let walHook = WALHook(checkpointer: checkpointer, inlineStartFrames: options.checkpointStartFrames)
        self.trace = trace
        self.checkpointer = checkpointer
        self.walHook = walHook
        let db = try Self.openConnection(path: path, options: options, walHook: walHook)
        do throws(SQLiteError) {
            guard let stored = try db.scalarText("SELECT value FROM meta WHERE key = 'epoch'") else {
                throw SQLiteError(code: SQLITE_CORRUPT, message: "no epoch in meta", context: "read epoch")
            }
            epoch = stored
        } catch {
            throw error.isCorrupt ? .corrupt(path: path, reason: error.message) : .cannotOpen(path: path, reason: error.description)
        }
        connection = Lock(db)
        // Restart and truncate checkpoints run while this store's lock is held: no commit then.
        checkpointer?.start { [weak self] checkpoint in
            guard let self else { return }
            self.connection.withLock { _ in checkpoint() }
        }
    }

    deinit {
        checkpointer?.stop()
    }

    /// SQLite's `synchronous` value for a sync mode.
    static func synchronous(_ sync: Options.Sync) -> String { sync == .full ? "FULL" : "NORMAL" }

    /// Opens, checks, migrates and configures one connection to `path`.
    private static func openConnection(path: String, options: Options, walHook: WALHook) throws(OpenError) -> SQLiteConnection {
        let db: SQLiteConnection
        do {
            db = try SQLiteConnection(path: path, busyTimeoutMilliseconds: options.busyTimeoutMilliseconds, vfs: options.vfs)
        } catch {
            throw .cannotOpen(path: path, reason: error.description)
        }
        // Nothing is written before the file is known to be empty or ours.
        let kind = try inspect(db, verify: options.verifyAtOpen)
        let version: Int64
        switch kind {
        case .empty:
            if db.isReadOnly { throw .readOnly(path: path) }
            version = 0
        case .tabsync(let schemaVersion):
            version = schemaVersion
        }
        do throws(SQLiteError) {
            if !db.isReadOnly {
                _ = try db.scalarText("PRAGMA journal_mode = WAL")
                db.persistWAL()
                try migrate(db, from: version, newEpoch: StoreEpoch.random())
                // A backup copy's first start: history cannot continue (SQLiteStore+BackupMark.swift).
                _ = try startNewEpochIfBackup(db, newEpoch: StoreEpoch.random())
            } else if version < schemaVersion {
                throw SQLiteError(
                    code: SQLITE_READONLY, message: "schema \(version) needs a migration and the file is read-only",
                    context: "migrate")
            }
            try db.execute("PRAGMA synchronous = \(synchronous(options.sync))")
            // Replaces SQLite's auto-checkpoint: no checkpoint inside a commit (unless `inline`).
            walHook.install(on: db)
        } catch {
            if error.isReadOnly { throw .readOnly(path: path) }
            throw .cannotOpen(path: path, reason: error.description)
        }
        return db
    }

    /// Closes the connection (a clean close checkpoints the WAL into the file). Later calls throw.
    public func close() {
        // First: the checkpointer may be waiting for this lock.
        checkpointer?.stop()
        connection.withLock { db in
            db?.close()
            db = nil
        }
    }

    /// True when the store can only read (it was opened on a read-only file or directory).
    var isReadOnly: Bool {
        connection.withLock { $0.map { !$0.isOpen || $0.isReadOnly } ?? true }
    }

    // MARK: - WorkspaceStore

    public func load(workspaceId: String) throws(StoreError) -> StoredWorkspace? {
        try read { db throws(StoreError) in try self.load(workspaceId, db) }
    }

    /// From the log table itself, not through ``load(workspaceId:)``, whose window is the
    /// retention: a webhook cursor the compaction floor kept further back reads its ops here.
    public func ops(workspaceId: String, after version: UInt64, limit: Int) throws(StoreError) -> [AppliedOp]? {
        try read { db throws(StoreError) in
            let ops = try self.ops(workspaceId, after: version, limit: limit, db)
            return ops.first.map { $0.version == version + 1 } ?? true ? ops : nil
        }
    }

    public func commit(_ batch: CommitBatch) throws(StoreError) {
        try connection.withLock { (db: inout SQLiteConnection?) throws(StoreError) in
            guard let current = db else { throw StoreError.writeFailed("store \(path) is closed") }
            // A connection opened on a read-only file stays read-only: reopen, writes may be back.
            // The old one closes first: connections of one process share the file's lock and -shm state.
            if current.isReadOnly {
                current.close()
                var reopen = options
                reopen.verifyAtOpen = false
                db = try? Self.openConnection(path: path, options: reopen, walHook: walHook)
            }
            guard let writable = db, !writable.isReadOnly else {
                throw StoreError.writeFailed("store \(path) is read-only")
            }
            guard let trace else { return try self.commit(batch, writable) }
            walHook.commitStarts()
            let started = ContinuousClock.now
            defer {
                let ms = StoreTrace.milliseconds(ContinuousClock.now - started)
                let ops = batch.records.reduce(0) { count, record in
                    if case .applied(let ops) = record.outcome { return count + ops.count }
                    return count
                }
                trace.record(
                    "commit records=\(batch.records.count) ops=\(ops) ms=\(StoreTrace.format(ms)) "
                        + "checkpoint_ms=\(StoreTrace.format(StoreTrace.milliseconds(walHook.inlineCheckpoint))) "
                        + "wal_frames=\(walHook.walFrames)")
            }
            try self.commit(batch, writable)
        }
    }

    /// Checkpoints the background checkpointer ran so far (passive, restart, truncate); nil with
    /// inline checkpoints.
    var checkpointRuns: (passive: Int, restart: Int, truncate: Int)? { checkpointer?.runs }

    // MARK: - implementation

    /// Runs a read on the connection.
    private func read<T: Sendable>(_ body: (SQLiteConnection) throws(StoreError) -> T) throws(StoreError) -> T {
        try connection.withLock { (db: inout SQLiteConnection?) throws(StoreError) -> T in
            guard let db else { throw StoreError.readFailed("store \(path) is closed") }
            return try body(db)
        }
    }

    private static func readFailure(_ error: any Error) -> StoreError {
        if let error = error as? StoreError { return error }
        return .readFailed("\(error)")
    }

    private func load(_ workspaceId: String, _ db: SQLiteConnection) throws(StoreError) -> StoredWorkspace? {
        do {
            let snapshotQuery = try db.prepare("SELECT snapshot FROM snapshots WHERE workspace = ?")
            try snapshotQuery.bind(.text(workspaceId))
            var workspace: Workspace?
            if try snapshotQuery.step() {
                workspace = try StoreEncoding.decodeSnapshot(
                    snapshotQuery.blob(0), context: "\(path): snapshot of \(workspaceId)")
            }
            snapshotQuery.reset()

            let seqQuery = try db.prepare("SELECT client_id, seq FROM client_seqs WHERE workspace = ?")
            try seqQuery.bind(.text(workspaceId))
            var lastSeqs: [String: UInt64] = [:]
            while try seqQuery.step() { lastSeqs[seqQuery.text(0)] = UInt64(bitPattern: seqQuery.int64(1)) }

            let log = try ops(workspaceId, after: try loadStart(workspaceId, db), db)
            if StoredWorkspace.neverStored(snapshot: workspace, lastSeqs: lastSeqs, log: log) { return nil }

            let rejectionQuery = try db.prepare(
                "SELECT client_id, seq, error_code, error_detail FROM rejections WHERE workspace = ? ORDER BY n")
            try rejectionQuery.bind(.text(workspaceId))
            var rejections: [Sequencer.Rejection] = []
            while try rejectionQuery.step() {
                guard let error = StoreEncoding.decodeError(code: rejectionQuery.int64(2), detail: rejectionQuery.text(3)) else {
                    throw StoreError.readFailed("\(path): unknown refusal code \(rejectionQuery.int64(2)) in \(workspaceId)")
                }
                rejections.append(Sequencer.Rejection(
                    clientId: rejectionQuery.text(0), seq: UInt64(bitPattern: rejectionQuery.int64(1)), error: error))
            }

            let rekeyQuery = try db.prepare(
                "SELECT version, old_keys, new_keys FROM rekeys WHERE workspace = ? AND version >= ? ORDER BY version")
            try rekeyQuery.bind(.text(workspaceId), .integer(Int64(bitPattern: StoredWorkspace.rekeyWindowStart(of: log))))
            var rekeys: [RekeyRecord] = []
            while try rekeyQuery.step() {
                let version = UInt64(bitPattern: rekeyQuery.int64(0))
                let oldKeys = StoreEncoding.decodeKeys(rekeyQuery.text(1))
                let newKeys = StoreEncoding.decodeKeys(rekeyQuery.text(2))
                guard oldKeys.count == newKeys.count else {
                    throw StoreError.readFailed("\(path): rekey \(version) of \(workspaceId) maps \(oldKeys.count) keys to \(newKeys.count)")
                }
                rekeys.append(RekeyRecord(version: version, oldKeys: oldKeys, newKeys: newKeys))
            }

            let state = try StoredWorkspace.replayed(
                snapshot: workspace, log: log, workspaceId: workspaceId, epoch: epoch, source: "\(path): ")
            return StoredWorkspace(workspace: state, lastSeqs: lastSeqs, log: log, rejections: rejections, rekeys: rekeys)
        } catch {
            throw Self.readFailure(error)
        }
    }

    /// The version a load reads the log after: everything after the snapshot, and at most
    /// ``Options/loadWindow`` ops in all when the log reaches further (history).
    private func loadStart(_ workspaceId: String, _ db: SQLiteConnection) throws -> UInt64 {
        let snapshot = try db.scalar("SELECT version FROM snapshots WHERE workspace = ?", .text(workspaceId)) ?? 0
        let newest = try db.scalar("SELECT max(version) FROM ops WHERE workspace = ?", .text(workspaceId)) ?? 0
        return UInt64(max(0, min(snapshot, newest - Int64(max(1, options.loadWindow)))))
    }

    /// The stored ops after `version`, oldest first, at most `limit` (nil: all); throws when they
    /// are not contiguous.
    private func ops(_ workspaceId: String, after version: UInt64, limit: Int? = nil, _ db: SQLiteConnection) throws(StoreError) -> [AppliedOp] {
        do {
            let query = try db.prepare(
                "SELECT version, client_id, seq, active_tab_id, op FROM ops WHERE workspace = ? AND version > ? ORDER BY version LIMIT ?")
            defer { query.reset() }
            try query.bind(.text(workspaceId), .integer(Int64(bitPattern: version)), .integer(limit.map { Int64(max(0, $0)) } ?? -1))
            var result: [AppliedOp] = []
            while try query.step() {
                let opVersion = UInt64(bitPattern: query.int64(0))
                if let previous = result.last, previous.version + 1 != opVersion {
                    throw StoreError.readFailed("\(path): op log of \(workspaceId) jumps from \(previous.version) to \(opVersion)")
                }
                let op = try StoreEncoding.decodeOp(query.blob(4), context: "\(path): op \(opVersion) of \(workspaceId)")
                result.append(
                    AppliedOp(
                        version: opVersion, op: op, clientId: query.text(1), seq: UInt64(bitPattern: query.int64(2)),
                        activeTabId: query.text(3)))
            }
            return result
        } catch {
            throw Self.readFailure(error)
        }
    }

    /// The batch in one transaction; rolled back whole on any failure.
    private func commit(_ batch: CommitBatch, _ db: SQLiteConnection) throws(StoreError) {
        do throws(SQLiteError) {
            try db.begin()
        } catch {
            throw .writeFailed("\(path): \(error)")
        }
        do {
            // Inside the write transaction (BEGIN IMMEDIATE): no other writer can move a version on now.
            let stale = try batch.staleWorkspaces(
                stored: { (id: String) throws(StoreError) -> UInt64 in
                    do {
                        let version = try db.scalar(
                            """
                            SELECT max(coalesce((SELECT max(version) FROM ops WHERE workspace = ?1), 0),
                                       coalesce((SELECT version FROM snapshots WHERE workspace = ?1), 0))
                            """, .text(id))
                        return UInt64(bitPattern: version ?? 0)
                    } catch {
                        throw .writeFailed("\(path): \(error)")
                    }
                },
                lastSeq: { (id: String, client: String) throws(StoreError) -> UInt64 in
                    do {
                        let seq = try db.scalar(
                            "SELECT seq FROM client_seqs WHERE workspace = ?1 AND client_id = ?2", .text(id), .text(client))
                        return UInt64(bitPattern: seq ?? 0)
                    } catch {
                        throw .writeFailed("\(path): \(error)")
                    }
                })
            if !stale.isEmpty { throw StoreError.behind(storedVersions: stale) }
            let committedMs = try commitStamp(batch, db)
            for record in batch.records { try write(record, committedMs: committedMs, db) }
            let retention = max(batch.logRetention, 1)
            for (workspaceId, workspace) in batch.workspaces where workspace.version > 0 {
                try compact(workspaceId, workspace, retention: retention, interval: options.snapshotInterval, nowMs: committedMs, db)
            }
            var refusing = Set<String>()
            for record in batch.records {
                if case .rejected = record.outcome { refusing.insert(record.workspaceId) }
            }
            for workspaceId in refusing {
                // The last `retention` refusals stay answerable; n counts up per workspace.
                let trim = try db.prepare(
                    "DELETE FROM rejections WHERE workspace = ?1 AND n <= (SELECT max(n) FROM rejections WHERE workspace = ?1) - ?2")
                try trim.bind(.text(workspaceId), .integer(Int64(retention)))
                try trim.run()
            }
            try db.commit()
        } catch {
            db.rollback()
            if let error = error as? StoreError { throw error }
            throw .writeFailed("\(path): \(error)")
        }
    }

    /// The batch's commit time (Unix ms): the clock, but past the newest stored op of every
    /// workspace the batch writes, so a workspace's commit times strictly increase (two commits in
    /// one millisecond, or a clock stepped back) and each history entry's `at` names the state
    /// after its batch (docs/design.md, "Reading history").
    private func commitStamp(_ batch: CommitBatch, _ db: SQLiteConnection) throws -> Int64 {
        var stamp = options.clock.milliseconds()
        let newest = try db.prepare("SELECT committed_ms FROM ops WHERE workspace = ? ORDER BY version DESC LIMIT 1")
        for workspaceId in Set(batch.records.map(\.workspaceId)) {
            // Reset at once: the statement is the connection's cached one, and a stepped statement
            // left active holds its read snapshot past the commit (a second writer's commits
            // were then invisible to this connection's loads).
            defer { newest.reset() }
            try newest.bind(.text(workspaceId))
            if try newest.step(), !newest.isNull(0) { stamp = max(stamp, newest.int64(0) + 1) }
        }
        return stamp
    }

    private func write(_ record: CommitRecord, committedMs: Int64, _ db: SQLiteConnection) throws {
        let seqs = try db.prepare(
            """
            INSERT INTO client_seqs (workspace, client_id, seq, error_code, error_detail) VALUES (?, ?, ?, ?, ?)
            ON CONFLICT (workspace, client_id) DO UPDATE
            SET seq = excluded.seq, error_code = excluded.error_code, error_detail = excluded.error_detail
            WHERE excluded.seq > client_seqs.seq
            """)
        switch record.outcome {
        case .applied(let ops):
            try seqs.bind(.text(record.workspaceId), .text(record.clientId), .integer(Int64(bitPattern: record.seq)), .null, .null)
            if record.seq > 0 { try seqs.run() }
            let insert = try db.prepare(
                """
                INSERT INTO ops (workspace, version, client_id, seq, active_tab_id, op, author, committed_ms)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                """)
            for applied in ops {
                insert.reset()
                try insert.bind(
                    .text(record.workspaceId), .integer(Int64(bitPattern: applied.version)), .text(applied.clientId),
                    .integer(Int64(bitPattern: applied.seq)), .text(applied.activeTabId),
                    .blob(try StoreEncoding.encode(applied.op)), .text(record.author), .integer(committedMs))
                try insert.run()
            }
            for rekey in record.rekeys {
                let insertRekey = try db.prepare(
                    "INSERT INTO rekeys (workspace, version, old_keys, new_keys) VALUES (?, ?, ?, ?)")
                try insertRekey.bind(
                    .text(record.workspaceId), .integer(Int64(bitPattern: rekey.version)),
                    .text(StoreEncoding.encodeKeys(rekey.oldKeys)), .text(StoreEncoding.encodeKeys(rekey.newKeys)))
                try insertRekey.run()
            }
        case .rejected(let error):
            let (code, detail) = StoreEncoding.encode(error)
            try seqs.bind(
                .text(record.workspaceId), .text(record.clientId), .integer(Int64(bitPattern: record.seq)),
                .integer(code), .text(detail))
            try seqs.run()
            let refusal = try db.prepare(
                """
                INSERT INTO rejections (workspace, n, client_id, seq, error_code, error_detail)
                VALUES (?1, (SELECT coalesce(max(n), 0) + 1 FROM rejections WHERE workspace = ?1), ?2, ?3, ?4, ?5)
                """)
            try refusal.bind(
                .text(record.workspaceId), .text(record.clientId), .integer(Int64(bitPattern: record.seq)),
                .integer(code), .text(detail))
            try refusal.run()
        }
    }

    /// Writes a snapshot and trims the log as ``RetentionPlan`` says; with history on, keeps
    /// milestones and trims by time as ``HistoryRetention`` says instead.
    private func compact(
        _ workspaceId: String, _ workspace: Workspace, retention: Int, interval: Int, nowMs: Int64, _ db: SQLiteConnection
    ) throws {
        let version = Int64(bitPattern: workspace.version)
        let snapshotVersion = try db.scalar("SELECT version FROM snapshots WHERE workspace = ?", .text(workspaceId))
        let plan = RetentionPlan(version: version, lastSnapshot: snapshotVersion, retention: retention, snapshotInterval: interval)
        var encoded: [UInt8]?
        if plan.writesSnapshot {
            let upsert = try db.prepare(
                """
                INSERT INTO snapshots (workspace, version, snapshot) VALUES (?, ?, ?)
                ON CONFLICT (workspace) DO UPDATE SET version = excluded.version, snapshot = excluded.snapshot
                """)
            encoded = try StoreEncoding.encode(workspace)
            try upsert.bind(.text(workspaceId), .integer(version), .blob(encoded!))
            try upsert.run()
        }
        var horizon = plan.horizon
        if options.history.isOn {
            let last = try db.prepare("SELECT version, committed_ms FROM milestones WHERE workspace = ? ORDER BY version DESC LIMIT 1")
            try last.bind(.text(workspaceId))
            let lastMs: Int64? = try last.step() ? last.int64(1) : nil
            let lastVersion: Int64 = lastMs == nil ? 0 : last.int64(0)
            last.reset()
            let history = options.history.plan(
                nowMs: nowMs, lastMilestoneMs: lastMs, writesSnapshot: version - lastVersion >= Int64(max(1, interval)))
            if history.writesMilestone, version > lastVersion {
                let insert = try db.prepare("INSERT INTO milestones (workspace, version, committed_ms, snapshot) VALUES (?, ?, ?, ?)")
                try insert.bind(.text(workspaceId), .integer(version), .integer(nowMs), .blob(try encoded ?? StoreEncoding.encode(workspace)))
                try insert.run()
            }
            // Ops go only with the day's trim: a prefix committed before the cut-off, never into
            // the resume window (the horizon).
            horizon = 0
            if history.trims {
                let old = try db.scalar(
                    "SELECT max(version) FROM ops WHERE workspace = ? AND version <= ? AND coalesce(committed_ms, 0) < ?",
                    .text(workspaceId), .integer(plan.horizon), .integer(history.opsBeforeMs)) ?? 0
                // (scalar reads NULL as 0: the empty case is spelled out in SQL.)
                horizon = try db.scalar(
                    "SELECT coalesce(min(version) - 1, ?2) FROM ops WHERE workspace = ?1 AND version <= ?2 AND coalesce(committed_ms, 0) >= ?3",
                    .text(workspaceId), .integer(old), .integer(history.opsBeforeMs)) ?? 0
                let thin = try db.prepare(
                    """
                    DELETE FROM milestones WHERE workspace = ?1 AND committed_ms < ?2 AND (committed_ms < ?3 OR version <> (
                        SELECT max(m.version) FROM milestones m WHERE m.workspace = ?1 AND m.committed_ms / 86400000 = milestones.committed_ms / 86400000))
                    """)
                try thin.bind(.text(workspaceId), .integer(history.opsBeforeMs), .integer(history.milestonesBeforeMs))
                try thin.run()
            }
        }
        if horizon > 0 {
            horizon = RetentionPlan.hookFloored(
                horizon, floor: try hookFloor(workspaceId, db), version: version, retention: retention)
        }
        if horizon > 0 {
            let delete = try db.prepare("DELETE FROM ops WHERE workspace = ? AND version <= ?")
            try delete.bind(.text(workspaceId), .integer(horizon))
            try delete.run()
            // A rekey leaves with the log window it translates keys of.
            let deleteRekeys = try db.prepare("DELETE FROM rekeys WHERE workspace = ? AND version <= ?")
            try deleteRekeys.bind(.text(workspaceId), .integer(horizon))
            try deleteRekeys.run()
        }
    }
}

extension SQLiteStore {
    /// The lowest version an enabled webhook delivered of the workspace (nil: no enabled hook has a
    /// cursor of it): compaction keeps the ops after it (``RetentionPlan/hookFloored``).
    private func hookFloor(_ workspaceId: String, _ db: SQLiteConnection) throws -> Int64? {
        let query = try db.prepare(
            """
            SELECT min(c.delivered) FROM webhook_cursors c JOIN webhooks w ON w.id = c.hook
            WHERE c.workspace = ? AND w.disabled_reason IS NULL
            """)
        defer { query.reset() }
        try query.bind(.text(workspaceId))
        guard try query.step(), !query.isNull(0) else { return nil }
        return query.int64(0)
    }

    /// Runs raw SQL on the store's connection and returns the first column of the first row, if
    /// any. For tests only (e.g. `PRAGMA max_page_count` to simulate a full disk, reading pragmas).
    func rawQueryForTesting(_ sql: String) throws(SQLiteError) -> String? {
        try connection.withLock { (db: inout SQLiteConnection?) throws(SQLiteError) -> String? in
            guard let db else { throw SQLiteError(code: SQLITE_MISUSE, message: "closed", context: sql) }
            return try db.scalarText(sql)
        }
    }
}
