import Foundation

/// The webhooks of the PostgreSQL store (``WebhookStore``): `tabsync_webhooks` and
/// `tabsync_webhook_cursors` (schema 8), shared by every node.
extension PostgresStore: WebhookStore {
    public func addWebhook(_ hook: WebhookRegistration, cursors: [String: UInt64]) throws(StoreError) {
        try inTransaction(failure: StoreError.writeFailed) { db throws(PGError) in
            try db.execute(
                """
                INSERT INTO tabsync_webhooks (id, url, workspaces, secret, created_ms, disabled_reason, disabled_ms)
                VALUES ($1, $2, $3, $4, $5, $6, $7)
                """,
                [.text(hook.id), .text(hook.url), .text(hook.workspaces), .text(hook.secret),
                 .int64(WebhookMillis.of(hook.createdAt)), hook.disabledReason.map { .text($0) } ?? .null,
                 hook.disabledAt.map { .int64(WebhookMillis.of($0)) } ?? .null])
            let sorted = cursors.sorted { $0.key < $1.key }
            guard !sorted.isEmpty else { return }
            try db.execute(
                """
                INSERT INTO tabsync_webhook_cursors (hook, workspace, delivered)
                SELECT $1, w, v FROM unnest($2::text[], $3::int8[]) AS c(w, v)
                """,
                [.text(hook.id), .array(.text, sorted.map { .text($0.key) }),
                 .array(.int64, sorted.map { .int64(Int64(clamping: $0.value)) })])
        }
    }

    public func webhooks() throws(StoreError) -> [WebhookRegistration] {
        try withConnection(failure: StoreError.readFailed) { db throws(PGError) in
            let rows = try db.execute(
                "SELECT id, url, workspaces, secret, created_ms, disabled_reason, disabled_ms FROM tabsync_webhooks ORDER BY n")
            var hooks: [WebhookRegistration] = []
            for row in 0..<rows.rowCount {
                hooks.append(WebhookRegistration(
                    id: rows.text(row, 0), url: rows.text(row, 1), workspaces: rows.text(row, 2), secret: rows.text(row, 3),
                    createdAt: WebhookMillis.date(try rows.int64(row, 4) ?? 0),
                    disabledReason: rows.isNull(row, 5) ? nil : rows.text(row, 5),
                    disabledAt: try rows.int64(row, 6).map(WebhookMillis.date)))
            }
            return hooks
        }
    }

    public func removeWebhook(id: String) throws(StoreError) -> Bool {
        try inTransaction(failure: StoreError.writeFailed) { db throws(PGError) -> Bool in
            try db.execute("DELETE FROM tabsync_webhook_cursors WHERE hook = $1", [.text(id)])
            return try db.execute("DELETE FROM tabsync_webhooks WHERE id = $1 RETURNING id", [.text(id)]).rowCount == 1
        }
    }

    public func webhookCursors(hookId: String) throws(StoreError) -> [WebhookCursor] {
        try withConnection(failure: StoreError.readFailed) { db throws(PGError) in
            let rows = try db.execute(
                """
                SELECT workspace, delivered, attempts, first_failure_ms, next_attempt_ms, last_error FROM tabsync_webhook_cursors
                WHERE hook = $1 ORDER BY workspace
                """, [.text(hookId)])
            var cursors: [WebhookCursor] = []
            for row in 0..<rows.rowCount {
                cursors.append(WebhookCursor(
                    hookId: hookId, workspace: rows.text(row, 0), delivered: UInt64(max(try rows.int64(row, 1) ?? 0, 0)),
                    attempts: Int(try rows.int64(row, 2) ?? 0),
                    firstFailure: try rows.int64(row, 3).map(WebhookMillis.date),
                    nextAttempt: try rows.int64(row, 4).map(WebhookMillis.date),
                    lastError: rows.isNull(row, 5) ? nil : rows.text(row, 5)))
            }
            return cursors
        }
    }

