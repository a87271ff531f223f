import Foundation

/// The webhooks of a SQLite store (``WebhookStore``): `webhooks` and `webhook_cursors` (schema 7).
extension SQLiteStore: WebhookStore {
    public func addWebhook(_ hook: WebhookRegistration, cursors: [String: UInt64]) throws(StoreError) {
        try withStoreConnection(write: true) { db throws(SQLiteError) in
            try db.transaction { () throws(SQLiteError) in
                let insert = try db.prepare(
                    """
                    INSERT INTO webhooks (id, url, workspaces, secret, created_ms, disabled_reason, disabled_ms)
                    VALUES (?, ?, ?, ?, ?, ?, ?)
                    """)
                try insert.bind(
                    .text(hook.id), .text(hook.url), .text(hook.workspaces), .text(hook.secret),
                    .integer(WebhookMillis.of(hook.createdAt)), hook.disabledReason.map { .text($0) } ?? .null,
                    hook.disabledAt.map { .integer(WebhookMillis.of($0)) } ?? .null)
                try insert.run()
                let cursor = try db.prepare("INSERT INTO webhook_cursors (hook, workspace, delivered) VALUES (?, ?, ?)")
                for (workspace, version) in cursors.sorted(by: { $0.key < $1.key }) {
                    cursor.reset()
                    try cursor.bind(.text(hook.id), .text(workspace), .integer(Int64(clamping: version)))
                    try cursor.run()
                }
            }
        }
    }

    public func webhooks() throws(StoreError) -> [WebhookRegistration] {
        try withStoreConnection(write: false) { db throws(SQLiteError) in
            let query = try db.prepare("SELECT id, url, workspaces, secret, created_ms, disabled_reason, disabled_ms FROM webhooks ORDER BY n")
            var hooks: [WebhookRegistration] = []
            while try query.step() {
                hooks.append(WebhookRegistration(
                    id: query.text(0), url: query.text(1), workspaces: query.text(2), secret: query.text(3),
                    createdAt: WebhookMillis.date(query.int64(4)), disabledReason: query.isNull(5) ? nil : query.text(5),
                    disabledAt: query.isNull(6) ? nil : WebhookMillis.date(query.int64(6))))
            }
            return hooks
        }
    }

    public func removeWebhook(id: String) throws(StoreError) -> Bool {
        try withStoreConnection(write: true) { db throws(SQLiteError) in
            try db.transaction { () throws(SQLiteError) -> Bool in
                let cursors = try db.prepare("DELETE FROM webhook_cursors WHERE hook = ?")
                try cursors.bind(.text(id))
                try cursors.run()
                let hook = try db.prepare("DELETE FROM webhooks WHERE id = ?")
                try hook.bind(.text(id))
                try hook.run()
                return try db.scalar("SELECT changes()") == 1
            }
        }
    }

    public func webhookCursors(hookId: String) throws(StoreError) -> [WebhookCursor] {
        try withStoreConnection(write: false) { db throws(SQLiteError) in
            let query = try db.prepare(
                """
                SELECT workspace, delivered, attempts, first_failure_ms, next_attempt_ms, last_error FROM webhook_cursors
                WHERE hook = ? ORDER BY workspace
                """)
            try query.bind(.text(hookId))
            var cursors: [WebhookCursor] = []
            while try query.step() {
                cursors.append(WebhookCursor(
                    hookId: hookId, workspace: query.text(0), delivered: UInt64(max(query.int64(1), 0)),
                    attempts: Int(query.int64(2)),
                    firstFailure: query.isNull(3) ? nil : WebhookMillis.date(query.int64(3)),
                    nextAttempt: query.isNull(4) ? nil : WebhookMillis.date(query.int64(4)),
                    lastError: query.isNull(5) ? nil : query.text(5)))
            }
            return cursors
        }
    }

    public func saveWebhookCursor(_ cursor: WebhookCursor) throws(StoreError) {
        try withStoreConnection(write: true) { db throws(SQLiteError) in
            // Only for a registered hook; never below the stored `delivered` (WebhookCursorMerge).
            let upsert = try db.prepare(
                """
                INSERT INTO webhook_cursors (hook, workspace, delivered, attempts, first_failure_ms, next_attempt_ms, last_error)
                    SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7 WHERE EXISTS (SELECT 1 FROM webhooks WHERE id = ?1)
                ON CONFLICT (hook, workspace) DO UPDATE SET
                    delivered = excluded.delivered, attempts = excluded.attempts,
                    first_failure_ms = excluded.first_failure_ms, next_attempt_ms = excluded.next_attempt_ms,
                    last_error = excluded.last_error
                    WHERE excluded.delivered >= webhook_cursors.delivered
                """)
            try upsert.bind(
                .text(cursor.hookId), .text(cursor.workspace), .integer(Int64(clamping: cursor.delivered)),
                .integer(Int64(cursor.attempts)),
                cursor.firstFailure.map { .integer(WebhookMillis.of($0)) } ?? .null,
                cursor.nextAttempt.map { .integer(WebhookMillis.of($0)) } ?? .null,
                cursor.lastError.map { .text($0) } ?? .null)
            try upsert.run()
        }
    }
}

extension SQLiteStore {
    public func disableWebhook(id: String, reason: String, at: Date) throws(StoreError) -> Bool {
        try withStoreConnection(write: true) { db throws(SQLiteError) -> Bool in
            let update = try db.prepare(
                "UPDATE webhooks SET disabled_reason = ?, disabled_ms = ? WHERE id = ? AND disabled_reason IS NULL")
            try update.bind(.text(reason), .integer(WebhookMillis.of(at)), .text(id))
            try update.run()
            return try db.scalar("SELECT changes()") == 1
        }
    }

    /// One process writes a SQLite store: it holds every lease.
    public func claimWebhookCursors(hookId: String, workspaces: [String], node: String, until: Date, now: Date) throws(StoreError) -> Set<String> {
        let registered = try webhooks().contains { $0.id == hookId }
        return registered ? Set(workspaces) : []
    }

    public func enableWebhook(id: String) throws(StoreError) -> Bool {
        try withStoreConnection(write: true) { db throws(SQLiteError) -> Bool in
            try db.transaction { () throws(SQLiteError) -> Bool in
                let update = try db.prepare("UPDATE webhooks SET disabled_reason = NULL, disabled_ms = NULL WHERE id = ?")
                try update.bind(.text(id))
                try update.run()
                guard try db.scalar("SELECT changes()") == 1 else { return false }
                let cursors = try db.prepare(
                    """
                    UPDATE webhook_cursors SET attempts = 0, first_failure_ms = NULL, next_attempt_ms = NULL, last_error = NULL
                    WHERE hook = ?
                    """)
                try cursors.bind(.text(id))
                try cursors.run()
                return true
            }
        }
    }
}

/// Times of webhooks as the stores keep them: Unix milliseconds.
enum WebhookMillis {
    static func of(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded(.down)) }
    static func date(_ millis: Int64) -> Date { Date(timeIntervalSince1970: Double(millis) / 1000) }
}
