import TabsyncCore

/// The PostgreSQL commit (docs/architecture.md, "The PostgreSQL commit"): one transaction of a fixed
/// number of statements whatever the batch holds, in two round trips. ``commit(_:_:lostCommit:)``
/// runs it; ``lockVersionRows(_:_:_:)`` is the first round trip; ``PostgresCommitRows`` gathers the
/// batch's rows and makes the statements of the second.
extension PostgresStore {
    /// The batch in one transaction of a fixed number of statements, whatever the number of
    /// workspaces and records in it (each carries the rows of every workspace as arrays:
    /// `unnest($1::text[], ...)`), each prepared once per connection, sent in two round trips (two
    /// pipelines: `BEGIN` and the locks, then the writes and `COMMIT`: docs/architecture.md, "The
    /// PostgreSQL commit"); rolled back whole on any failure. When the connection breaks during the
    /// second, `lostCommit` is the transaction's id (its outcome is unknown here).
    func commit(_ batch: CommitBatch, _ db: PGConnection, lostCommit: inout String?) throws(PGError) {
        var byWorkspace: [String: [CommitRecord]] = [:]
        for record in batch.records { byWorkspace[record.workspaceId, default: []].append(record) }
        let touched = Set(byWorkspace.keys).union(batch.workspaces.keys).union(batch.baseVersions.keys).sorted()
        guard !touched.isEmpty else { return }
        do throws(PGError) {
            let locked = try lockVersionRows(touched, batch, db)
            // Every workspace whose stored version is not the batch's base for it: nothing is written.
            var stale: [String: UInt64] = [:]
            for (id, base) in batch.baseVersions {
                let stored = locked.rows[id]?.version ?? 0
                if stored != base || (base > 0 && locked.rows[id] == nil) || locked.rows[id]?.seqTaken == true {
                    stale[id] = stored
                }
            }
            guard stale.isEmpty else {
                try db.execute("ROLLBACK")
                throw PGError.store(.behind(storedVersions: stale))
            }
            var rows = PostgresCommitRows()
            if options.stampsWithNodeClock { rows.commitMs = options.clock.milliseconds() }
            for id in touched {
                try rows.add(
                    id, byWorkspace[id] ?? [], batch, locked.rows[id], snapshotInterval: options.snapshotInterval,
                    history: options.history, nowMs: options.clock.milliseconds())
            }
            let writes = rows.statements(channel: options.channel, node: node, holderTimeoutMillis: holderTimeoutMillis)
            do throws(PGError) {
                let results = try db.pipeline(writes + [.commit])
                var notifications: UInt64 = 0
                for row in 0..<results[0].rowCount { notifications += UInt64(try results[0].int64(row, 0) ?? 0) }
                notified.add(notifications, ordering: .relaxed)
            } catch {
                // Broken on the way: COMMIT may have run. A failure PostgreSQL answered leaves the
                // transaction failed (rolled back below) or, when COMMIT itself failed, ended.
                if error.isConnectionLost || !db.isUsable { lostCommit = locked.transaction }
                throw error
            }
        } catch {
            if db.isUsable && db.inTransaction { _ = try? db.execute("ROLLBACK") }
            throw error
        }
    }

    /// A workspace's version row, locked, its snapshot's version (-1: none), and whether another
    /// writer already consumed a seq the batch consumes (``CommitBatch/firstSeqs``: the seq fence).
    struct LockedRow {
        var version: UInt64
        var snapshotVersion: Int64
        var seqTaken: Bool
        /// The newest milestone's version and commit time (Unix ms), nil when none.
        var lastMilestone: (version: Int64, ms: Int64)? = nil
    }

