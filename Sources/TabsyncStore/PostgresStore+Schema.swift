extension PostgresStore {
    /// The schema this build writes; the `tabsync_meta` row `schema_version` holds the stored one.
    public static var schemaVersion: Int64 { Int64(migrations.count) }

    /// Migration `i` takes schema version `i` to `i + 1`. Append only; never edit a shipped one.
    /// Every table is prefixed `tabsync_`, so a shared database or schema holds them next to others.
    ///
    /// Version 1 (the SQLite store's version 2, plus the version row per workspace):
    /// - `tabsync_workspaces`: per workspace, its committed version. Every commit locks and moves
    ///   this row first: it orders the writers of one workspace (several server nodes).
    /// - `tabsync_snapshots`: per workspace, its state at `version` as a `tabsync.v1.Snapshot`.
    /// - `tabsync_ops`: the op log, one `Applied` per row (`op` is a `tabsync.v1.Op`), keyed by
    ///   (workspace, version).
    /// - `tabsync_client_seqs`: the last consumed seq per (workspace, client), with the refusal when
    ///   that seq was refused (NULL code: it was applied, and its answer is in `tabsync_ops`).
    /// - `tabsync_rejections`: the recent refusals per workspace in order (`n` counts up).
    /// - `tabsync_rekeys`: per server-made rekey still inside the op log, every tab's old and new key.
    ///
    /// Version 2: `tabsync_rejections.at_version`, the workspace's version when the refusal was made.
    ///
    /// Version 3: the holder registry (``HolderRegistry``): `tabsync_nodes` (each live node and its
    /// last heartbeat) and `tabsync_holders` (which node holds which workspace loaded, since when).
    static let migrations: [String] = [
        """
        CREATE TABLE tabsync_workspaces (
            workspace text PRIMARY KEY,
            version bigint NOT NULL
        );
        CREATE TABLE tabsync_snapshots (
            workspace text PRIMARY KEY,
            version bigint NOT NULL,
            snapshot bytea NOT NULL
        );
        CREATE TABLE tabsync_ops (
            workspace text NOT NULL,
            version bigint NOT NULL,
            client_id text NOT NULL,
            seq bigint NOT NULL,
            active_tab_id text NOT NULL,
            op bytea NOT NULL,
            PRIMARY KEY (workspace, version)
        );
        CREATE TABLE tabsync_client_seqs (
            workspace text NOT NULL,
            client_id text NOT NULL,
            seq bigint NOT NULL,
            error_code bigint,
            error_detail text,
            PRIMARY KEY (workspace, client_id)
        );
        CREATE TABLE tabsync_rejections (
            workspace text NOT NULL,
            n bigint NOT NULL,
            client_id text NOT NULL,
            seq bigint NOT NULL,
            error_code bigint NOT NULL,
            error_detail text NOT NULL,
            PRIMARY KEY (workspace, n)
        );
        CREATE TABLE tabsync_rekeys (
            workspace text NOT NULL,
            version bigint NOT NULL,
            old_keys text NOT NULL,
            new_keys text NOT NULL,
            PRIMARY KEY (workspace, version)
        );
        """,
        // Version 2: each refusal's workspace version when it was made, so a node catching up on
        // other nodes' commits reads only the refusals since its own version (not all retained).
        """
        ALTER TABLE tabsync_rejections ADD COLUMN at_version bigint NOT NULL DEFAULT 0;
        -- Refusals stored before: taken as made at their workspace's present version (a catch-up
        -- from an older version reads them again, which changes nothing).
        UPDATE tabsync_rejections r SET at_version = w.version FROM tabsync_workspaces w WHERE w.workspace = r.workspace;
        CREATE INDEX tabsync_rejections_at_version ON tabsync_rejections (workspace, at_version);
        """,
        // Version 3: which nodes hold which workspaces, so a commit notifies only when another
        // node holds the workspace (docs/design.md, 'Several nodes').
        """
        CREATE TABLE tabsync_nodes (
            node text PRIMARY KEY,
            seen timestamptz NOT NULL
        );
        CREATE TABLE tabsync_holders (
            workspace text NOT NULL,
            node text NOT NULL,
            since timestamptz NOT NULL DEFAULT clock_timestamp(),
            PRIMARY KEY (workspace, node)
        );
        CREATE INDEX tabsync_holders_node ON tabsync_holders (node);
        """,
        // Version 4: the operators' commands in the order taken (``AdminStore``), read by every
        // node: revocations, kicks, deletes (docs/operating.md, "The admin API").
        """
        CREATE TABLE tabsync_admin_log (
            n bigserial PRIMARY KEY,
            at timestamptz NOT NULL DEFAULT clock_timestamp(),
            command text NOT NULL
        );
        """,
        // Version 5: who made each op and when it was committed (docs/design.md, "History"): the
        // author as the server named it, the commit's time on the database's clock (every node's
        // ops on one clock). Ops stored before have no time.
        """
        ALTER TABLE tabsync_ops ADD COLUMN author text NOT NULL DEFAULT '';
        ALTER TABLE tabsync_ops ADD COLUMN committed_at timestamptz;
        ALTER TABLE tabsync_ops ALTER COLUMN committed_at SET DEFAULT now();
        """,
        // Version 6: milestones, the workspace's state at some versions with the commit time,
        // kept by HistoryRetention: past states are replayed from the nearest one.
        """
        CREATE TABLE tabsync_milestones (
            workspace text NOT NULL,
            version int8 NOT NULL,
            committed_at timestamptz NOT NULL DEFAULT now(),
            snapshot bytea NOT NULL,
            PRIMARY KEY (workspace, version)
        );
        """,
        // Version 7 (docs/design.md, "Tab groups"): stored snapshots, ops and milestones may carry tab
        // groups. No table changes: the version makes a release before groups refuse this schema
        // (newerSchema) instead of writing snapshots without them.
        """
        INSERT INTO tabsync_meta (key, value) VALUES ('tab_groups', now()::text)
            ON CONFLICT (key) DO UPDATE SET value = excluded.value;
        """,
        // Version 8 (docs/design.md, "Webhooks"; WebhookStore): the registrations in the order taken,
        // with the signing secret and why a hook was disabled (NULL: enabled), and per hook and
        // workspace the last version delivered and the pending attempt (times in Unix milliseconds).
        """
        CREATE TABLE tabsync_webhooks (
            n bigserial PRIMARY KEY,
            id text NOT NULL UNIQUE,
            url text NOT NULL,
            workspaces text NOT NULL,
            secret text NOT NULL,
            created_ms int8 NOT NULL,
            disabled_reason text
        );
        CREATE TABLE tabsync_webhook_cursors (
            hook text NOT NULL,
            workspace text NOT NULL,
            delivered int8 NOT NULL,
            attempts int8 NOT NULL DEFAULT 0,
            first_failure_ms int8,
            next_attempt_ms int8,
            PRIMARY KEY (hook, workspace)
        );
        """,
        // Version 9: when a hook was disabled (its deliveries failed for --webhook-give-up-after).
        """
        ALTER TABLE tabsync_webhooks ADD COLUMN disabled_ms int8;
        """,
        // Version 10: the lease on a cursor (docs/design.md, "Webhooks", "Several nodes"): the
        // node sending its deliveries and until when (Unix milliseconds).
        """
        ALTER TABLE tabsync_webhook_cursors ADD COLUMN lease_node text;
        ALTER TABLE tabsync_webhook_cursors ADD COLUMN lease_until_ms int8;
        """,
        // Version 11: why a cursor's pending attempt last failed (NULL: none failed), for the admin
        // list.
        """
        ALTER TABLE tabsync_webhook_cursors ADD COLUMN last_error text;
        """,
    ]

    /// Creates or migrates the schema to ``schemaVersion`` in one transaction under a transaction
    /// advisory lock (keyed by the schema name), so nodes starting at once never race: the first
    /// migrates, the others wait and then find it done. A new store gets its epoch here. Returns the
    /// epoch.
    static func migrate(_ db: PGConnection, schema: String?, newEpoch: String) throws(OpenError) -> String {
        let outcome: Result<String, OpenError>
        do throws(PGError) {
            try db.execute("BEGIN")
            do throws(PGError) {
                outcome = try migrateInTransaction(db, schema: schema, newEpoch: newEpoch)
                if case .success = outcome { try db.execute("COMMIT") } else { try db.execute("ROLLBACK") }
            } catch {
                _ = try? db.execute("ROLLBACK")
                throw error
            }
        } catch {
            throw .migrationFailed(error.description)
        }
        return try outcome.get()
    }

    private static func migrateInTransaction(
        _ db: PGConnection, schema: String?, newEpoch: String
    ) throws(PGError) -> Result<String, OpenError> {
        try db.execute("SELECT pg_advisory_xact_lock(hashtext($1))", [.text("tabsync migrate " + (schema ?? ""))])
        if let schema {
            try db.executeScript("CREATE SCHEMA IF NOT EXISTS " + PGConnection.quoteIdentifier(schema))
        }
        try db.executeScript("CREATE TABLE IF NOT EXISTS tabsync_meta (key text PRIMARY KEY, value text NOT NULL)")
        let stored = try db.execute("SELECT value FROM tabsync_meta WHERE key = 'schema_version'")
        let version = stored.rowCount == 0 ? 0 : Int64(stored.text(0, 0)) ?? -1
        guard version >= 0 else { throw PGError.unexpectedResult("schema_version is not a number") }
        guard version <= schemaVersion else {
            return .failure(.newerSchema(found: version, supported: schemaVersion))
        }
        for index in Int(version)..<migrations.count { try db.executeScript(migrations[index]) }
        try db.execute(
            """
            INSERT INTO tabsync_meta (key, value) VALUES ('schema_version', $1)
            ON CONFLICT (key) DO UPDATE SET value = excluded.value
            """, [.text(String(schemaVersion))])
        try db.execute(
            "INSERT INTO tabsync_meta (key, value) VALUES ('epoch', $1) ON CONFLICT (key) DO NOTHING", [.text(newEpoch)])
        return .success(try db.execute("SELECT value FROM tabsync_meta WHERE key = 'epoch'").text(0, 0))
    }
}
