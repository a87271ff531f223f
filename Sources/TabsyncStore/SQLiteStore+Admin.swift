import Foundation
import TabsyncCore

/// The operators' part of a SQLite store (``AdminStore``): the admin log in `admin_log`, the
/// workspace list, and deletes that leave a tombstone under a new epoch.
extension SQLiteStore: AdminStore {
    public func workspaceIds(after: String?, limit: Int) throws(StoreError) -> [String] {
        try withStoreConnection(write: false) { db throws(SQLiteError) in
            let query = try db.prepare(
                """
                SELECT workspace FROM (SELECT workspace FROM ops UNION SELECT workspace FROM snapshots WHERE version > 0)
                WHERE workspace > ?1 ORDER BY workspace LIMIT ?2
                """)
            try query.bind(.text(after ?? ""), .integer(Int64(max(limit, 0))))
            var ids: [String] = []
            while try query.step() { ids.append(query.text(0)) }
            return ids
        }
    }

    public func deleteWorkspace(_ id: String) throws(StoreError) -> Bool {
        let tombstone = try StoreEncoding.encode(Workspace(id: id, epoch: StoreEpoch.random()))
        return try withStoreConnection(write: true) { db throws(SQLiteError) in
            try db.transaction { () throws(SQLiteError) -> Bool in
                let existed = try db.scalar(
                    """
                    SELECT EXISTS (SELECT 1 FROM ops WHERE workspace = ?1)
                        OR EXISTS (SELECT 1 FROM snapshots WHERE workspace = ?1 AND version > 0)
                    """, .text(id)) == 1
                // Nothing to delete: a tombstone (or nothing) stays as it is, so a second delete
                // never takes away the epoch that keeps the old history from being spliced.
                guard existed else { return false }
                for table in ["ops", "client_seqs", "rejections", "rekeys", "snapshots"] {
                    let delete = try db.prepare("DELETE FROM \(table) WHERE workspace = ?")
                    try delete.bind(.text(id))
                    try delete.run()
                }
                let insert = try db.prepare("INSERT INTO snapshots (workspace, version, snapshot) VALUES (?, 0, ?)")
                try insert.bind(.text(id), .blob(tombstone))
                try insert.run()
                return true
            }
        }
    }

    public func appendAdminCommand(_ command: AdminCommand) throws(StoreError) -> AdminEntry {
        let text = try AdminEntry.encode(command)
        let now = Date()
        let millis = Int64((now.timeIntervalSince1970 * 1000).rounded(.down))
        return try withStoreConnection(write: true) { db throws(SQLiteError) in
            let insert = try db.prepare("INSERT INTO admin_log (at_ms, command) VALUES (?, ?)")
            try insert.bind(.integer(millis), .text(text))
            try insert.run()
            let number = try db.scalar("SELECT last_insert_rowid()") ?? 0
            return AdminEntry(number: number, at: Date(timeIntervalSince1970: Double(millis) / 1000), command: command)
        }
    }

    public func adminEntries(after number: Int64) throws(StoreError) -> [AdminEntry] {
        let rows = try withStoreConnection(write: false) { db throws(SQLiteError) -> [(Int64, Int64, String)] in
            let query = try db.prepare("SELECT n, at_ms, command FROM admin_log WHERE n > ? ORDER BY n")
            try query.bind(.integer(number))
            var rows: [(Int64, Int64, String)] = []
            while try query.step() { rows.append((query.int64(0), query.int64(1), query.text(2))) }
            return rows
        }
        var entries: [AdminEntry] = []
        for (n, at, text) in rows { entries.append(try AdminEntry.decode(text, number: n, atMillis: at)) }
        return entries
    }

    /// Runs `body` on the store's connection; its SQLite errors become read or write failures.
    func withStoreConnection<T: Sendable>(
        write: Bool, _ body: (SQLiteConnection) throws(SQLiteError) -> T
    ) throws(StoreError) -> T {
        try connection.withLock { (db: inout SQLiteConnection?) throws(StoreError) -> T in
            guard let db else { throw write ? .writeFailed("store \(path) is closed") : .readFailed("store \(path) is closed") }
            do throws(SQLiteError) {
                return try body(db)
            } catch {
                throw write ? .writeFailed("\(path): \(error)") : .readFailed("\(path): \(error)")
            }
        }
    }
}