    /// Opens the transaction, creates the version rows of workspaces that may be new (no base
    /// version, or base 0), then locks every touched row in workspace order (so two nodes never
    /// deadlock) and reads its stored version, its snapshot's version and the transaction's id (for
    /// `pg_xact_status` should the answer to `COMMIT` be lost). Then, for a batch with base
    /// versions, the seq fence: a statement of its own, so its snapshot is taken after the lock is
    /// held (a subquery of the locking statement would read the dedup rows as they were before it
    /// waited for the lock). All in one pipeline: one round trip.
    ///
    /// Each statement finds its rows by key, through `= ANY` or a per-row subquery: joined with the
    /// batch's `unnest` arrays, a generic plan hashes the whole table instead, on every commit (the
    /// fence did with 1,000 dedup rows: 104 µs of a commit's 180 µs in PostgreSQL, growing with
    /// every client a workspace ever had).
    private func lockVersionRows(
        _ touched: [String], _ batch: CommitBatch, _ db: PGConnection
    ) throws(PGError) -> (rows: [String: LockedRow], transaction: String) {
        var statements: [PGStatement] = [.begin]
        let maybeNew = touched.filter { (batch.baseVersions[$0] ?? 0) == 0 }
        if !maybeNew.isEmpty {
            statements.append(PGStatement(
                "INSERT INTO tabsync_workspaces (workspace, version) SELECT unnest($1::text[]), 0 ON CONFLICT (workspace) DO NOTHING",
                [.array(.text, maybeNew.map(PGValue.text))]))
        }
        let lockAt = statements.count
        statements.append(PGStatement(
            """
            SELECT w.workspace, w.version,
                   coalesce((SELECT s.version FROM tabsync_snapshots s WHERE s.workspace = w.workspace), -1),
                   pg_current_xact_id()::text,
                   coalesce((SELECT m.version FROM tabsync_milestones m WHERE m.workspace = w.workspace ORDER BY m.version DESC LIMIT 1), -1),
                   (SELECT (extract(epoch FROM m.committed_at) * 1000)::int8 FROM tabsync_milestones m
                    WHERE m.workspace = w.workspace ORDER BY m.version DESC LIMIT 1)
            FROM tabsync_workspaces w WHERE w.workspace = ANY($1::text[]) ORDER BY w.workspace FOR UPDATE
            """, [.array(.text, touched.map(PGValue.text))]))
        var fence: [[PGValue]] = [[], [], []]
        for (id, clients) in batch.firstSeqs.sorted(by: { $0.key < $1.key }) {
            for (client, seq) in clients.sorted(by: { $0.key < $1.key }) {
                PostgresCommitRows.append(&fence, [.text(id), .text(client), .int64(Int64(bitPattern: seq))])
            }
        }
        if !fence[0].isEmpty {
            statements.append(PGStatement(
                """
                SELECT f.workspace FROM unnest($1::text[], $2::text[], $3::int8[]) AS f(workspace, client_id, seq)
                WHERE (SELECT c.seq FROM tabsync_client_seqs c WHERE c.workspace = f.workspace AND c.client_id = f.client_id) >= f.seq
                """, PostgresCommitRows.arrays(fence, [.text, .text, .int64])))
        }
        let results = try db.pipeline(statements)
        let result = results[lockAt]
        var taken: Set<String> = []
        if results.count > lockAt + 1 {
            let clashes = results[lockAt + 1]
            for row in 0..<clashes.rowCount { taken.insert(clashes.text(row, 0)) }
        }
        var rows: [String: LockedRow] = [:]
        for row in 0..<result.rowCount {
            let id = result.text(row, 0)
            let milestone = try result.int64(row, 4) ?? -1
            rows[id] = LockedRow(
                version: UInt64(bitPattern: try result.int64(row, 1) ?? 0), snapshotVersion: try result.int64(row, 2) ?? -1,
                seqTaken: taken.contains(id),
                lastMilestone: milestone < 0 ? nil : (milestone, try result.int64(row, 5) ?? 0))
        }
        let transaction = result.rowCount > 0
            ? result.text(0, 3) : try db.execute("SELECT pg_current_xact_id()::text", prepared: true).text(0, 0)
        return (rows, transaction)
    }
}