    public func saveWebhookCursor(_ cursor: WebhookCursor) throws(StoreError) {
        try withConnection(failure: StoreError.writeFailed) { db throws(PGError) -> Void in
            // Only for a registered hook; never below the stored `delivered` (WebhookCursorMerge).
            _ = try db.execute(
                """
                INSERT INTO tabsync_webhook_cursors (hook, workspace, delivered, attempts, first_failure_ms, next_attempt_ms, last_error)
                    SELECT $1, $2, $3, $4, $5, $6, $7 WHERE EXISTS (SELECT 1 FROM tabsync_webhooks WHERE id = $1)
                ON CONFLICT (hook, workspace) DO UPDATE SET
                    delivered = excluded.delivered, attempts = excluded.attempts,
                    first_failure_ms = excluded.first_failure_ms, next_attempt_ms = excluded.next_attempt_ms,
                    last_error = excluded.last_error
                    WHERE excluded.delivered >= tabsync_webhook_cursors.delivered
                """,
                [.text(cursor.hookId), .text(cursor.workspace), .int64(Int64(clamping: cursor.delivered)),
                 .int64(Int64(cursor.attempts)),
                 cursor.firstFailure.map { .int64(WebhookMillis.of($0)) } ?? .null,
                 cursor.nextAttempt.map { .int64(WebhookMillis.of($0)) } ?? .null,
                 cursor.lastError.map { .text($0) } ?? .null])
        }
    }

    public func disableWebhook(id: String, reason: String, at: Date) throws(StoreError) -> Bool {
        try withConnection(failure: StoreError.writeFailed) { db throws(PGError) -> Bool in
            try db.execute(
                """
                UPDATE tabsync_webhooks SET disabled_reason = $2, disabled_ms = $3
                WHERE id = $1 AND disabled_reason IS NULL RETURNING id
                """, [.text(id), .text(reason), .int64(WebhookMillis.of(at))]).rowCount == 1
        }
    }

    public func enableWebhook(id: String) throws(StoreError) -> Bool {
        try inTransaction(failure: StoreError.writeFailed) { db throws(PGError) -> Bool in
            guard try db.execute(
                "UPDATE tabsync_webhooks SET disabled_reason = NULL, disabled_ms = NULL WHERE id = $1 RETURNING id",
                [.text(id)]).rowCount == 1 else { return false }
            try db.execute(
                """
                UPDATE tabsync_webhook_cursors SET attempts = 0, first_failure_ms = NULL, next_attempt_ms = NULL, last_error = NULL
                WHERE hook = $1
                """,
                [.text(id)])
            return true
        }
    }

    /// The lease (docs/design.md, "Webhooks", "Several nodes"): one statement, so two nodes
    /// claiming at once cannot both win a cursor (the row's lock orders them).
    public func claimWebhookCursors(hookId: String, workspaces: [String], node: String, until: Date, now: Date) throws(StoreError) -> Set<String> {
        guard !workspaces.isEmpty else { return [] }
        return try withConnection(failure: StoreError.writeFailed) { db throws(PGError) -> Set<String> in
            let rows = try db.execute(
                """
                WITH wanted AS (
                    SELECT u.w FROM unnest($3::text[]) AS u(w)
                    WHERE EXISTS (SELECT 1 FROM tabsync_webhooks WHERE id = $1)
                      AND (EXISTS (SELECT 1 FROM tabsync_holders h WHERE h.workspace = u.w AND h.node = $2)
                           OR NOT EXISTS (
                               SELECT 1 FROM tabsync_holders h JOIN tabsync_nodes n ON n.node = h.node
                               WHERE h.workspace = u.w AND n.seen > now() - $6::int8 * interval '1 millisecond'))
                )
                INSERT INTO tabsync_webhook_cursors AS c (hook, workspace, delivered, lease_node, lease_until_ms)
                SELECT $1, w, 0, $2, $4 FROM wanted
                ON CONFLICT (hook, workspace) DO UPDATE SET lease_node = excluded.lease_node, lease_until_ms = excluded.lease_until_ms
                    WHERE c.lease_node IS NULL OR c.lease_node = excluded.lease_node OR c.lease_until_ms < $5
                RETURNING workspace
                """,
                [.text(hookId), .text(node), .array(.text, workspaces.map(PGValue.text)), .int64(WebhookMillis.of(until)),
                 .int64(WebhookMillis.of(now)), .int64(holderTimeoutMillis)])
            return Set((0..<rows.rowCount).map { rows.text($0, 0) })
        }
    }
}
