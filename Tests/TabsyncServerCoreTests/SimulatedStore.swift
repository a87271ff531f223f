import Foundation
import TabsyncCore
import TabsyncStore
import TabsyncTestSupport

/// The simulation's store: a ``MemoryStore`` shared by every node, with the world's store faults
/// drawn from the world's seed in front of it (reads that fail, commits that fail with nothing
/// stored, commits whose answer is lost after they were stored or not). The nodes' store calls go
/// through the production ``StoreTurn`` against it, so the simulation runs the driver's own round
/// trip, not a copy. What the memory store accepted is kept for the world's rule oracle.
///
/// `@unchecked Sendable`: the protocol asks for it, and the simulation is one thread; nothing here
/// is touched from another.
final class SimulatedStore: WorkspaceStore, @unchecked Sendable {
    /// History on, with a milestone every 16 ops, so restores and reopens replay from milestones;
    /// commit times from a clock that stands still, so a seed's trace is the same every run.
    let base = MemoryStore(history: .standard, milestoneInterval: 16, clock: { Date(timeIntervalSince1970: 1_780_000_000) })
    private var rng: SplitMix64
    let options: SimulatedWorld.Options
    /// Faults are drawn (off while the world settles at the end).
    var faults = true
    private(set) var failedCommits = 0
    private(set) var unknownOutcomes = 0
    /// Batches the memory store accepted, until the world takes them (``takeStored()``).
    private var stored: [CommitBatch] = []

    init(seed: UInt64, options: SimulatedWorld.Options) {
        rng = SplitMix64(seed: seed ^ 0x5704_E5)
        self.options = options
    }

    var epoch: String { base.epoch }

    /// The batches stored since the last call, in order.
    func takeStored() -> [CommitBatch] {
        defer { stored.removeAll() }
        return stored
    }

    /// Stores a batch whatever the faults (a crashed node's commit that got through).
    func commitWithoutFaults(_ batch: CommitBatch) throws(StoreError) {
        try base.commit(batch)
        stored.append(batch)
    }

    /// Draws a registry call's failure, as a read failure of the store behind it.
    func registryFails() -> Bool {
        faults && rng.chance(options.loadFailure)
    }

    func load(workspaceId: String) throws(StoreError) -> StoredWorkspace? {
        if faults && rng.chance(options.loadFailure) { throw .readFailed("simulated read failure") }
        return try base.load(workspaceId: workspaceId)
    }

    func commit(_ batch: CommitBatch) throws(StoreError) {
        if faults && rng.chance(options.commitFailure) {
            failedCommits += 1
            throw .writeFailed("simulated write failure")
        }
        let storedAnyway = rng.chance(0.5)
        if faults && rng.chance(options.outcomeUnknown) {
            unknownOutcomes += 1
            if storedAnyway { try commitWithoutFaults(batch) }
            throw .outcomeUnknown("simulated lost answer")
        }
        try commitWithoutFaults(batch)
    }

    // Reads past the first one never fail: what a catch-up, a poll or the behind read finds is
    // what is stored.
    func ops(workspaceId: String, after version: UInt64, limit: Int) throws(StoreError) -> [AppliedOp]? {
        try base.ops(workspaceId: workspaceId, after: version, limit: limit)
    }

    func dedupState(workspaceId: String) throws(StoreError) -> DedupState? {
        try base.dedupState(workspaceId: workspaceId)
    }

    func storedVersions(workspaceIds: [String]) throws(StoreError) -> [String: UInt64] {
        try base.storedVersions(workspaceIds: workspaceIds)
    }

    func changes(after versions: [String: UInt64]) throws(StoreError) -> [String: StoredChanges] {
        try base.changes(after: versions)
    }
}

/// A node's view of the simulated holder registry, with the store's faults in front of a
/// registration (a failed one registers nothing; the read it was for fails with it).
struct SimulatedRegistry: HolderRegistry {
    let base: MemoryHolderRegistry
    let store: SimulatedStore

    func hold(workspaceId: String) throws(StoreError) -> Int {
        if store.registryFails() { throw .readFailed("simulated registry failure") }
        return try base.hold(workspaceId: workspaceId)
    }

    func hasNewerHolder(workspaceId: String) throws(StoreError) -> Bool { try base.hasNewerHolder(workspaceId: workspaceId) }
    func release(workspaceIds: [String]) throws(StoreError) { try base.release(workspaceIds: workspaceIds) }
    func heartbeat() throws(StoreError) { try base.heartbeat() }
    func leave() { base.leave() }
    var heartbeatInterval: Duration { base.heartbeatInterval }
    var notificationsSent: UInt64 { 0 }
}

/// History reads fail as often as loads (the restore or reopen waiting on one is refused
/// `UNAVAILABLE` and sent again); what they find is what is stored.
/// The admin log and deletes are the memory store's, without faults.
extension SimulatedStore: AdminStore {
    func workspaceIds(after: String?, limit: Int) throws(StoreError) -> [String] { try base.workspaceIds(after: after, limit: limit) }
    func deleteWorkspace(_ id: String) throws(StoreError) -> Bool { try base.deleteWorkspace(id) }
    func appendAdminCommand(_ command: AdminCommand) throws(StoreError) -> AdminEntry { try base.appendAdminCommand(command) }
    func adminEntries(after number: Int64) throws(StoreError) -> [AdminEntry] { try base.adminEntries(after: number) }
}

extension SimulatedStore: HistoryStore {
    func history(workspaceId: String, before: UInt64?, limit: Int) throws(StoreError) -> [HistoryEntry] {
        if faults && rng.chance(options.loadFailure) { throw .readFailed("simulated history read failure") }
        return try base.history(workspaceId: workspaceId, before: before, limit: limit)
    }

    func milestone(workspaceId: String, atOrBefore version: UInt64) throws(StoreError) -> Workspace? {
        try base.milestone(workspaceId: workspaceId, atOrBefore: version)
    }

    func version(workspaceId: String, at date: Date) throws(StoreError) -> UInt64? {
        try base.version(workspaceId: workspaceId, at: date)
    }
}