/// The rows one batch writes, gathered per table as column arrays (one array parameter per column:
/// `unnest($1::text[], ...)`), and the statements that write them: version rows first (and one
/// `pg_notify` per workspace, sent only if the transaction commits; the statement's rows count
/// them), dedup rows, ops, rekeys, refusals, then snapshots and compaction where due. The number of
/// statements does not depend on the number of workspaces or records.
struct PostgresCommitRows {
    private var versionIds: [PGValue] = [], versions: [PGValue] = [], payloads: [PGValue] = []
    private var seqRows: [[PGValue]] = [[], [], [], [], []]
    private var opRows: [[PGValue]] = [[], [], [], [], [], [], []]
    /// The commit time to store (Unix ms); nil: the database's `now()` (``PostgresStore/Options/stampsWithNodeClock``).
    var commitMs: Int64?
    private var rekeyRows: [[PGValue]] = [[], [], [], []]
    private var refusalRows: [[PGValue]] = [[], [], [], [], [], [], []]
    private var snapshotRows: [[PGValue]] = [[], [], []]
    /// Per workspace: the trim horizon and the lowest the webhook floor may hold it at
    /// (``RetentionPlan/hookFloored``; the floor itself is read in the statement).
    private var horizonRows: [[PGValue]] = [[], [], []]
    private var milestoneRows: [[PGValue]] = [[], [], []]
    private var historyTrimRows: [[PGValue]] = [[], [], [], [], []]
    /// Workspaces with a refusal in the batch (their old refusals are trimmed).
    private var refused: Set<String> = []
    /// How many refusals per workspace stay answerable (the batch's log retention).
    private var refusalRetention = 1

    /// Adds workspace `id`'s rows: `records`, its records in the batch, in order; `locked`, its
    /// locked version row (nil: none yet).
    mutating func add(
        _ id: String, _ records: [CommitRecord], _ batch: CommitBatch, _ locked: PostgresStore.LockedRow?, snapshotInterval: Int,
        history: HistoryRetention = .off, nowMs: Int64 = 0
    ) throws(PGError) {
        let retention = max(batch.logRetention, 1)
        refusalRetention = retention
        let workspace = PGValue.text(id)
        let stored = locked?.version ?? 0
        var newVersion = batch.workspaces[id]?.version ?? batch.baseVersions[id] ?? stored
        for record in records {
            if case .applied(let ops) = record.outcome, let last = ops.last { newVersion = max(newVersion, last.version) }
        }
        // A single writer (no base version) never moves the row backwards.
        if batch.baseVersions[id] == nil { newVersion = max(newVersion, stored) }
        versionIds.append(workspace)
        versions.append(.int64(Int64(bitPattern: newVersion)))
        var announced = CommitNotification.Changes(base: stored, ops: [], refusals: [], lastSeqs: [:])
        addDedupRows(workspace, records, announcing: &announced)
        try addRecordRows(id, records, stored: stored, announcing: &announced)

        // The other nodes take the batch from the notification when it fits (CommitNotification).
        let contiguous = newVersion == stored + UInt64(announced.ops.count)
        payloads.append(.text(CommitNotification(
            workspaceId: id, version: newVersion, changes: contiguous ? announced : nil).payload()))

        guard let state = batch.workspaces[id], state.version > 0 else { return }
        let stateVersion = Int64(bitPattern: state.version)
        let lastSnapshot = locked?.snapshotVersion ?? -1
        let plan = RetentionPlan(
            version: stateVersion, lastSnapshot: lastSnapshot < 0 ? nil : lastSnapshot, retention: retention,
            snapshotInterval: snapshotInterval)
        var bytes: [UInt8]?
        if plan.writesSnapshot {
            bytes = try encoded { () throws(StoreError) in try StoreEncoding.encode(state) }
            Self.append(&snapshotRows, [workspace, .int64(stateVersion), .bytes(bytes!)])
        }
        let hookLowest = PGValue.int64(stateVersion - Int64(retention) * RetentionPlan.hookBacklogFactor)
        guard history.isOn else {
            // A rekey leaves with the log window it translates keys of.
            if plan.horizon > 0 { Self.append(&horizonRows, [workspace, .int64(plan.horizon), hookLowest]) }
            return
        }
        // History (HistoryRetention): milestones, and ops go only with the day's trim.
        let lastMilestone = locked?.lastMilestone
        let historyPlan = history.plan(
            nowMs: nowMs, lastMilestoneMs: lastMilestone?.ms,
            writesSnapshot: stateVersion - (lastMilestone?.version ?? 0) >= Int64(max(1, snapshotInterval)))
        if historyPlan.writesMilestone, stateVersion > (lastMilestone?.version ?? 0) {
            let milestone: [UInt8]
            if let bytes { milestone = bytes } else { milestone = try encoded { () throws(StoreError) in try StoreEncoding.encode(state) } }
            Self.append(&milestoneRows, [workspace, .int64(stateVersion), .bytes(milestone)])
        }
        if historyPlan.trims {
            Self.append(&historyTrimRows, [
                workspace, .int64(plan.horizon), .int64(historyPlan.opsBeforeMs), .int64(historyPlan.milestonesBeforeMs),
                hookLowest,
            ])
        }
    }

