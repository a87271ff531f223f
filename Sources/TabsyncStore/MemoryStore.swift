import Foundation
import TabsyncCore
import TabsyncLock

/// A ``WorkspaceStore`` in memory: nothing survives the process, and a new instance has a new
/// epoch (its history starts over). It keeps the same state a durable store keeps, so a server
/// restarted on the same instance resumes exactly as after a restart on disk.
///
/// Thread-safe (a `Lock` guards the state); `commit` is atomic per batch.
public final class MemoryStore: WorkspaceStore {
    public let epoch: String
    private let state = Lock<[String: StoredWorkspace]>([:])
    /// When set, every commit fails with this error (for tests of the UNAVAILABLE path).
    private let failure = Lock<StoreError?>(nil)
    /// The admin log (``AdminStore``).
    private let adminLog = Lock<[AdminEntry]>([])
    /// Who made each op in the log and when it was committed (``HistoryStore``), parallel to each
    /// workspace's log and trimmed with it.
    private let authors = Lock<[String: [(author: String, at: Date)]]>([:])

    public init() {
        epoch = StoreEpoch.random()
    }

    /// Makes every later commit fail with `error` (nil: commits succeed again).
    func failCommits(with error: StoreError?) {
        failure.withLock { $0 = error }
    }

    public func load(workspaceId: String) throws(StoreError) -> StoredWorkspace? {
        state.withLock { $0[workspaceId] }
    }

    public func commit(_ batch: CommitBatch) throws(StoreError) {
        if let error = failure.withLock({ $0 }) { throw error }
        let now = Date()
        try state.withLock { (stored: inout [String: StoredWorkspace]) throws(StoreError) in
            let stale = try batch.staleWorkspaces(
                stored: { stored[$0]?.workspace.version ?? 0 }, lastSeq: { stored[$0]?.lastSeqs[$1] ?? 0 })
            if !stale.isEmpty { throw StoreError.behind(storedVersions: stale) }
            let fresh = { (id: String) in StoredWorkspace(workspace: Workspace(id: id, epoch: self.epoch)) }
            for record in batch.records {
                // Mutated in place: the log is never copied.
                if record.seq > stored[record.workspaceId, default: fresh(record.workspaceId)].lastSeqs[record.clientId, default: 0] {
                    stored[record.workspaceId, default: fresh(record.workspaceId)].lastSeqs[record.clientId] = record.seq
                }
                switch record.outcome {
                case .applied(let ops):
                    stored[record.workspaceId, default: fresh(record.workspaceId)].log.append(contentsOf: ops)
                    stored[record.workspaceId, default: fresh(record.workspaceId)].rekeys.append(contentsOf: record.rekeys)
                case .rejected(let error):
                    stored[record.workspaceId, default: fresh(record.workspaceId)].rejections.append(
                        Sequencer.Rejection(clientId: record.clientId, seq: record.seq, error: error))
                }
            }
            let retention = max(batch.logRetention, 1)
            for id in Set(batch.records.map(\.workspaceId)) {
                // Trimmed in chunks of a quarter of the retention, so trimming costs O(1) per op.
                let count = stored[id]?.log.count ?? 0
                if count > retention + max(1, retention / 4) {
                    stored[id]?.log.removeFirst(count - retention)
                    // Rekeys leave with the log window they translate keys of.
                    let oldest = stored[id]?.log.first?.version ?? 0
                    stored[id]?.rekeys.removeAll { $0.version < oldest }
                }
                let refusals = stored[id]?.rejections.count ?? 0
                if refusals > retention + max(1, retention / 4) {
                    stored[id]?.rejections.removeFirst(refusals - retention)
                }
            }
            for (id, workspace) in batch.workspaces {
                stored[id, default: StoredWorkspace(workspace: workspace)].workspace = workspace
            }
            // Still under the state lock: the authors stay parallel to the logs.
            authors.withLock { authors in
                for record in batch.records {
                    guard case .applied(let ops) = record.outcome else { continue }
                    for _ in ops { authors[record.workspaceId, default: []].append((record.author, now)) }
                }
                for id in Set(batch.records.map(\.workspaceId)) {
                    let excess = (authors[id]?.count ?? 0) - (stored[id]?.log.count ?? 0)
                    if excess > 0 { authors[id]?.removeFirst(excess) }
                }
            }
        }
    }
}

extension MemoryStore: HistoryStore {
    public func history(workspaceId: String, before: UInt64?, limit: Int) throws(StoreError) -> [HistoryEntry] {
        state.withLock { stored in
            authors.withLock { authors in
                guard let log = stored[workspaceId]?.log else { return [] }
                let meta = authors[workspaceId] ?? []
                var entries: [HistoryEntry] = []
                for (index, op) in log.enumerated().reversed() where op.version < (before ?? .max) {
                    guard entries.count < limit else { break }
                    let m = index - (log.count - meta.count)
                    entries.append(HistoryEntry(
                        op: op, author: m >= 0 ? meta[m].author : "", committedAt: m >= 0 ? meta[m].at : nil))
                }
                return entries
            }
        }
    }
}

extension MemoryStore: AdminStore {
    public func workspaceIds(after: String?, limit: Int) throws(StoreError) -> [String] {
        state.withLock { stored in
            let ids = stored.filter { entry in entry.value.workspace.version > 0 && entry.key > (after ?? "") }.keys
            return Array(ids.sorted().prefix(max(limit, 0)))
        }
    }

    public func deleteWorkspace(_ id: String) throws(StoreError) -> Bool {
        state.withLock { stored in
            guard (stored[id]?.workspace.version ?? 0) > 0 else { return false }  // a tombstone stays as it is
            stored[id] = StoredWorkspace(workspace: Workspace(id: id, epoch: StoreEpoch.random()))
            authors.withLock { $0[id] = nil }
            return true
        }
    }

    public func appendAdminCommand(_ command: AdminCommand) throws(StoreError) -> AdminEntry {
        adminLog.withLock { log in
            let entry = AdminEntry(number: (log.last?.number ?? 0) + 1, at: Date(), command: command)
            log.append(entry)
            return entry
        }
    }

    public func adminEntries(after number: Int64) throws(StoreError) -> [AdminEntry] {
        adminLog.withLock { log in log.filter { $0.number > number } }
    }
}
