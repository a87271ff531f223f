import Dispatch
import Logging
import TabsyncCore
import TabsyncProto
import TabsyncStore

/// Group commit: what the loop has applied in memory but not yet acknowledged, batched for the
/// store thread. Event loop thread only.
///
/// At most one batch is in flight. Everything consumed while it commits is collected into the next
/// one, so a slow disk makes batches bigger instead of making the loop wait. Effects (messages to
/// sessions) are released in order, only once every record before them is durable.
struct CommitPipeline {
    /// The store thread: one serial queue, so store calls never overlap.
    static let storeQueue = DispatchQueue(label: "tabsync.store")

    /// A message to release once durable.
    enum Effect {
        /// `Applied` for each op to every session of the workspace.
        case broadcast(workspaceId: String, submitter: Int, ops: [AppliedOp], receivedAt: ContinuousClock.Instant)
        /// `Rejected` to the submitter only.
        case reject(workspaceId: String, session: Int, seq: UInt64, error: OpError)
        /// A repeated answer to a resubmitted seq, to the submitter only.
        case answer(workspaceId: String, session: Int, answer: Sequencer.Answer)
        /// A session's `Welcome`, made from the live state: it joins the broadcasts once it is out.
        case welcome(workspaceId: String, session: Int, welcome: Tabsync_V1_Welcome)

        var workspaceId: String {
            switch self {
            case .broadcast(let id, _, _, _), .reject(let id, _, _, _), .answer(let id, _, _), .welcome(let id, _, _): id
            }
        }
    }

    struct InFlight {
        var id: UInt64
        var recordCount: Int
        var effects: [Effect]
        /// Each touched workspace as of the end of this batch (its durable state once the commit
        /// succeeds).
        var workspaces: [String: Workspace]
    }

    var pendingRecords: [CommitRecord] = []
    var pendingEffects: [Effect] = []
    var pendingWorkspaces: Set<String> = []
    var inFlight: InFlight?
    private var nextId: UInt64 = 1

    /// Nothing pending and nothing being stored.
    var isIdle: Bool { inFlight == nil && pendingRecords.isEmpty && pendingEffects.isEmpty }

    mutating func makeBatchId() -> UInt64 {
        defer { nextId += 1 }
        return nextId
    }

    /// True when `workspaceId` has records pending or in flight.
    func isBusy(_ workspaceId: String) -> Bool {
        pendingWorkspaces.contains(workspaceId) || (inFlight?.workspaces[workspaceId] != nil)
    }
}

extension Server.Loop {
    func enqueue(_ record: CommitRecord?, effect: CommitPipeline.Effect) {
        if let record {
            commits.pendingRecords.append(record)
            commits.pendingWorkspaces.insert(record.workspaceId)
        }
        commits.pendingEffects.append(effect)
        startCommitIfIdle()
    }

    /// Sends the pending batch to the store thread unless one is in flight; effects with no record
    /// before them go out at once.
    func startCommitIfIdle() {
        guard commits.inFlight == nil else { return }
        guard !commits.pendingRecords.isEmpty else {
            let effects = commits.pendingEffects
            commits.pendingEffects = []
            for effect in effects { release(effect) }
            return
        }
        var snapshots: [String: Workspace] = [:]
        for id in commits.pendingWorkspaces {
            guard let hub = workspaces[id]?.hub else { continue }
            snapshots[id] = hub.live.workspace
        }
        let batch = CommitBatch(records: commits.pendingRecords, workspaces: snapshots, logRetention: limits.logRetention)
        let id = commits.makeBatchId()
        commits.inFlight = CommitPipeline.InFlight(
            id: id, recordCount: batch.records.count, effects: commits.pendingEffects, workspaces: snapshots)
        commits.pendingRecords = []
        commits.pendingEffects = []
        commits.pendingWorkspaces = []
        let store = self.store
        onStoreThread {
            let started = ContinuousClock.now
            do throws(StoreError) {
                try store.commit(batch)
                return .committed(batch: id, .success(()), duration: ContinuousClock.now - started)
            } catch {
                return .committed(batch: id, .failure(error), duration: ContinuousClock.now - started)
            }
        }
    }