    /// The dedup rows: one per client (its highest seq in the batch), never moved backwards.
    private mutating func addDedupRows(
        _ workspace: PGValue, _ records: [CommitRecord], announcing announced: inout CommitNotification.Changes
    ) {
        var lastRecord: [String: CommitRecord] = [:]
        for record in records where record.seq > 0 && record.seq > (lastRecord[record.clientId]?.seq ?? 0) {
            lastRecord[record.clientId] = record
        }
        for record in lastRecord.values.sorted(by: { $0.clientId < $1.clientId }) {
            var code = PGValue.null, detail = PGValue.null
            if case .rejected(let error) = record.outcome {
                let (c, d) = StoreEncoding.encode(error)
                code = .int64(c)
                detail = .text(d)
            }
            Self.append(&seqRows, [workspace, .text(record.clientId), .int64(Int64(bitPattern: record.seq)), code, detail])
            announced.lastSeqs[record.clientId] = record.seq
        }
    }

    /// The ops, rekeys and refusals of the records, in order; a refusal is stored with the
    /// workspace's version as it was written.
    private mutating func addRecordRows(
        _ id: String, _ records: [CommitRecord], stored: UInt64, announcing announced: inout CommitNotification.Changes
    ) throws(PGError) {
        let workspace = PGValue.text(id)
        var version = stored
        var refusals = 0
        for record in records {
            switch record.outcome {
            case .applied(let applied):
                for op in applied {
                    let bytes = try encoded { () throws(StoreError) in try StoreEncoding.encode(op.op) }
                    Self.append(&opRows, [
                        workspace, .int64(Int64(bitPattern: op.version)), .text(op.clientId),
                        .int64(Int64(bitPattern: op.seq)), .text(op.activeTabId), .bytes(bytes), .text(record.author),
                    ])
                    version = op.version
                    announced.ops.append(op)
                }
                for rekey in record.rekeys {
                    Self.append(&rekeyRows, [
                        workspace, .int64(Int64(bitPattern: rekey.version)), .text(StoreEncoding.encodeKeys(rekey.oldKeys)),
                        .text(StoreEncoding.encodeKeys(rekey.newKeys)),
                    ])
                }
            case .rejected(let error):
                let (code, detail) = StoreEncoding.encode(error)
                refusals += 1
                refused.insert(id)
                announced.refusals.append(Sequencer.Rejection(clientId: record.clientId, seq: record.seq, error: error))
                Self.append(&refusalRows, [
                    workspace, .int64(Int64(refusals)), .text(record.clientId), .int64(Int64(bitPattern: record.seq)),
                    .int64(code), .text(detail), .int64(Int64(bitPattern: version)),
                ])
            }
        }
    }

