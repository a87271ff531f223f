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
            let existed = (stored[id]?.workspace.version ?? 0) > 0
            if stored[id] != nil { stored[id] = StoredWorkspace(workspace: Workspace(id: id, epoch: StoreEpoch.random())) }
            return existed
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
