import Dispatch
import Logging
import TabsyncCore
import TabsyncProto
import TabsyncStore

/// Group commit: how what the loop applied in memory becomes durable, and when anyone hears of it.
/// Event loop thread only (the store call runs on ``storeQueue``).
///
/// The contract with the store (``WorkspaceStore``):
///
/// - **A record** is one consumed seq: a Submit's applied ops (with the old keys of the rekeys
///   among them), or its refusal. Seqs that consume nothing (seq 0, a repeated or ignored seq)
///   have no record.
/// - **A batch** (``CommitBatch``) is every record consumed since the previous batch was sent, in
///   server order, plus each workspace those records touch as it is after its last one. At most
///   one batch is in flight: one `commit` call on the store thread while the loop goes on. What
///   is consumed meanwhile waits for the next batch, so a slow disk makes batches bigger; it never
///   makes the loop wait.
/// - **Effects** are the messages that reveal the live state: `Applied` to the workspace,
///   `Rejected` or a repeated answer to the submitter, `Welcome` to a joining session. Each waits
///   behind the records consumed before it and goes out, in order, only once they are all stored;
///   with no record before it and no batch in flight, it goes out at once.
/// - **Acknowledged:** `commit` returned. The batch's effects are released in order, and each
///   touched workspace's `durable` state (what HTTP serves) becomes its state in the batch.
/// - **Failed:** `commit` threw, and nothing of the batch is stored (all or nothing). Each
///   workspace the batch touched has a live state ahead of the store, so everything of it in the
///   pipeline (in flight and pending) is refused, never released: a submitter gets `Rejected`
///   `UNAVAILABLE` for its seq (not acknowledged, so it sends it again), a session waiting for its
///   `Welcome` gets `Error` `UNAVAILABLE` and close 1013, the pending records are dropped, and the
///   workspace is read back from the store (``Server/Loop/WorkspaceEntry`` `.reloading`: submits
///   are refused `UNAVAILABLE` until the read is in). The batch's effects of other workspaces are
///   released: none of their records was in it, so what they show is durable.
/// - **To come:** a store shared by several servers (PostgreSQL) adds a third outcome, "another
///   writer got there first" on some workspaces of the batch; it will extend this contract here.
///   The failure handling is per workspace already.
struct CommitPipeline {
    /// The store thread: one serial queue, so store calls never overlap.
    static let storeQueue = DispatchQueue(label: "tabsync.store")

    /// A message to release once every record before it is durable.
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

    /// The batch being stored.
    struct InFlight {
        var id: UInt64
        var recordCount: Int
        /// Every effect queued before the batch was sent, in order.
        var effects: [Effect]
        /// Each touched workspace as of the end of this batch (its durable state once the commit
        /// succeeds).
        var workspaces: [String: Workspace]
    }

    /// Records consumed since the batch in flight was sent, in server order.
    private var pendingRecords: [CommitRecord] = []
    /// Effects queued since then, in order.
    private var pendingEffects: [Effect] = []
    /// The workspaces of `pendingRecords`.
    private(set) var pendingWorkspaces: Set<String> = []
    private(set) var inFlight: InFlight?
    private var nextId: UInt64 = 1

    /// Nothing pending and nothing being stored.
    var isIdle: Bool { inFlight == nil && pendingRecords.isEmpty && pendingEffects.isEmpty }

    var hasPendingRecords: Bool { !pendingRecords.isEmpty }

    /// True when `workspaceId` has records pending or in flight.
    func isBusy(_ workspaceId: String) -> Bool {
        pendingWorkspaces.contains(workspaceId) || (inFlight?.workspaces[workspaceId] != nil)
    }

    /// Queues an effect behind everything queued so far, with the record of the seq it consumed.
    mutating func append(_ record: CommitRecord?, _ effect: Effect) {
        if let record {
            pendingRecords.append(record)
            pendingWorkspaces.insert(record.workspaceId)
        }
        pendingEffects.append(effect)
    }

    /// Takes every pending effect (to release now: call only when no record is pending and no
    /// batch is in flight, so none of them waits for the store).
    mutating func takePendingEffects() -> [Effect] {
        let effects = pendingEffects
        pendingEffects = []
        return effects
    }

