import Foundation
import TabsyncCore

/// The operators' part of the PostgreSQL store (``AdminStore``): the admin log every node reads
/// (`tabsync_admin_log`), the workspace list with the nodes holding each, and deletes.
extension PostgresStore: AdminStore {
    public func workspaceIds(after: String?, limit: Int) throws(StoreError) -> [String] {
        try withConnection(failure: StoreError.readFailed) { db throws(PGError) in
            let rows = try db.execute(
                "SELECT workspace FROM tabsync_workspaces WHERE version > 0 AND workspace > $1 ORDER BY workspace LIMIT $2",
                [.text(after ?? ""), .int64(Int64(max(limit, 0)))])
            return (0..<rows.rowCount).map { rows.text($0, 0) }
        }
    }

    public func holders(of workspaceIds: [String]) throws(StoreError) -> [String: [String]] {
        guard !workspaceIds.isEmpty else { return [:] }
        return try withConnection(failure: StoreError.readFailed) { db throws(PGError) in
            let rows = try db.execute(
                """
                SELECT h.workspace, h.node FROM tabsync_holders h JOIN tabsync_nodes n ON n.node = h.node
                WHERE h.workspace = ANY(string_to_array($1, ','))
                  AND n.seen > now() - $2::int8 * interval '1 millisecond'
                ORDER BY h.workspace, h.since
                """, [.text(workspaceIds.joined(separator: ",")), .int64(holderTimeoutMillis)])
            var holders: [String: [String]] = [:]
            for row in 0..<rows.rowCount { holders[rows.text(row, 0), default: []].append(rows.text(row, 1)) }
            return holders
        }
    }

    public func deleteWorkspace(_ id: String) throws(StoreError) -> Bool {
        let tombstone = try StoreEncoding.encode(Workspace(id: id, epoch: StoreEpoch.random()))
        return try withConnection(failure: StoreError.writeFailed) { db throws(PGError) in
            try db.execute("BEGIN")
            do throws(PGError) {
                // The workspace's row orders the delete with commits, as a commit is ordered.
                let row = try db.execute(
                    "SELECT version FROM tabsync_workspaces WHERE workspace = $1 FOR UPDATE", [.text(id)])
                let version = row.rowCount > 0 ? try row.int64(0, 0) ?? 0 : 0
                guard version > 0 else {  // nothing to delete: a tombstone stays as it is
                    try db.execute("ROLLBACK")
                    return false
                }
                for table in ["tabsync_ops", "tabsync_client_seqs", "tabsync_rejections", "tabsync_rekeys", "tabsync_snapshots"] {
                    try db.execute("DELETE FROM \(table) WHERE workspace = $1", [.text(id)])
                }
                try db.execute("UPDATE tabsync_workspaces SET version = 0 WHERE workspace = $1", [.text(id)])
                try db.execute(
                    "INSERT INTO tabsync_snapshots (workspace, version, snapshot) VALUES ($1, 0, $2)",
                    [.text(id), .bytes(tombstone)])
                try db.execute("COMMIT")
                return true
            } catch {
                _ = try? db.execute("ROLLBACK")
                throw error
            }
        }
    }

    public func appendAdminCommand(_ command: AdminCommand) throws(StoreError) -> AdminEntry {
        let text = try AdminEntry.encode(command)
        let (number, millis, stored) = try withConnection(failure: StoreError.writeFailed) { db throws(PGError) in
            let row = try db.execute(
                """
                INSERT INTO tabsync_admin_log (command) VALUES ($1)
                RETURNING n, (extract(epoch FROM at) * 1000)::int8, command
                """, [.text(text)])
            return (try row.int64(0, 0) ?? 0, try row.int64(0, 1) ?? 0, row.text(0, 2))
        }
        return try AdminEntry.decode(stored, number: number, atMillis: millis)
    }

    public func adminEntries(after number: Int64) throws(StoreError) -> [AdminEntry] {
        let rows = try withConnection(failure: StoreError.readFailed) { db throws(PGError) -> [(Int64, Int64, String)] in
            let result = try db.execute(
                "SELECT n, (extract(epoch FROM at) * 1000)::int8, command FROM tabsync_admin_log WHERE n > $1 ORDER BY n",
                [.int64(number)])
            var rows: [(Int64, Int64, String)] = []
            for row in 0..<result.rowCount {
                rows.append((try result.int64(row, 0) ?? 0, try result.int64(row, 1) ?? 0, result.text(row, 2)))
            }
            return rows
        }
        var entries: [AdminEntry] = []
        for (n, at, text) in rows { entries.append(try AdminEntry.decode(text, number: n, atMillis: at)) }
        return entries
    }
}