    func commitFinished(batch: UInt64, result: Result<Void, StoreError>, duration: Duration) {
        guard let flight = commits.inFlight, flight.id == batch else { return }
        commits.inFlight = nil
        metrics.commitBatchOps.observe(Double(flight.recordCount))
        metrics.commitSeconds.observe(Double(duration.microseconds) / 1_000_000)
        switch result {
        case .success:
            for (id, workspace) in flight.workspaces {
                if let hub = workspaces[id]?.hub { hub.durable = workspace }
            }
            for effect in flight.effects { release(effect) }
        case .failure(let error):
            logger.error("store commit failed", metadata: ["error": "\(error)", "records": "\(flight.recordCount)"])
            // Every op of the touched workspaces since their last durable state is refused, and
            // each is read back from the store. Effects of other workspaces are released: their
            // records (none in this batch) are durable.
            let failed = Set(flight.workspaces.keys)
            var dropped = flight.effects.filter { failed.contains($0.workspaceId) }
            let unaffected = flight.effects.filter { !failed.contains($0.workspaceId) }
            dropped += commits.pendingEffects.filter { failed.contains($0.workspaceId) }
            commits.pendingEffects.removeAll { failed.contains($0.workspaceId) }
            commits.pendingRecords.removeAll { failed.contains($0.workspaceId) }
            commits.pendingWorkspaces.subtract(failed)
            for id in failed { reload(id) }
            for effect in dropped { refuseUnavailable(effect, error) }
            for effect in unaffected { release(effect) }
        }
        for id in flight.workspaces.keys { unloadIfIdle(id) }
        startCommitIfIdle()
        if case .draining = shutdown { continueShutdown(now: clock.now) }
    }

    /// Sends what an effect stands for, now that it is durable.
    private func release(_ effect: CommitPipeline.Effect) {
        switch effect {
        case .broadcast(let workspaceId, _, let ops, let receivedAt):
            metrics.opsApplied += UInt64(ops.count)
            guard let hub = workspaces[workspaceId]?.hub else { return }
            for applied in ops { broadcast(Tabsync_V1_ServerMessage(applied: applied), to: hub) }
            metrics.opLatencySeconds.observe(Double((clock.now - receivedAt).microseconds) / 1_000_000)
        case .reject(_, let sessionId, let seq, let error):
            metrics.opsRejected[error.code, default: 0] += 1
            guard let session = sessions[sessionId] else { return }
            send(Tabsync_V1_ServerMessage(rejected: Tabsync_V1_Rejected(seq: seq, error: error)), to: session)
        case .welcome(let workspaceId, let sessionId, let welcome):
            guard let hub = workspaces[workspaceId]?.hub else { return }
            guard let session = sessions[sessionId] else {
                hub.welcoming.remove(sessionId)
                return
            }
            welcomed(session, welcome, hub: hub)
        case .answer(_, let sessionId, let answer):
            guard let session = sessions[sessionId] else { return }
            switch answer {
            case .applied(let applied):
                send(Tabsync_V1_ServerMessage(applied: applied), to: session)
            case .rejected(let seq, let error):
                send(Tabsync_V1_ServerMessage(rejected: Tabsync_V1_Rejected(seq: seq, error: error)), to: session)
            }
        }
    }

    /// Tells the submitter an op of a failed commit was not stored (`UNAVAILABLE`).
    private func refuseUnavailable(_ effect: CommitPipeline.Effect, _ error: StoreError) {
        let target: (session: Int, seq: UInt64)
        switch effect {
        case .broadcast(_, let submitter, let ops, _):
            guard let op = ops.last else { return }
            target = (submitter, op.seq)
        case .reject(_, let session, let seq, _):
            target = (session, seq)
        case .answer(_, let session, .applied(let applied)):
            target = (session, applied.seq)
        case .answer(_, let session, .rejected(let seq, _)):
            target = (session, seq)
        case .welcome(let workspaceId, let sessionId, _):
            if let hub = workspaces[workspaceId]?.hub { hub.welcoming.remove(sessionId) }
            guard let session = sessions[sessionId] else { return }
            send(Tabsync_V1_ServerMessage(error: Tabsync_V1_Error(code: .unavailable, message: "not stored: \(error)")), to: session)
            close(session, code: 1013, reason: "store unavailable")
            return
        }
        guard let session = sessions[target.session] else { return }
        reject(session, seq: target.seq, code: .unavailable, message: "not stored: \(error)")
    }
}