    /// The statements writing every row gathered, for node `node` announcing on `channel` to the
    /// nodes seen within `holderTimeoutMillis`.
    func statements(channel: String, node: String, holderTimeoutMillis: Int64) -> [PGStatement] {
        var statements: [PGStatement] = []
        // A workspace another live node holds is announced to it (pg_notify runs only for the rows
        // its WHERE keeps; the statement's snapshot, taken after the version rows were locked, sees
        // every registration made before: HolderRegistry). Rows are found by `= ANY` and per-row
        // subqueries, never a join of the batch's arrays with a table: see lockVersionRows.
        statements.append(PGStatement(
            """
            UPDATE tabsync_workspaces AS w
            SET version = (SELECT v.version FROM unnest($1::text[], $2::int8[]) AS v(workspace, version) WHERE v.workspace = w.workspace)
            WHERE w.workspace = ANY($1::text[])
            RETURNING (SELECT count(*) FROM (
                SELECT pg_notify($4, v.payload) FROM unnest($1::text[], $3::text[]) AS v(workspace, payload)
                WHERE v.workspace = w.workspace AND EXISTS (
                    SELECT 1 FROM tabsync_holders h JOIN tabsync_nodes n ON n.node = h.node
                    WHERE h.workspace = w.workspace AND h.node <> $5 AND n.seen > now() - $6::int8 * interval '1 millisecond')) x)
            """, [
                .array(.text, versionIds), .array(.int64, versions), .array(.text, payloads), .text(channel), .text(node),
                .int64(holderTimeoutMillis),
            ]))
        if !seqRows[0].isEmpty {
            statements.append(PGStatement(
                """
                INSERT INTO tabsync_client_seqs AS c (workspace, client_id, seq, error_code, error_detail)
                SELECT * FROM unnest($1::text[], $2::text[], $3::int8[], $4::int8[], $5::text[])
                ON CONFLICT (workspace, client_id) DO UPDATE
                SET seq = excluded.seq, error_code = excluded.error_code, error_detail = excluded.error_detail
                WHERE excluded.seq > c.seq
                """, Self.arrays(seqRows, [.text, .text, .int64, .int64, .text])))
        }
        if !opRows[0].isEmpty {
            statements.append(PGStatement(
                """
                INSERT INTO tabsync_ops (workspace, version, client_id, seq, active_tab_id, op, author, committed_at)
                SELECT u.*, coalesce(to_timestamp($8::int8 / 1000.0), now())
                FROM unnest($1::text[], $2::int8[], $3::text[], $4::int8[], $5::text[], $6::bytea[], $7::text[]) AS u
                """, Self.arrays(opRows, [.text, .int64, .text, .int64, .text, .bytes, .text]) + [commitMs.map(PGValue.int64) ?? .null]))
        }
        if !rekeyRows[0].isEmpty {
            statements.append(PGStatement(
                """
                INSERT INTO tabsync_rekeys (workspace, version, old_keys, new_keys)
                SELECT * FROM unnest($1::text[], $2::int8[], $3::text[], $4::text[])
                """, Self.arrays(rekeyRows, [.text, .int64, .text, .text])))
        }
        if !refusalRows[0].isEmpty {
            // n counts up per workspace (the version row's lock orders concurrent writers); the
            // last `retention` refusals stay answerable.
            statements.append(PGStatement(
                """
                INSERT INTO tabsync_rejections (workspace, n, client_id, seq, error_code, error_detail, at_version)
                SELECT v.workspace, coalesce((SELECT max(r.n) FROM tabsync_rejections r WHERE r.workspace = v.workspace), 0) + v.k,
                       v.client_id, v.seq, v.code, v.detail, v.at_version
                FROM unnest($1::text[], $2::int8[], $3::text[], $4::int8[], $5::int8[], $6::text[], $7::int8[])
                     AS v(workspace, k, client_id, seq, code, detail, at_version)
                """, Self.arrays(refusalRows, [.text, .int64, .text, .int64, .int64, .text, .int64])))
            statements.append(PGStatement(
                """
                DELETE FROM tabsync_rejections r
                USING (SELECT workspace, max(n) AS top FROM tabsync_rejections WHERE workspace = ANY($1::text[]) GROUP BY workspace) t
                WHERE r.workspace = t.workspace AND r.n <= t.top - $2
                """, [.array(.text, refused.sorted().map(PGValue.text)), .int64(Int64(refusalRetention))]))
        }
        if !snapshotRows[0].isEmpty {
            statements.append(PGStatement(
                """
                INSERT INTO tabsync_snapshots (workspace, version, snapshot)
                SELECT * FROM unnest($1::text[], $2::int8[], $3::bytea[])
                ON CONFLICT (workspace) DO UPDATE SET version = excluded.version, snapshot = excluded.snapshot
                """, Self.arrays(snapshotRows, [.text, .int64, .bytes])))
        }
        if !milestoneRows[0].isEmpty {
            statements.append(PGStatement(
                """
                INSERT INTO tabsync_milestones (workspace, version, snapshot, committed_at)
                SELECT u.*, coalesce(to_timestamp($4::int8 / 1000.0), now())
                FROM unnest($1::text[], $2::int8[], $3::bytea[]) AS u ON CONFLICT DO NOTHING
                """, Self.arrays(milestoneRows, [.text, .int64, .bytes]) + [commitMs.map(PGValue.int64) ?? .null]))
        }
        if !historyTrimRows[0].isEmpty {
            // Once a day per workspace: ops committed before the cut-off go (a prefix, never into
            // the resume window), milestones before it but the last of each UTC day, and every
            // milestone before the milestones' cut-off.
            statements.append(PGStatement(
                """
                WITH h AS (
                         SELECT u.workspace, \(Self.hookFloored("u")) AS horizon, u.ops_ms, u.m_ms
                         FROM unnest($1::text[], $2::int8[], $3::int8[], $4::int8[], $5::int8[]) AS u(workspace, horizon, ops_ms, m_ms, lowest)),
                     cut AS (
                         SELECT h.workspace, to_timestamp(h.ops_ms / 1000.0) AS ops_before, to_timestamp(h.m_ms / 1000.0) AS m_before,
                                least(h.horizon, coalesce((SELECT min(o.version) - 1 FROM tabsync_ops o
                                                           WHERE o.workspace = h.workspace AND o.committed_at >= to_timestamp(h.ops_ms / 1000.0)),
                                                          h.horizon)) AS upto
                         FROM h),
                     thin AS (
                         DELETE FROM tabsync_milestones m USING cut
                         WHERE m.workspace = cut.workspace AND m.committed_at < cut.ops_before
                           AND (m.committed_at < cut.m_before OR m.version <> (
                               SELECT max(n.version) FROM tabsync_milestones n WHERE n.workspace = m.workspace
                                 AND date_trunc('day', n.committed_at AT TIME ZONE 'UTC') = date_trunc('day', m.committed_at AT TIME ZONE 'UTC')))),
                     gone AS (DELETE FROM tabsync_rekeys r USING cut WHERE r.workspace = cut.workspace AND r.version <= cut.upto)
                DELETE FROM tabsync_ops o USING cut WHERE o.workspace = cut.workspace AND o.version <= cut.upto
                """, Self.arrays(historyTrimRows, [.text, .int64, .int64, .int64, .int64])))
        }
        if !horizonRows[0].isEmpty {
            statements.append(PGStatement(
                """
                WITH h AS (
                         SELECT u.workspace, \(Self.hookFloored("u")) AS horizon
                         FROM unnest($1::text[], $2::int8[], $3::int8[]) AS u(workspace, horizon, lowest)),
                     gone AS (
                         DELETE FROM tabsync_rekeys r WHERE (r.workspace, r.version) IN (
                             SELECT x.workspace, x.version FROM h CROSS JOIN LATERAL (
                                 SELECT workspace, version FROM tabsync_rekeys y
                                 WHERE y.workspace = h.workspace AND y.version <= h.horizon OFFSET 0) x))
                DELETE FROM tabsync_ops o WHERE (o.workspace, o.version) IN (
                    SELECT x.workspace, x.version FROM h CROSS JOIN LATERAL (
                        SELECT workspace, version FROM tabsync_ops y WHERE y.workspace = h.workspace AND y.version <= h.horizon OFFSET 0) x)
                """, Self.arrays(horizonRows, [.text, .int64, .int64])))
        }
        return statements
    }

