import Synchronization
import TabsyncCore

/// A ``WorkspaceStore`` in memory: nothing survives the process, and a new instance has a new
/// epoch (its history starts over). It keeps the same state a durable store keeps, so a server
/// restarted on the same instance resumes exactly as after a restart on disk.
///
/// Thread-safe (a `Mutex` guards the state); `commit` is atomic per batch.
public final class MemoryStore: WorkspaceStore {
    public let epoch: String
    private let state = Mutex<[String: StoredWorkspace]>([:])
    /// When set, every commit fails with this error (for tests of the UNAVAILABLE path).
    private let failure = Mutex<StoreError?>(nil)

    public init(epoch: String = MemoryStore.randomEpoch()) {
        self.epoch = epoch
    }

    /// A fresh random epoch: 16 hex digits.
    public static func randomEpoch() -> String {
        let value = UInt64.random(in: .min ... .max)
        let hex = String(value, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }

    /// Makes every later commit fail with `error` (nil: commits succeed again).
    public func failCommits(with error: StoreError?) {
        failure.withLock { $0 = error }
    }

    public func load(workspaceId: String) throws(StoreError) -> StoredWorkspace? {
        state.withLock { $0[workspaceId] }
    }

    public func commit(_ batch: CommitBatch) throws(StoreError) {
        if let error = failure.withLock({ $0 }) { throw error }
        state.withLock { stored in
            for record in batch.records {
                var entry = stored[record.workspaceId]
                    ?? StoredWorkspace(workspace: Workspace(id: record.workspaceId, epoch: epoch))
                if record.seq > entry.lastSeqs[record.clientId, default: 0] {
                    entry.lastSeqs[record.clientId] = record.seq
                }
                if case .applied(let ops) = record.outcome {
                    entry.log.append(contentsOf: ops)
                    if entry.log.count > batch.logRetention {
                        entry.log.removeFirst(entry.log.count - batch.logRetention)
                    }
                }
                stored[record.workspaceId] = entry
            }
            for (id, workspace) in batch.workspaces {
                stored[id, default: StoredWorkspace(workspace: workspace)].workspace = workspace
            }
        }
    }
}
