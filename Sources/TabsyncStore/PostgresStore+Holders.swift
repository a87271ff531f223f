import TabsyncCore

/// The holder registry in PostgreSQL (``HolderRegistry``): `tabsync_holders` (workspace, node)
/// and `tabsync_nodes` (node, last heartbeat), written on the store's own connection.
extension PostgresStore: HolderRegistry {
    public var heartbeatInterval: Duration { .milliseconds(Int64(options.holderTimeoutSeconds * 1_000 / 4)) }

    public var notificationsSent: UInt64 { notified.load(ordering: .relaxed) }

    var holderTimeoutMillis: Int64 { Int64((options.holderTimeoutSeconds * 1_000).rounded()) }

    /// One transaction, in one round trip (a pipeline): the node's row, the workspace's version
    /// row (created at 0 when new) locked `FOR SHARE` — so a commit holding it `FOR UPDATE` ends
    /// first and one that locks it later sees the registration — then the registration and the
    /// count of other live holders.
    public func hold(workspaceId: String) throws(StoreError) -> Int {
        try withConnection(failure: StoreError.readFailed) { db throws(PGError) -> Int in
            do throws(PGError) {
                let results = try db.pipeline([
                    .begin,
                    nodeAlive,
                    PGStatement(
                        "INSERT INTO tabsync_workspaces (workspace, version) VALUES ($1, 0) ON CONFLICT (workspace) DO NOTHING",
                        [.text(workspaceId)]),
                    PGStatement("SELECT 1 FROM tabsync_workspaces WHERE workspace = $1 FOR SHARE", [.text(workspaceId)]),
                    PGStatement(
                        "INSERT INTO tabsync_holders (workspace, node) VALUES ($1, $2) ON CONFLICT DO NOTHING",
                        [.text(workspaceId), .text(node)]),
                    PGStatement(
                        """
                        SELECT count(*) FROM tabsync_holders h JOIN tabsync_nodes n ON n.node = h.node
                        WHERE h.workspace = $1 AND h.node <> $2 AND n.seen > now() - $3::int8 * interval '1 millisecond'
                        """, [.text(workspaceId), .text(node), .int64(holderTimeoutMillis)]),
                    .commit,
                ])
                return Int(try results[5].int64(0, 0) ?? 0)
            } catch {
                if db.isUsable && db.inTransaction { _ = try? db.execute("ROLLBACK") }
                throw error
            }
        }
    }

    /// This node is alive now (its `tabsync_nodes` row): part of every registration and heartbeat.
    private var nodeAlive: PGStatement {
        PGStatement(
            "INSERT INTO tabsync_nodes (node, seen) VALUES ($1, now()) ON CONFLICT (node) DO UPDATE SET seen = now()",
            [.text(node)])
    }

    public func hasNewerHolder(workspaceId: String) throws(StoreError) -> Bool {
        try withConnection(failure: StoreError.readFailed) { db throws(PGError) -> Bool in
            let newer = try db.execute(
                """
                SELECT count(*) FROM tabsync_holders h JOIN tabsync_nodes n ON n.node = h.node
                JOIN tabsync_holders mine ON mine.workspace = h.workspace AND mine.node = $2
                WHERE h.workspace = $1 AND h.node <> $2 AND h.since > mine.since
                  AND n.seen > now() - $3::int8 * interval '1 millisecond'
                """, [.text(workspaceId), .text(node), .int64(holderTimeoutMillis)], prepared: true)
            return (try newer.int64(0, 0) ?? 0) > 0
        }
    }

    public func release(workspaceIds: [String]) throws(StoreError) {
        guard !workspaceIds.isEmpty else { return }
        try withConnection(failure: StoreError.writeFailed) { db throws(PGError) in
            try db.execute(
                "DELETE FROM tabsync_holders WHERE node = $1 AND workspace = ANY($2::text[])",
                [.text(node), .array(.text, workspaceIds.map(PGValue.text))], prepared: true)
            return ()
        }
    }

    /// The node's row moves to now; nodes silent for three holder timeouts are removed with
    /// their registrations (a killed node's; after one timeout they are already ignored).
    public func heartbeat() throws(StoreError) {
        try withConnection(failure: StoreError.writeFailed) { db throws(PGError) in
            _ = try db.pipeline([
                nodeAlive,
                PGStatement(
                    """
                    WITH gone AS (DELETE FROM tabsync_nodes WHERE seen < now() - $1::int8 * interval '1 millisecond' RETURNING node)
                    DELETE FROM tabsync_holders h USING gone WHERE h.node = gone.node
                    """, [.int64(holderTimeoutMillis * 3)]),
            ])
            return ()
        }
    }

    public func leave() {
        _ = try? withConnection(failure: StoreError.writeFailed) { db throws(PGError) in
            try db.execute("DELETE FROM tabsync_holders WHERE node = $1", [.text(node)], prepared: true)
            try db.execute("DELETE FROM tabsync_nodes WHERE node = $1", [.text(node)], prepared: true)
            return ()
        }
    }
}
