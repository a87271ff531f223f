import Foundation
import TabsyncCore

/// One applied op with who made it and when it was committed (docs/design.md, "History").
public struct HistoryEntry: Sendable, Equatable {
    public var op: AppliedOp
    /// The token's `sub` (with access control) or the name the client gave in its Hello; "" for
    /// server-made ops and for ops stored before history was kept.
    public var author: String
    /// When the op's batch was committed (the SQLite node's clock, or PostgreSQL's); nil for ops
    /// stored before history was kept.
    public var committedAt: Date?

    public init(op: AppliedOp, author: String, committedAt: Date?) {
        self.op = op
        self.author = author
        self.committedAt = committedAt
    }
}

extension HistoryEntry {
    /// One stored op as a store reads it: version, client id, seq, active tab, the op's bytes,
    /// author, commit time in Unix milliseconds (nil: stored before history was kept).
    typealias Row = (version: Int64, clientId: String, seq: Int64, activeTabId: String, op: [UInt8], author: String, committedMs: Int64?)

    /// The entries of stored rows, in their order; `context` prefixes a decoding error's message.
    static func decode(_ rows: [Row], workspaceId: String, context: String) throws(StoreError) -> [HistoryEntry] {
        var entries: [HistoryEntry] = []
        entries.reserveCapacity(rows.count)
        for row in rows {
            let op = try StoreEncoding.decodeOp(row.op, context: "\(context)op \(row.version) of \(workspaceId)")
            entries.append(HistoryEntry(
                op: AppliedOp(
                    version: UInt64(bitPattern: row.version), op: op, clientId: row.clientId,
                    seq: UInt64(bitPattern: row.seq), activeTabId: row.activeTabId),
                author: row.author, committedAt: row.committedMs.map { Date(timeIntervalSince1970: Double($0) / 1000) }))
        }
        return entries
    }
}

/// A store that keeps who made each op and when (``HistoryEntry``), and reads it back newest first.
///
/// Guarantee asked of a conformer: ``history(workspaceId:before:limit:)`` returns stored ops only
/// (a prefix of what was acknowledged), newest first, contiguous in version, as far back as the
/// store's log reaches.
public protocol HistoryStore: WorkspaceStore {
    /// The stored ops of a workspace with versions below `before` (nil: from the newest), newest
    /// first, at most `limit`; empty for a workspace never stored.
    func history(workspaceId: String, before: UInt64?, limit: Int) throws(StoreError) -> [HistoryEntry]
    /// The newest milestone (the workspace's state as stored at a commit) at or before `version`;
    /// nil when none is kept.
    func milestone(workspaceId: String, atOrBefore version: UInt64) throws(StoreError) -> Workspace?
    /// The newest version committed at or before `date` (to the millisecond: an op's shown time
    /// names it), from the kept ops and milestones; nil when nothing kept is that old.
    func version(workspaceId: String, at date: Date) throws(StoreError) -> UInt64?
}
