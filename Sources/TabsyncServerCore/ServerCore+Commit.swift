import TabsyncCore
import TabsyncProto
import TabsyncStore

/// The commit pipeline's moves (``CommitPipeline`` holds its rules): a batch goes to the store, its
/// answer releases, refuses or re-sequences what waited on it.
extension ServerCore {
    /// Sends the pending records to the store as one batch unless one is in flight or they linger
    /// (``CommitPipeline/Linger``: then they go at a timeout at their deadline); with no record
    /// pending, the pending effects go out at once. A stop never lingers.
    mutating func startCommitIfIdle() {
        guard commits.inFlight == nil else { return }
        guard commits.hasPendingRecords else {
            for effect in commits.takePendingEffects() { release(effect) }
            return
        }
        // Lingering: the batch goes at its deadline (a timeout: ``nextDeadline``).
        if shutdown == .running, commits.lingerDeadline(now: now) != nil { return }
        var snapshots: [String: Workspace] = [:]
        var baseVersions: [String: UInt64] = [:]
        for id in commits.pendingWorkspaces {
            guard let hub = workspaces.hub(id) else { continue }
            snapshots[id] = hub.live.workspace
            if let stored = hub.stored { baseVersions[id] = stored.workspace.version }
        }
        let (id, batch) = commits.startBatch(
            workspaces: snapshots, logRetention: settings.limits.logRetention, baseVersions: baseVersions)
        emit(.commit(id, batch))
    }

    /// The store answered batch `batch`: acknowledges it or handles its failure or its being
    /// behind, then sends the next one.
    mutating func commitFinished(batch: UInt64, result: CommitResult, duration: Duration) {
        guard let flight = commits.finish(batch) else { return }
        metrics.commitBatchOps.observe(Double(flight.recordCount))
        metrics.commitSeconds.observe(duration.seconds)
        metrics.storeSeconds.observe(duration.seconds)
        switch result {
        case .stored:
            for (id, workspace) in flight.workspaces {
                workspaces.withHub(id) { $0.durable = workspace }
            }
            adoptStoredRecords(flight)
            for effect in flight.effects { release(effect) }
        case .failed(let error):
            commitFailed(flight, error)
        case .behind(let reads):
            commitBehind(flight, reads)
        }
        for id in flight.workspaces.keys.sorted() { unloadIfIdle(id) }
        startCommitIfIdle()
        continueShutdown()
        startCatchUpRead()  // the catch-ups held back while the batch was in flight
    }

    /// A shared store: the batch's records are stored, so each workspace's `stored` sequencer takes
    /// them (it follows what is stored, this node's commits and the others').
    private mutating func adoptStoredRecords(_ flight: CommitPipeline.InFlight) {
        guard settings.sharedStore else { return }
        var broken: Set<String> = []
        for record in flight.records {
            let id = record.workspaceId
            guard !broken.contains(id) else { continue }
            do throws(OpError) {
                try workspaces.withHub(id) { hub throws(OpError) in
                    guard hub.stored != nil else { return }
                    switch record.outcome {
                    case .applied(let ops):
                        for op in ops { try hub.stored!.adopt(op) }
                    case .rejected(let error):
                        hub.stored!.adopt(Sequencer.Rejection(clientId: record.clientId, seq: record.seq, error: error))
                    }
                }
            } catch {
                logger.error("stored copy of a workspace refused its own commit", metadata: [
                    "workspace": "\(id)", "error": "\(error)",
                ])
                broken.insert(id)
            }
        }
        for id in broken.sorted() { reload(id) }
    }

    /// `flight` failed: refuses everything of its workspaces still in the pipeline, reads them back,
    /// and releases the rest of its effects. After `outcomeUnknown` the batch may be stored, so its
    /// submitters are told neither "applied" nor "refused": they are closed 1013 and learn what
    /// became of their seqs when they resume.
    private mutating func commitFailed(_ flight: CommitPipeline.InFlight, _ error: StoreError) {
        logger.error("store commit failed", metadata: ["error": "\(error)", "records": "\(flight.recordCount)"])
        let (sent, pending, released) = commits.removeFailed(flight)
        // Reloading first: a Submit handled while the effects go out is refused at once.
        for id in flight.workspaces.keys.sorted() { reload(id) }
        if case .outcomeUnknown = error {
            metrics.commitsOutcomeUnknown += 1
            for effect in sent { closeUnanswerable(effect, error) }
        } else {
            for effect in sent { refuseUnavailable(effect, error) }
        }
        for effect in pending { refuseUnavailable(effect, error) }
        for effect in released { release(effect) }
    }

    /// The store cannot tell whether the record behind `effect` is stored: its session is closed
    /// 1013, and a waiting `Welcome` is refused as usual.
    private mutating func closeUnanswerable(_ effect: CommitPipeline.Effect, _ error: StoreError) {
        if case .welcome = effect { return refuseUnavailable(effect, error) }
        close(effect.session, .commitOutcomeUnknown)
    }

