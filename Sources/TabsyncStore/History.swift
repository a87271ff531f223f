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

/// A store that keeps who made each op and when (``HistoryEntry``), and reads it back newest first.
///
/// Guarantee asked of a conformer: ``history(workspaceId:before:limit:)`` returns stored ops only
/// (a prefix of what was acknowledged), newest first, contiguous in version, as far back as the
/// store's log reaches.
public protocol HistoryStore: WorkspaceStore {
    /// The stored ops of a workspace with versions below `before` (nil: from the newest), newest
    /// first, at most `limit`; empty for a workspace never stored.
    func history(workspaceId: String, before: UInt64?, limit: Int) throws(StoreError) -> [HistoryEntry]
}
