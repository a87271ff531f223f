import CSQLite
import TabsyncProto

/// The backup rule (docs/design.md, "Durability"): a store brought back from a backup is history
/// that cannot continue. ``backup(from:to:)`` marks its copy (the `meta` key ``backupMarkKey``);
/// the first read-write open of a marked file gives it a new store epoch and every workspace in it
/// that epoch (its snapshot and milestones rewritten; a workspace without a snapshot takes the
/// store's), and removes the mark, all in one transaction: a start that fails midway leaves the
/// mark for the next, and a second start keeps the epoch the first gave.
extension SQLiteStore {
    /// The `meta` key marking a backup copy; its value says when and from what it was taken.
    static let backupMarkKey = "backup"

    /// Marks a copy being written by ``backup(from:to:)`` (inside its own transaction).
    static func markAsBackup(_ db: SQLiteConnection, note: String) throws(SQLiteError) {
        let insert = try db.prepare("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)")
        try insert.bind(.text(backupMarkKey), .text(note))
        try insert.run()
    }

    /// The note of the backup mark, nil when the file is not a marked copy.
    static func backupMark(_ db: SQLiteConnection) throws(SQLiteError) -> String? {
        let query = try db.prepare("SELECT value FROM meta WHERE key = ?")
        try query.bind(.text(backupMarkKey))
        defer { query.reset() }
        return try query.step() ? query.text(0) : nil
    }

    /// On a marked copy: a new epoch for the store and every workspace, and the mark removed, in one
    /// transaction. Returns how many snapshots were rewritten, nil when the file is not marked.
    static func startNewEpochIfBackup(_ db: SQLiteConnection, newEpoch: String) throws(SQLiteError) -> Int? {
        guard try backupMark(db) != nil else { return nil }
        return try db.transaction { () throws(SQLiteError) -> Int in
            let setEpoch = try db.prepare("UPDATE meta SET value = ? WHERE key = 'epoch'")
            try setEpoch.bind(.text(newEpoch))
            try setEpoch.run()
            var rewritten = 0
            for table in ["snapshots", "milestones"] {
                rewritten += try rewriteEpochs(db, table: table, epoch: newEpoch)
            }
            let unmark = try db.prepare("DELETE FROM meta WHERE key = ?")
            try unmark.bind(.text(backupMarkKey))
            try unmark.run()
            return rewritten
        }
    }

    /// Sets `epoch` in every `tabsync.v1.Snapshot` of `table` (keyed by workspace and version).
    private static func rewriteEpochs(_ db: SQLiteConnection, table: String, epoch: String) throws(SQLiteError) -> Int {
        let rows = try db.prepare("SELECT workspace, version, snapshot FROM \(table)")
        var updated: [(workspace: String, version: Int64, bytes: [UInt8])] = []
        while try rows.step() {
            var snapshot: Tabsync_V1_Snapshot
            do {
                snapshot = try Tabsync_V1_Snapshot(serializedBytes: rows.blob(2))
                snapshot.epoch = epoch
                updated.append((rows.text(0), rows.int64(1), try snapshot.serializedBytes()))
            } catch {
                throw SQLiteError(
                    code: SQLITE_CORRUPT, message: "undecodable snapshot of \(rows.text(0)) in \(table): \(error)",
                    context: "new epoch for a backup copy")
            }
        }
        rows.reset()
        let write = try db.prepare("UPDATE \(table) SET snapshot = ? WHERE workspace = ? AND version = ?")
        for row in updated {
            write.reset()
            try write.bind(.blob(row.bytes), .text(row.workspace), .integer(row.version))
            try write.run()
        }
        return updated.count
    }
}
