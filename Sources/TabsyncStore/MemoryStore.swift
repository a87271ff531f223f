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
    /// The webhooks and their cursors (``WebhookStore``).
    let hooks = Lock<MemoryWebhooks>(MemoryWebhooks())
    /// History (``HistoryStore``): each workspace's ops with who and when, and its milestones.
    /// Without ``history`` retention it is the log's window, trimmed with it.
    private let kept = Lock<[String: Kept]>([:])
    /// How long history is kept (``HistoryRetention/off``: the resume window only).
    public let history: HistoryRetention
    /// Ops between milestones (with history on).
    let milestoneInterval: Int
    /// The commit clock (tests of retention turn it).
    let clock: @Sendable () -> Date

    struct Kept {
        var entries: [HistoryEntry] = []
        var milestones: [(at: Date, workspace: Workspace)] = []
    }

    public init(history: HistoryRetention = .off, milestoneInterval: Int = 256, clock: @escaping @Sendable () -> Date = { Date() }) {
        epoch = StoreEpoch.random()
        self.history = history
        self.milestoneInterval = max(1, milestoneInterval)
        self.clock = clock
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
            let now = commitStamp(batch)
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
                if count > retention + max(1, retention / 4), let newest = stored[id]?.log.last?.version {
                    // Not past an enabled hook's cursor (RetentionPlan.hookFloored).
                    let horizon = RetentionPlan.hookFloored(
                        Int64(newest) - Int64(retention), floor: hookFloor(id), version: Int64(newest), retention: retention)
                    let trimmed = stored[id]?.log.prefix { Int64($0.version) <= horizon }.count ?? 0
                    if trimmed > 0 { stored[id]?.log.removeFirst(trimmed) }
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
            // Still under the state lock: history stays in step with the logs.
            kept.withLock { kept in
                for record in batch.records {
                    guard case .applied(let ops) = record.outcome else { continue }
                    for op in ops {
                        kept[record.workspaceId, default: Kept()].entries.append(
                            HistoryEntry(op: op, author: record.author, committedAt: now))
                    }
                }
                for id in Set(batch.records.map(\.workspaceId)) { keep(&kept[id, default: Kept()], stored[id], now: now) }
            }
        }
    }

    /// The batch's commit time: the clock to the millisecond, but past the newest kept op of every
    /// workspace the batch writes, so a workspace's commit times strictly increase and each history
    /// entry's `at` names the state after its batch (docs/design.md, "Reading history"). Called
    /// under the state lock.
    private func commitStamp(_ batch: CommitBatch) -> Date {
        func ms(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded(.down)) }
        var stamp = ms(clock())
        kept.withLock { kept in
            for id in Set(batch.records.map(\.workspaceId)) {
                if let last = kept[id]?.entries.last?.committedAt { stamp = max(stamp, ms(last) + 1) }
            }
        }
        // The middle of its millisecond: read back to the millisecond, it is `stamp` again.
        return Date(timeIntervalSince1970: (Double(stamp) + 0.5) / 1000)
    }

    /// Trims one workspace's history after a commit: to the log's window without history, else as
    /// ``HistoryRetention`` plans (a milestone every `milestoneInterval` ops and one per day).
    private func keep(_ k: inout Kept, _ stored: StoredWorkspace?, now: Date) {
        guard let stored else { return }
        guard history.isOn else {
            let excess = k.entries.count - stored.log.count
            if excess > 0 { k.entries.removeFirst(excess) }
            return
        }
        let workspace = stored.workspace
        let lastVersion = k.milestones.last?.workspace.version ?? 0
        let nowMs = Int64((now.timeIntervalSince1970 * 1000).rounded(.down))
        let plan = history.plan(
            nowMs: nowMs, lastMilestoneMs: k.milestones.last.map { Int64(($0.at.timeIntervalSince1970 * 1000).rounded(.down)) },
            writesSnapshot: workspace.version - lastVersion >= UInt64(milestoneInterval))
        if plan.writesMilestone, workspace.version > lastVersion { k.milestones.append((now, workspace)) }
        guard plan.trims else { return }
        let opsBefore = Date(timeIntervalSince1970: Double(plan.opsBeforeMs) / 1000)
        let milestonesBefore = Date(timeIntervalSince1970: Double(plan.milestonesBeforeMs) / 1000)
        // Ops: a prefix committed before the cut-off, never into the resume window.
        let windowStart = stored.log.first?.version ?? workspace.version + 1
        let drop = k.entries.prefix { ($0.committedAt ?? .distantPast) < opsBefore && $0.op.version < windowStart }.count
        k.entries.removeFirst(drop)
        // Milestones: the last of each day before the ops cut-off, none before the milestones one.
        var lastOfDay: [Int64: Int] = [:]
        for (i, m) in k.milestones.enumerated() { lastOfDay[Int64((m.at.timeIntervalSince1970 / 86_400).rounded(.down))] = i }
        let keepers = Set(lastOfDay.values)
        k.milestones = k.milestones.enumerated().filter { i, m in
            m.at >= milestonesBefore && (m.at >= opsBefore || keepers.contains(i))
        }.map(\.element)
    }
}

extension MemoryStore: HistoryStore {
    public func history(workspaceId: String, before: UInt64?, limit: Int) throws(StoreError) -> [HistoryEntry] {
        kept.withLock { kept in
            guard let entries = kept[workspaceId]?.entries else { return [] }
            var result: [HistoryEntry] = []
            for entry in entries.reversed() where entry.op.version < (before ?? .max) {
                guard result.count < limit else { break }
                result.append(entry)
            }
            return result
        }
    }

    public func milestone(workspaceId: String, atOrBefore version: UInt64) throws(StoreError) -> Workspace? {
        kept.withLock { $0[workspaceId]?.milestones.last { $0.workspace.version <= version }?.workspace }
    }

    public func version(workspaceId: String, at date: Date) throws(StoreError) -> UInt64? {
        kept.withLock { kept in
            guard let k = kept[workspaceId] else { return nil }
            // Times are shown to the millisecond: a time names the whole of its millisecond.
            let date = Date(timeIntervalSince1970: ((date.timeIntervalSince1970 * 1000).rounded(.down) + 1) / 1000)
            let op = k.entries.last { ($0.committedAt ?? .distantPast) < date }?.op.version
            let milestone = k.milestones.last { $0.at < date }?.workspace.version
            return [op, milestone].compactMap { $0 }.max()
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
            kept.withLock { $0[id] = nil }
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
