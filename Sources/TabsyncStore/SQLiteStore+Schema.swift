import CSQLite

extension SQLiteStore {
    /// `PRAGMA application_id` of a tabsync store ("TSYN"): tells our files from other SQLite files.
    static let applicationId: Int64 = 0x5453_594E

    /// The schema this build writes; `PRAGMA user_version` holds the stored one.
    static var schemaVersion: Int64 { Int64(migrations.count) }

    /// Migration `i` takes schema version `i` to `i + 1`. Append only; never edit a shipped one.
    ///
    /// Version 1:
    /// - `meta`: store-wide values (`epoch`).
    /// - `snapshots`: per workspace, its state at `version` as a `tabsync.v1.Snapshot` (tabs with
    ///   keys, active tab, editable, epoch).
    /// - `ops`: the op log, one `Applied` per row (`op` is a `tabsync.v1.Op`), keyed by version.
    /// - `client_seqs`: the last consumed seq per (workspace, client), with the refusal when that
    ///   seq was refused (NULL code: it was applied, and its answer is in `ops`).
    ///
    /// Version 2 (what a restarted ``Sequencer`` needs beyond version 1):
    /// - `rejections`: the recent refusals per workspace in order (`n` counts up per workspace),
    ///   the last `logRetention` of them kept, so each is answered again after a restart. Seeded
    ///   from version 1's `client_seqs` refusals.
    /// - `rekeys`: per server-made rekey still inside the op log, every tab's old and new key in
    ///   display order (`\n`-separated; keys never hold one), so a key computed before it is still
    ///   translated (docs/design.md rule 7). Version 1 stores did not keep them: keys computed before a
    ///   rekey committed by version 1 are placed untranslated.
    ///
    /// Version 3: `admin_log`, the operators' commands in the order taken (``AdminStore``): `n`
    /// numbers them, `at_ms` is when the store took one (Unix milliseconds), `command` its JSON.
    ///
    /// Version 4 (docs/design.md, "History"): each op's `author` (the token's `sub`, or the name the
    /// client gave) and `committed_ms`, when its batch was committed (Unix milliseconds; NULL for
    /// ops stored before).
    ///
    /// Version 5 (docs/design.md, "History"): `milestones`, the workspace's state (a
    /// `tabsync.v1.Snapshot`) at some versions with the commit time, kept by ``HistoryRetention``:
    /// past states are replayed from the nearest one.
    ///
    /// Version 6 (docs/design.md, "Tab groups"): the stored snapshots, ops and milestones may carry
    /// tab groups (`Tab.group`, `Snapshot.groups`, the group ops). No table changes; the version says
    /// so, so a release before groups refuses this file (`newerSchema`) instead of writing snapshots
    /// without them. The `meta` row `tab_groups` records when the file was migrated.
    ///
    /// Version 7 (docs/design.md, "Webhooks"; ``WebhookStore``): `webhooks`, the registrations in the
    /// order taken (`n`), with the signing secret and `disabled_reason` (NULL: enabled);
    /// `webhook_cursors`, per hook and workspace the last version delivered and the pending attempt
    /// (`attempts`, `first_failure_ms`, `next_attempt_ms`, Unix milliseconds).
    /// Version 8: `webhooks.disabled_ms`, when a hook was disabled (its deliveries failed for
    /// `--webhook-give-up-after`).
    /// Version 9: `webhook_cursors.last_error`, why the pending attempt last failed (NULL: none
    /// failed), for the admin list.
    static let migrations: [String] = [
        """
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
        CREATE TABLE snapshots (
            workspace TEXT PRIMARY KEY,
            version INTEGER NOT NULL,
            snapshot BLOB NOT NULL
        ) WITHOUT ROWID;
        CREATE TABLE ops (
            workspace TEXT NOT NULL,
            version INTEGER NOT NULL,
            client_id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            active_tab_id TEXT NOT NULL,
            op BLOB NOT NULL,
            PRIMARY KEY (workspace, version)
        ) WITHOUT ROWID;
        CREATE TABLE client_seqs (
            workspace TEXT NOT NULL,
            client_id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            error_code INTEGER,
            error_detail TEXT,
            PRIMARY KEY (workspace, client_id)
        ) WITHOUT ROWID;
        """,
        """
        CREATE TABLE rejections (
            workspace TEXT NOT NULL,
            n INTEGER NOT NULL,
            client_id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            error_code INTEGER NOT NULL,
            error_detail TEXT NOT NULL,
            PRIMARY KEY (workspace, n)
        ) WITHOUT ROWID;
        INSERT INTO rejections (workspace, n, client_id, seq, error_code, error_detail)
            SELECT workspace, row_number() OVER (PARTITION BY workspace ORDER BY client_id), client_id, seq,
                   error_code, coalesce(error_detail, '')
            FROM client_seqs WHERE error_code IS NOT NULL;
        CREATE TABLE rekeys (
            workspace TEXT NOT NULL,
            version INTEGER NOT NULL,
            old_keys TEXT NOT NULL,
            new_keys TEXT NOT NULL,
            PRIMARY KEY (workspace, version)
        ) WITHOUT ROWID;
        """,
        """
        CREATE TABLE admin_log (
            n INTEGER PRIMARY KEY AUTOINCREMENT,
            at_ms INTEGER NOT NULL,
            command TEXT NOT NULL
        );
        """,
        """
        ALTER TABLE ops ADD COLUMN author TEXT NOT NULL DEFAULT '';
        ALTER TABLE ops ADD COLUMN committed_ms INTEGER;
        """,
        """
        CREATE TABLE milestones (
            workspace TEXT NOT NULL,
            version INTEGER NOT NULL,
            committed_ms INTEGER NOT NULL,
            snapshot BLOB NOT NULL,
            PRIMARY KEY (workspace, version)
        ) WITHOUT ROWID;
        """,
        """
        INSERT OR REPLACE INTO meta (key, value) VALUES ('tab_groups', strftime('%Y-%m-%dT%H:%M:%SZ', 'now'));
        """,
        """
        CREATE TABLE webhooks (
            n INTEGER PRIMARY KEY AUTOINCREMENT,
            id TEXT NOT NULL UNIQUE,
            url TEXT NOT NULL,
            workspaces TEXT NOT NULL,
            secret TEXT NOT NULL,
            created_ms INTEGER NOT NULL,
            disabled_reason TEXT
        );
        CREATE TABLE webhook_cursors (
            hook TEXT NOT NULL,
            workspace TEXT NOT NULL,
            delivered INTEGER NOT NULL,
            attempts INTEGER NOT NULL DEFAULT 0,
            first_failure_ms INTEGER,
            next_attempt_ms INTEGER,
            PRIMARY KEY (hook, workspace)
        ) WITHOUT ROWID;
        """,
        """
        ALTER TABLE webhooks ADD COLUMN disabled_ms INTEGER;
        """,
        """
        ALTER TABLE webhook_cursors ADD COLUMN last_error TEXT;
        """,
    ]