    /// Moves everything pending into flight as one batch. `workspaces`: each of
    /// ``pendingWorkspaces`` as it is now. Call only when no batch is in flight.
    mutating func startBatch(workspaces: [String: Workspace], logRetention: Int) -> (id: UInt64, batch: CommitBatch) {
        let batch = CommitBatch(records: pendingRecords, workspaces: workspaces, logRetention: logRetention)
        let id = nextId
        nextId += 1
        inFlight = InFlight(id: id, recordCount: batch.records.count, effects: pendingEffects, workspaces: workspaces)
        pendingRecords = []
        pendingEffects = []
        pendingWorkspaces = []
        return (id, batch)
    }

    /// Takes batch `id` out of flight; nil when it is not the batch in flight.
    mutating func finish(_ id: UInt64) -> InFlight? {
        guard let flight = inFlight, flight.id == id else { return nil }
        inFlight = nil
        return flight
    }

    /// After `flight` failed: removes from the pipeline everything of the workspaces it touched.
    /// Returns their effects, in flight then pending, in order (`refused`), and the batch's effects
    /// of other workspaces (`released`: no record of theirs was in it).
    mutating func removeFailed(_ flight: InFlight) -> (refused: [Effect], released: [Effect]) {
        let failed = flight.workspaces
        var refused: [Effect] = []
        var released: [Effect] = []
        for effect in flight.effects {
            if failed[effect.workspaceId] != nil { refused.append(effect) } else { released.append(effect) }
        }
        refused += pendingEffects.filter { failed[$0.workspaceId] != nil }
        pendingEffects.removeAll { failed[$0.workspaceId] != nil }
        pendingRecords.removeAll { failed[$0.workspaceId] != nil }
        pendingWorkspaces.subtract(failed.keys)
        return (refused, released)
    }
}

extension Server.Loop {
    /// Queues an effect (with the record of the seq it consumed, if any) and starts a batch unless
    /// one is in flight.
    func enqueue(_ record: CommitRecord?, effect: CommitPipeline.Effect) {
        commits.append(record, effect)
        startCommitIfIdle()
    }

    /// Sends the pending records to the store thread as one batch unless one is in flight; with no
    /// record pending, the pending effects go out at once.
    func startCommitIfIdle() {
        guard commits.inFlight == nil else { return }
        guard commits.hasPendingRecords else {
            for effect in commits.takePendingEffects() { release(effect) }
            return
        }
        var snapshots: [String: Workspace] = [:]
        for id in commits.pendingWorkspaces {
            guard let hub = workspaces[id]?.hub else { continue }
            snapshots[id] = hub.live.workspace
        }
        let (id, batch) = commits.startBatch(workspaces: snapshots, logRetention: limits.logRetention)
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

    /// The store thread finished batch `batch`: acknowledges it or handles its failure (see
    /// ``CommitPipeline``), then sends the next one.
    func commitFinished(batch: UInt64, result: Result<Void, StoreError>, duration: Duration) {
        guard let flight = commits.finish(batch) else { return }
        metrics.commitBatchOps.observe(Double(flight.recordCount))
        metrics.commitSeconds.observe(Double(duration.microseconds) / 1_000_000)
        switch result {
        case .success:
            for (id, workspace) in flight.workspaces {
                if let hub = workspaces[id]?.hub { hub.durable = workspace }
            }
            for effect in flight.effects { release(effect) }
        case .failure(let error):
            commitFailed(flight, error)
        }
        for id in flight.workspaces.keys { unloadIfIdle(id) }
        startCommitIfIdle()
        if case .draining = shutdown { continueShutdown(now: clock.now) }
    }

    /// Nothing of `flight` is stored: refuses everything of its workspaces still in the pipeline,
    /// reads them back from the store, and releases the rest of its effects.
    private func commitFailed(_ flight: CommitPipeline.InFlight, _ error: StoreError) {
        logger.error("store commit failed", metadata: ["error": "\(error)", "records": "\(flight.recordCount)"])
        let (refused, released) = commits.removeFailed(flight)
        // Reloading first: a Submit handled while the effects go out is refused at once.
        for id in flight.workspaces.keys { reload(id) }
        for effect in refused { refuseUnavailable(effect, error) }
        for effect in released { release(effect) }
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

    /// Tells the session an effect was for that it was not stored: `Rejected` `UNAVAILABLE` for
    /// the seq, or, for a `Welcome`, `Error` `UNAVAILABLE` and close 1013.
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
