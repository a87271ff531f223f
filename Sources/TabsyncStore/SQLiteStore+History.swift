import Foundation
import TabsyncCore

/// Who and when, read back (``HistoryStore``).
extension SQLiteStore: HistoryStore {
    public func history(workspaceId: String, before: UInt64?, limit: Int) throws(StoreError) -> [HistoryEntry] {
        let rows = try withStoreConnection(write: false) { db throws(SQLiteError) -> [HistoryEntry.Row] in
            let query = try db.prepare(
                """
                SELECT version, client_id, seq, active_tab_id, op, author, committed_ms FROM ops
                WHERE workspace = ? AND version < ? ORDER BY version DESC LIMIT ?
                """)
            try query.bind(
                .text(workspaceId), .integer(before.map { Int64(bitPattern: $0) } ?? Int64.max), .integer(Int64(max(0, limit))))
            var rows: [HistoryEntry.Row] = []
            while try query.step() {
                rows.append((
                    query.int64(0), query.text(1), query.int64(2), query.text(3), query.blob(4), query.text(5),
                    query.isNull(6) ? nil : query.int64(6)))
            }
            return rows
        }
        return try HistoryEntry.decode(rows, workspaceId: workspaceId, context: "\(path): ")
    }

    public func milestone(workspaceId: String, atOrBefore version: UInt64) throws(StoreError) -> Workspace? {
        let blob = try withStoreConnection(write: false) { db throws(SQLiteError) -> [UInt8]? in
            let query = try db.prepare(
                "SELECT snapshot FROM milestones WHERE workspace = ? AND version <= ? ORDER BY version DESC LIMIT 1")
            try query.bind(.text(workspaceId), .integer(Int64(bitPattern: min(version, UInt64(Int64.max)))))
            return try query.step() ? query.blob(0) : nil
        }
        return try blob.map { (b: [UInt8]) throws(StoreError) -> Workspace in
            try StoreEncoding.decodeSnapshot(b, context: "\(path): milestone of \(workspaceId)")
        }
    }

    public func version(workspaceId: String, at date: Date) throws(StoreError) -> UInt64? {
        let ms = Int64((date.timeIntervalSince1970 * 1000).rounded(.down))
        let version = try withStoreConnection(write: false) { db throws(SQLiteError) -> Int64? in
            try db.scalar(
                """
                SELECT coalesce(max(v), -1) FROM (
                    SELECT max(version) AS v FROM ops WHERE workspace = ?1 AND committed_ms <= ?2
                    UNION ALL SELECT max(version) FROM milestones WHERE workspace = ?1 AND committed_ms <= ?2)
                """, .text(workspaceId), .integer(ms))
        }
        return version.flatMap { $0 < 0 ? nil : UInt64(bitPattern: $0) }
    }
}
