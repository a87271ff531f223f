/// The one retention rule of every durable store, as a value: whether a commit writes a
/// workspace's snapshot, and how far back its op log (and the rekeys that translate keys within
/// it) may then be trimmed. Tested once (`RetentionPlanTests`); each store only runs its SQL.
///
/// Guarantees: a snapshot is written when the workspace has none or `snapshotInterval` ops went by
/// since the last one (the interval is at least 1 and at most the retention); the horizon never
/// passes the newest snapshot (what is trimmed is covered by it) and always keeps the last
/// `retention` ops (resume and dedup answers read them); 0 means trim nothing.
public struct RetentionPlan: Sendable, Equatable {
    /// Write the workspace's state as its snapshot at `version`.
    public let writesSnapshot: Bool
    /// Delete log rows and rekeys at or below this version (0: none).
    public let horizon: Int64

    /// `version`: the workspace's version after the commit; `lastSnapshot`: the version of its
    /// stored snapshot, nil when it has none.
    public init(version: Int64, lastSnapshot: Int64?, retention: Int, snapshotInterval: Int) {
        let retention = max(retention, 1)
        let interval = max(1, min(snapshotInterval, retention))
        writesSnapshot = lastSnapshot.map { version - $0 >= Int64(interval) } ?? true
        let snapshot = writesSnapshot ? version : (lastSnapshot ?? 0)
        horizon = max(0, min(snapshot, version - Int64(retention)))
    }

    /// How many times `retention` ops the log keeps at most for a webhook that has not delivered
    /// them (``hookFloored(_:floor:version:retention:)``).
    public static let hookBacklogFactor: Int64 = 10

    /// A trim horizon under the webhook floor (docs/design.md, "Webhooks", "Compaction and
    /// cursors"): `floor` is the lowest `delivered` of an enabled hook's cursor of the workspace
    /// (nil: none), and no op after it is trimmed, unless it lies more than
    /// ``hookBacklogFactor`` × `retention` ops behind `version`: that far the log grows for a stuck
    /// hook and no further (the hook then gets a `snapshot` delivery). Never raises `horizon`.
    public static func hookFloored(_ horizon: Int64, floor: Int64?, version: Int64, retention: Int) -> Int64 {
        guard let floor, horizon > 0 else { return horizon }
        let lowest = version - Int64(max(retention, 1)) * hookBacklogFactor
        return max(0, min(horizon, max(floor, lowest)))
    }
}

/// A store's epoch: the opaque string that changes whenever history cannot continue (a new or
/// wiped store), so a client never splices two histories.
public enum StoreEpoch {
    /// A fresh random epoch: 16 hex digits.
    public static func random() -> String {
        let hex = String(UInt64.random(in: .min ... .max), radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }
}