    /// ``RetentionPlan/hookFloored`` in SQL over a row `u` of (workspace, horizon, lowest): the
    /// floor is the lowest `delivered` of an enabled hook's cursor of the workspace, read in the
    /// commit's transaction (a hook disabled or removed releases it at the next compaction).
    static func hookFloored(_ u: String) -> String {
        """
        (SELECT CASE WHEN f.floor IS NULL OR \(u).horizon <= 0 THEN \(u).horizon
                     ELSE greatest(0, least(\(u).horizon, greatest(f.floor, \(u).lowest))) END
         FROM (SELECT min(c.delivered) AS floor FROM tabsync_webhook_cursors c JOIN tabsync_webhooks w ON w.id = c.hook
               WHERE c.workspace = \(u).workspace AND w.disabled_reason IS NULL) f)
        """
    }

    /// Appends one row to column arrays.
    static func append(_ columns: inout [[PGValue]], _ row: [PGValue]) {
        for (index, value) in row.enumerated() { columns[index].append(value) }
    }

    /// Column arrays as array parameters.
    static func arrays(_ columns: [[PGValue]], _ types: [PGArrayElement]) -> [PGValue] {
        zip(columns, types).map { PGValue.array($1, $0) }
    }

    private func encoded<T>(_ body: () throws(StoreError) -> T) throws(PGError) -> T {
        do {
            return try body()
        } catch {
            throw PGError.store(error)
        }
    }
}