    /// What an opened file turned out to be.
    enum FileKind {
        /// Empty: no tables, no application id. A new store is made in it.
        case empty
        /// A tabsync store at this schema version.
        case tabsync(schemaVersion: Int64)
    }

    /// Reads the header and schema of the file without writing anything.
    static func inspect(_ db: SQLiteConnection, verify: Bool) throws(OpenError) -> FileKind {
        let path = db.path
        do {
            // The first read of the header: a file that is not SQLite fails here (SQLITE_NOTADB).
            let appId = try db.scalar("PRAGMA application_id") ?? 0
            let version = try db.scalar("PRAGMA user_version") ?? 0
            let objects = try db.scalar("SELECT count(*) FROM sqlite_master") ?? 0
            if appId == 0 && version == 0 && objects == 0 { return .empty }
            guard appId == applicationId else {
                let tables = try tableNames(db)
                throw OpenError.foreign(
                    path: path,
                    reason: "application_id \(appId) is not tabsync's \(applicationId); tables: "
                        + (tables.isEmpty ? "none" : tables.joined(separator: ", ")))
            }
            guard version <= schemaVersion else {
                throw OpenError.newerSchema(path: path, found: version, supported: schemaVersion)
            }
            if verify, let result = try db.scalarText("PRAGMA quick_check(1)"), result != "ok" {
                throw OpenError.corrupt(path: path, reason: "quick_check: \(result)")
            }
            return .tabsync(schemaVersion: version)
        } catch let error as OpenError {
            throw error
        } catch let error as SQLiteError {
            if error.isCorrupt { throw .corrupt(path: path, reason: error.message) }
            throw .cannotOpen(path: path, reason: error.description)
        } catch {
            throw .cannotOpen(path: path, reason: "\(error)")
        }
    }

    private static func tableNames(_ db: SQLiteConnection) throws(SQLiteError) -> [String] {
        let statement = try db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        var names: [String] = []
        while try statement.step() { names.append(statement.text(0)) }
        return names
    }

    /// Brings the schema from `from` to ``schemaVersion`` in one transaction; a new store also gets
    /// its application id and a fresh epoch.
    static func migrate(_ db: SQLiteConnection, from: Int64, newEpoch: String) throws(SQLiteError) {
        guard from < schemaVersion else { return }
        try db.transaction { () throws(SQLiteError) in
            for index in Int(from)..<migrations.count { try db.execute(migrations[index]) }
            if from == 0 {
                let insert = try db.prepare("INSERT INTO meta (key, value) VALUES ('epoch', ?)")
                try insert.bind(.text(newEpoch))
                try insert.run()
            }
            try db.execute("PRAGMA application_id = \(applicationId); PRAGMA user_version = \(schemaVersion)")
        }
    }
}