    /// Sends what an effect stands for, now that it is durable.
    mutating func release(_ effect: CommitPipeline.Effect) {
        switch effect {
        case .broadcast(let workspaceId, let submitter, let ops, let receivedAt):
            metrics.opsApplied += UInt64(ops.count)
            guard let hub = workspaces.hub(workspaceId) else { return }
            for applied in ops { broadcast(Tabsync_V1_ServerMessage(applied: applied), to: hub.members) }
            feedApplied(ops, of: workspaceId)
            writeApplied(submitter, ops)
            metrics.opLatencySeconds.observe((now - receivedAt).seconds)
        case .reject(_, let sessionId, let seq, let error):
            metrics.opsRejected[error.code, default: 0] += 1
            send(Tabsync_V1_ServerMessage(rejected: Tabsync_V1_Rejected(seq: seq, error: error)), to: sessionId)
        case .welcome(let workspaceId, let sessionId, let welcome):
            welcomed(sessionId, welcome, workspaceId: workspaceId)
        case .answer(_, let sessionId, let answer):
            switch answer {
            case .applied(let applied):
                send(Tabsync_V1_ServerMessage(applied: applied), to: sessionId)
            case .rejected(let seq, let error):
                send(Tabsync_V1_ServerMessage(rejected: Tabsync_V1_Rejected(seq: seq, error: error)), to: sessionId)
            }
        case .answerGone(_, let sessionId, let seq):
            metrics.opsRejected[.answerGone, default: 0] += 1
            let message = "seq \(seq) was consumed and its answer is no longer held: what it did is in the state you were welcomed with"
            send(Tabsync_V1_ServerMessage(rejected: Tabsync_V1_Rejected(seq: seq, code: .answerGone, message: message)), to: sessionId)
        }
    }

    /// Tells the session an effect was for that it was not stored: `Rejected` `UNAVAILABLE` for
    /// the seq, or, for a `Welcome`, `Error` `UNAVAILABLE` and close 1013.
    mutating func refuseUnavailable(_ effect: CommitPipeline.Effect, _ error: StoreError) {
        let target: (session: ConnectionID, seq: UInt64)
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
        case .answerGone:
            // True whatever became of the batch: the seq was consumed long before it.
            return release(effect)
        case .welcome(let workspaceId, let sessionId, _):
            workspaces.withHub(workspaceId) { _ = $0.welcoming.remove(sessionId) }
            send(Tabsync_V1_ServerMessage(error: Tabsync_V1_Error(code: .unavailable, message: "not stored: \(error)")), to: sessionId)
            close(sessionId, .storeUnavailable)
            return
        }
        reject(target.session, seq: target.seq, code: .unavailable, message: "not stored: \(error)")
    }

    // MARK: behind

    /// The store refused batch `flight` whole because other nodes committed to some of its
    /// workspaces first (`reads`: what each missed). Puts the batch back in front of the pipeline,
    /// brings each behind workspace up to the stored state (broadcasting the other nodes' ops), and
    /// re-sequences its unacknowledged entries against it (``CommitPipeline``, "Behind").
    mutating func commitBehind(_ flight: CommitPipeline.InFlight, _ reads: [String: CatchUpRead]) {
        metrics.commitsRetried += 1
        logger.debug("another node committed first; catching up and re-sequencing", metadata: [
            "workspaces": "\(reads.keys.sorted().joined(separator: ","))", "records": "\(flight.recordCount)",
        ])
        commits.requeue(flight)
        let entries = commits.take(workspaces: Set(reads.keys))
        for (id, read) in reads.sorted(by: { $0.key < $1.key }) {
            let mine = entries[id] ?? []
            guard let storedVersion = storedVersion(of: id) else {
                refuseBehind(id, mine, .writeFailed("the workspace is being read back"))
                continue
            }
            switch read {
            case .caughtUp(let missed) where missed.from == storedVersion:
                do throws(OpError) {
                    try takeStored(missed, into: id, live: false)
                } catch {
                    refuseBehind(id, mine, .readFailed("the ops other nodes stored do not follow: \(error)"))
                    continue
                }
                resequence(mine, in: id)
            case .caughtUp:
                refuseBehind(id, mine, .readFailed("the catch-up read does not start at this node's version"))
            case .compacted:
                refuseBehind(id, mine, .readFailed("the log no longer holds what this node missed"))
                for member in workspaces.hub(id)?.members ?? [] { close(member, .behindStore) }
            case .failed(let error):
                refuseBehind(id, mine, error)
            }
        }
    }

    /// A behind workspace that cannot be caught up op by op: read back whole, its entries refused
    /// `UNAVAILABLE` (never acknowledged, so their clients send them again).
    private mutating func refuseBehind(_ id: String, _ entries: [CommitPipeline.Entry], _ error: StoreError) {
        logger.error("cannot catch up after another node's commit", metadata: ["workspace": "\(id)", "error": "\(error)"])
        reload(id)
        for entry in entries { refuseUnavailable(entry.effect, error) }
    }

    /// Starts the hub's live state again from its stored state and runs its unacknowledged entries
    /// through the sequencer again, in order: each Submit as received (it may now be refused, placed
    /// elsewhere, translated through another node's rekey, or answered from dedup), each waiting
    /// `Welcome` made again from the live state at its place.
    private mutating func resequence(_ entries: [CommitPipeline.Entry], in id: String) {
        workspaces.withHub(id) { hub in
            if let stored = hub.stored { hub.live = stored }
        }
        for entry in entries {
            if let input = entry.input {
                metrics.opsResequenced += 1
                sequence(input, from: entry.effect.session, workspaceId: id)
            } else if case .welcome(_, let sessionId, _) = entry.effect {
                guard let session = sessions[sessionId], session.closing == nil, case .loading(let hello) = session.phase,
                      let hub = workspaces.hub(id), hub.welcoming.contains(sessionId)
                else {
                    workspaces.withHub(id) { _ = $0.welcoming.remove(sessionId) }
                    continue
                }
                let welcome = makeWelcome(sessionId, hello, hub: hub)
                commits.append(nil, .welcome(workspaceId: id, session: sessionId, welcome: welcome), at: now)
            } else {
                logger.error("an entry without its Submit was dropped while re-sequencing", metadata: ["workspace": "\(id)"])
            }
        }
    }
}
