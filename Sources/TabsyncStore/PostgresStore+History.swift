import Foundation
import TabsyncCore

/// Who and when, read back (``HistoryStore``).
extension PostgresStore: HistoryStore {
    public func history(workspaceId: String, before: UInt64?, limit: Int) throws(StoreError) -> [HistoryEntry] {
        let rows = try withConnection(failure: StoreError.readFailed) { db throws(PGError) -> [HistoryEntry.Row] in
            let result = try db.execute(
                """
                SELECT version, client_id, seq, active_tab_id, op, author, (extract(epoch FROM committed_at) * 1000)::int8
                FROM tabsync_ops WHERE workspace = $1 AND version < $2 ORDER BY version DESC LIMIT $3
                """,
                [.text(workspaceId), .int64(before.map { Int64(bitPattern: $0) } ?? Int64.max), .int64(Int64(max(0, limit)))])
            var rows: [HistoryEntry.Row] = []
            for row in 0..<result.rowCount {
                rows.append((
                    try result.int64(row, 0) ?? 0, result.text(row, 1), try result.int64(row, 2) ?? 0, result.text(row, 3),
                    result.bytes(row, 4), result.text(row, 5), try result.int64(row, 6)))
            }
            return rows
        }
        return try HistoryEntry.decode(rows, workspaceId: workspaceId, context: "")
    }

    public func milestone(workspaceId: String, atOrBefore version: UInt64) throws(StoreError) -> Workspace? {
        let blob = try withConnection(failure: StoreError.readFailed) { db throws(PGError) -> [UInt8]? in
            let result = try db.execute(
                "SELECT snapshot FROM tabsync_milestones WHERE workspace = $1 AND version <= $2 ORDER BY version DESC LIMIT 1",
                [.text(workspaceId), .int64(Int64(bitPattern: min(version, UInt64(Int64.max))))])
            return result.rowCount > 0 ? result.bytes(0, 0) : nil
        }
        return try blob.map { (b: [UInt8]) throws(StoreError) -> Workspace in
            try StoreEncoding.decodeSnapshot(b, context: "milestone of \(workspaceId)")
        }
    }

    public func version(workspaceId: String, at date: Date) throws(StoreError) -> UInt64? {
        let ms = Int64((date.timeIntervalSince1970 * 1000).rounded(.down))
        let version = try withConnection(failure: StoreError.readFailed) { db throws(PGError) -> Int64? in
            try db.execute(
                """
                SELECT greatest(
                    (SELECT max(version) FROM tabsync_ops WHERE workspace = $1 AND committed_at < to_timestamp(($2 + 1) / 1000.0)),
                    (SELECT max(version) FROM tabsync_milestones WHERE workspace = $1 AND committed_at < to_timestamp(($2 + 1) / 1000.0)))
                """, [.text(workspaceId), .int64(ms)]).int64(0, 0)
        }
        return version.map { UInt64(bitPattern: $0) }
    }
}
