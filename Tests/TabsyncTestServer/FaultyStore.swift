import Synchronization
import TabsyncLock
import TabsyncCore
import TabsyncStore

/// A real store behind a switch a test turns: what a store that is down, or a `COMMIT` whose answer
/// is lost, does to a server, at the moment the test chooses. Everything else goes to `base`.
///
/// - ``failing``: every call throws (commits `writeFailed`, reads `readFailed`), nothing is stored.
/// - ``loseNextAnswer(stored:)``: the next commit is stored in `base` (or not) and then throws
///   `outcomeUnknown`, as ``PostgresStore`` does when it cannot learn how a `COMMIT` ended.
package final class FaultyStore: WorkspaceStore {
    package let base: any WorkspaceStore
    private struct State {
        var failing = false
        var loseNext: Bool?
    }
    private let state = Lock(State())

    package init(_ base: any WorkspaceStore) { self.base = base }

    package var failing: Bool {
        get { state.withLock { $0.failing } }
        set { state.withLock { $0.failing = newValue } }
    }

    /// The next commit throws `outcomeUnknown` after `stored` decided whether it reached `base`.
    package func loseNextAnswer(stored: Bool) { state.withLock { $0.loseNext = stored } }

    package var epoch: String { base.epoch }

    private func check(_ failure: (String) -> StoreError) throws(StoreError) {
        if failing { throw failure("the test turned the store off") }
    }

    package func load(workspaceId: String) throws(StoreError) -> StoredWorkspace? {
        try check(StoreError.readFailed)
        return try base.load(workspaceId: workspaceId)
    }

    package func commit(_ batch: CommitBatch) throws(StoreError) {
        try check(StoreError.writeFailed)
        let lose = state.withLock { state -> Bool? in
            defer { state.loseNext = nil }
            return state.loseNext
        }
        if lose == true || lose == nil { try base.commit(batch) }
        if lose != nil { throw .outcomeUnknown("the test lost the answer to this commit") }
    }

    package func ops(workspaceId: String, after version: UInt64, limit: Int) throws(StoreError) -> [AppliedOp]? {
        try check(StoreError.readFailed)
        return try base.ops(workspaceId: workspaceId, after: version, limit: limit)
    }

    package func dedupState(workspaceId: String) throws(StoreError) -> DedupState? {
        try check(StoreError.readFailed)
        return try base.dedupState(workspaceId: workspaceId)
    }

    package func storedVersions(workspaceIds: [String]) throws(StoreError) -> [String: UInt64] {
        try check(StoreError.readFailed)
        return try base.storedVersions(workspaceIds: workspaceIds)
    }
}
