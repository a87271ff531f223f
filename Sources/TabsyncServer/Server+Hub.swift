import CLibwebsockets
import Logging
import TabsyncCore
import TabsyncProto
import TabsyncStore

/// A loaded workspace: its sequencer and sessions. Event loop thread only.
///
/// `live` runs ahead of the store: it includes ops whose commit has not returned yet. Nothing of
/// `live` reaches anyone before it is durable: `Applied`, `Rejected` and `Welcome` are effects of
/// the commit pipeline, released in order once every record before them is stored. A failed commit
/// reloads the workspace from the store (`reloading`), which is the stored state by definition.
final class WorkspaceHub {
    let id: String
    /// Includes ops applied but not yet durable.
    var live: Sequencer
    /// The workspace as of its last successful commit (what HTTP shows).
    var durable: Workspace
    /// Sessions whose `Welcome` went out, by id: they receive every broadcast from then on. Held
    /// here (not looked up in the loop's table per delivery); removed when the session leaves.
    var sessions: [Int: Session] = [:]
    /// Sessions whose `Welcome` waits in the commit pipeline.
    var welcoming: Set<Int> = []
    /// A commit failed; the workspace is being read back from the store.
    var reloading = false
    var presenceDirty = false
    var lastPresenceAt: ContinuousClock.Instant?

    init(id: String, sequencer: Sequencer) {
        self.id = id
        live = sequencer
        durable = sequencer.workspace
    }
}

extension Server.Loop {
    /// A workspace's place in the loop: being loaded from the store, or in memory.
    enum WorkspaceEntry {
        case loading
        case loaded(WorkspaceHub)
    }

    /// Most messages a session may send while its workspace loads; more is a protocol error.
    static var maxDeferredMessages: Int { 1_000 }

    // MARK: messages

    /// One whole client message from a session.
    func received(_ session: Session, _ bytes: [UInt8]) {
        let message: Tabsync_V1_ClientMessage
        do {
            message = try session.format.decodeClientMessage(bytes)
        } catch {
            close(session, code: error.closeCode, reason: "undecodable frame", flush: false)
            logger.info("undecodable frame", metadata: ["session": "\(session.id)", "error": "\(error.reason.prefix(200))"])
            return
        }
        handle(message, from: session)
    }

    private func handle(_ message: Tabsync_V1_ClientMessage, from session: Session) {
        guard session.closing == nil else { return }
        switch (message.message, session.phase) {
        case (nil, _):
            refuse(session, code: .protocolError, message: "a ClientMessage with none of its fields set")
        case (.hello(let hello), .awaitingHello):
            accept(hello, from: session)
        case (.hello, _):
            refuse(session, code: .protocolError, message: "a second Hello")
        case (_, .awaitingHello):
            refuse(session, code: .protocolError, message: "a message before Hello")
        case (_, .loading):
            if session.deferred.count >= Self.maxDeferredMessages {
                refuse(session, code: .protocolError, message: "too many messages before Welcome")
            } else {
                session.deferred.append(message)
            }
        case (.submit(let submit), .joined(let hello)):
            self.submit(submit, from: session, hello: hello)
        case (.focus(let focus), .joined(var hello)):
            guard focus.tabID.isEmpty || Validation.isValidTabId(focus.tabID), focus.tabID != hello.focusTabId else { return }
            hello.focusTabId = focus.tabID
            session.phase = .joined(hello)
            if case .loaded(let hub) = workspaces[hello.workspaceId] { markPresenceDirty(hub) }
        }
    }

    /// Checks a Hello and joins the session to its workspace (loading it first if needed).
    private func accept(_ message: Tabsync_V1_Hello, from session: Session) {
        if let problem = Self.helloProblem(message) {
            refuse(session, code: .invalidArgument, message: problem)
            return
        }
        lws_set_timer_usecs(session.wsi, -1)  // the Hello came in time: cancel the hello timer
        let hello = Session.Hello(
            workspaceId: message.workspace, clientId: message.clientID, clientName: message.clientName,
            lastVersion: message.lastVersion, epoch: message.epoch)
        session.phase = .loading(hello)
        switch workspaces[hello.workspaceId] {
        case .loaded(let hub) where !hub.reloading:
            join(session, to: hub)
        case .loaded, .loading:
            loadWaiters[hello.workspaceId, default: []].append(session.id)
        case nil:
            loadWaiters[hello.workspaceId, default: []].append(session.id)
            requestLoad(hello.workspaceId)
        }
    }

    /// What is wrong with a Hello, or nil.
    static func helloProblem(_ hello: Tabsync_V1_Hello) -> String? {
        if !Validation.isValidWorkspaceId(hello.workspace) {
            return "hello.workspace must be 1-64 chars of [A-Za-z0-9._-]"
        }
        if !Validation.isValidClientId(hello.clientID) {
            return "hello.clientId must be 1-64 chars of [A-Za-z0-9._:-]"
        }
        if hello.clientName.unicodeScalars.count > Validation.maxClientNameLength {
            return "hello.clientName is over \(Validation.maxClientNameLength) chars"
        }
        if !Validation.isCleanText(hello.clientName) {
            return "hello.clientName has control characters"
        }
        if hello.epoch.utf8.count > 256 || !Validation.isCleanText(hello.epoch) {
            return "hello.epoch is not an epoch this server gives"
        }
        return nil
    }

    /// Queues `Welcome` (a snapshot, or the missed ops when resuming) as of the live state; it goes
    /// out once everything before it is durable, and the session joins the broadcasts then.
    private func join(_ session: Session, to hub: WorkspaceHub) {
        guard case .loading(let hello) = session.phase, !hub.reloading, !hub.welcoming.contains(session.id) else { return }
        hub.welcoming.insert(session.id)
        idleSince[hub.id] = nil  // no longer idle: the clock starts again when the last session leaves
        let state = hub.live
        let lastSeq = state.lastSeq(of: hello.clientId)
        let welcome: Tabsync_V1_Welcome
        if hello.lastVersion > 0, hello.epoch == state.workspace.epoch,
           let missed = state.missed(after: hello.lastVersion), missed.count <= limits.maxResumeOps {
            welcome = Tabsync_V1_Welcome(
                sessionId: String(session.id), clientId: hello.clientId, lastSeq: lastSeq, limits: limits,
                epoch: state.workspace.epoch, missed: missed)
        } else {
            welcome = Tabsync_V1_Welcome(
                sessionId: String(session.id), clientId: hello.clientId, lastSeq: lastSeq, limits: limits,
                snapshot: state.workspace)
        }
        enqueue(nil, effect: .welcome(workspaceId: hub.id, session: session.id, welcome: welcome))
    }

    /// The Welcome is out: the session receives broadcasts and its early messages are handled.
    private func welcomed(_ session: Session, _ welcome: Tabsync_V1_Welcome, hub: WorkspaceHub) {
        hub.welcoming.remove(session.id)
        guard case .loading(let hello) = session.phase, session.closing == nil else { return }
        session.phase = .joined(hello)
        send(Tabsync_V1_ServerMessage(welcome: welcome), to: session)
        hub.sessions[session.id] = session
        markPresenceDirty(hub)
        let deferred = session.deferred
        session.deferred = []
        for message in deferred { handle(message, from: session) }
    }

    private func submit(_ submit: Tabsync_V1_Submit, from session: Session, hello: Session.Hello) {
        guard case .loaded(let hub) = workspaces[hello.workspaceId] else { return }
        let now = clock.now
        if hub.reloading {
            reject(session, seq: submit.seq, code: .unavailable, message: "the store failed; the workspace is reloading")
            return
        }
        if case .draining = shutdown {
            reject(session, seq: submit.seq, code: .unavailable, message: "the server is shutting down")
            return
        }
        // RATE_LIMITED and an op that does not decode consume the seq like any refusal (DESIGN.md).
        let outcome: Sequencer.Outcome
        if !session.takeToken(rate: limits.maxOpsPerSecond, now: now) {
            outcome = hub.live.refuse(
                clientId: hello.clientId, seq: submit.seq,
                error: .rateLimited("over \(limits.maxOpsPerSecond) ops per second"))
            strike(session, now: now)
        } else {
            do throws(ConversionError) {
                guard submit.hasOp else { throw .opKindMissing }
                let op = try Operation(submit.op)
                outcome = hub.live.submit(
                    clientId: hello.clientId, seq: submit.seq, baseVersion: submit.baseVersion, op: op)
            } catch {
                outcome = hub.live.refuse(clientId: hello.clientId, seq: submit.seq, error: error.opError)
            }
        }
        // The record carries what a restart needs beyond the ops (the rekeys' old keys).
        let record = CommitRecord(
            workspaceId: hub.id, clientId: hello.clientId, seq: submit.seq, outcome: outcome, after: hub.live)
        switch outcome {
        case .applied(let ops):
            enqueue(record, effect: .broadcast(workspaceId: hub.id, submitter: session.id, ops: ops, receivedAt: now))
        case .rejected(let error) where submit.seq == 0:
            reject(session, seq: submit.seq, code: error.code, message: error.message)
        case .rejected(let error):
            enqueue(record, effect: .reject(workspaceId: hub.id, session: session.id, seq: submit.seq, error: error))
        case .answeredAgain(let answer):
            enqueue(nil, effect: .answer(workspaceId: hub.id, session: session.id, answer: answer))
        case .ignored:
            break
        }
    }

    /// Counts consecutive seconds with rate-limited ops; `rateLimitStrikes` of them close 1008.
    private func strike(_ session: Session, now: ContinuousClock.Instant) {
        let second = (now - session.openedAt).components.seconds
        if second == session.lastStrikeSecond { return }
        session.rateStrikes = second == session.lastStrikeSecond + 1 ? session.rateStrikes + 1 : 1
        session.lastStrikeSecond = second
        if session.rateStrikes >= configuration.rateLimitStrikes {
            logger.warning("rate limit abuse closed", metadata: ["session": "\(session.id)"])
            close(session, code: 1008, reason: "sustained op rate over the limit")
        }
    }

    /// Sends `Rejected` at once (nothing was consumed, so nothing waits for the store).
    private func reject(_ session: Session, seq: UInt64, code: ErrorCode, message: String) {
        metrics.opsRejected[code, default: 0] += 1
        send(Tabsync_V1_ServerMessage(rejected: Tabsync_V1_Rejected(seq: seq, code: code, message: message)), to: session)
    }

    // MARK: commits

    private func enqueue(_ record: CommitRecord?, effect: CommitPipeline.Effect) {
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
            guard case .loaded(let hub) = workspaces[id] else { continue }
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
                if case .loaded(let hub) = workspaces[id] { hub.durable = workspace }
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
            guard case .loaded(let hub) = workspaces[workspaceId] else { return }
            for applied in ops { broadcast(Tabsync_V1_ServerMessage(applied: applied), to: hub) }
            metrics.opLatencySeconds.observe(Double((clock.now - receivedAt).microseconds) / 1_000_000)
        case .reject(_, let sessionId, let seq, let error):
            metrics.opsRejected[error.code, default: 0] += 1
            guard let session = sessions[sessionId] else { return }
            send(Tabsync_V1_ServerMessage(rejected: Tabsync_V1_Rejected(seq: seq, error: error)), to: session)
        case .welcome(let workspaceId, let sessionId, let welcome):
            guard case .loaded(let hub) = workspaces[workspaceId] else { return }
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
            if case .loaded(let hub) = workspaces[workspaceId] { hub.welcoming.remove(sessionId) }
            guard let session = sessions[sessionId] else { return }
            send(Tabsync_V1_ServerMessage(error: Tabsync_V1_Error(code: .unavailable, message: "not stored: \(error)")), to: session)
            close(session, code: 1013, reason: "store unavailable")
            return
        }
        guard let session = sessions[target.session] else { return }
        reject(session, seq: target.seq, code: .unavailable, message: "not stored: \(error)")
    }

    /// Sends one message to every joined session of a workspace, encoded once per subprotocol:
    /// every session of a format gets the same shared frame.
    func broadcast(_ message: Tabsync_V1_ServerMessage, to hub: WorkspaceHub) {
        var proto: OutFrame?
        var json: OutFrame?
        func frame(_ format: WireFormat, _ cached: inout OutFrame?) -> OutFrame {
            if let cached { return cached }
            let made = OutFrame(bytes: format.encode(message), isBinary: !format.usesTextFrames)
            cached = made
            return made
        }
        for session in hub.sessions.values {
            switch session.format {
            case .proto: send(frame(.proto, &proto), to: session)
            case .json: send(frame(.json, &json), to: session)
            }
        }
    }

    // MARK: loading

    /// Loads a workspace on the store thread (no-op when loaded or loading).
    func requestLoad(_ id: String) {
        guard workspaces[id] == nil else { return }
        workspaces[id] = .loading
        let store = self.store
        onStoreThread {
            do throws(StoreError) {
                return .loaded(workspaceId: id, .success(try store.load(workspaceId: id)))
            } catch {
                return .loaded(workspaceId: id, .failure(error))
            }
        }
    }

    /// After a failed commit: keeps the hub (its sessions stay) and reads its state back from the store.
    private func reload(_ id: String) {
        guard case .loaded(let hub) = workspaces[id], !hub.reloading else { return }
        hub.reloading = true
        let store = self.store
        onStoreThread {
            do throws(StoreError) {
                return .loaded(workspaceId: id, .success(try store.load(workspaceId: id)))
            } catch {
                return .loaded(workspaceId: id, .failure(error))
            }
        }
    }

    private func sequencer(_ id: String, from stored: StoredWorkspace?) -> Sequencer {
        stored.map { $0.sequencer(limits: limits) }
            ?? Sequencer(workspace: Workspace(id: id, epoch: store.epoch), limits: limits)
    }

    func workspaceLoaded(_ id: String, result: Result<StoredWorkspace?, StoreError>) {
        let waiting = (loadWaiters.removeValue(forKey: id) ?? []).compactMap { sessionId -> Session? in
            guard let session = sessions[sessionId], session.closing == nil,
                  case .loading(let hello) = session.phase, hello.workspaceId == id else { return nil }
            return session
        }
        switch (workspaces[id], result) {
        case (.loaded(let hub), .success(let stored)) where hub.reloading:
            hub.live = sequencer(id, from: stored)
            hub.durable = hub.live.workspace
            hub.reloading = false
            logger.info("workspace reloaded after a failed commit", metadata: ["workspace": "\(id)", "version": "\(hub.durable.version)"])
            for session in waiting { join(session, to: hub) }
            unloadIfIdle(id)
        case (.loaded(let hub), .failure) where hub.reloading:
            // The store cannot even read: try again (sessions keep waiting).
            loadWaiters[id, default: []] += waiting.map(\.id)
            hub.reloading = false
            reload(id)
        case (.loading, .success(let stored)):
            let hub = WorkspaceHub(id: id, sequencer: sequencer(id, from: stored))
            workspaces[id] = .loaded(hub)
            for session in waiting { join(session, to: hub) }
            answerPendingHTTP(for: id, failed: false)
            unloadIfIdle(id)
        case (.loading, .failure(let error)):
            workspaces[id] = nil
            logger.error("store load failed", metadata: ["workspace": "\(id)", "error": "\(error)"])
            for session in waiting {
                send(Tabsync_V1_ServerMessage(error: Tabsync_V1_Error(code: .unavailable, message: "\(error)")), to: session)
                close(session, code: 1013, reason: "store unavailable")
            }
            answerPendingHTTP(for: id, failed: true)
        default:
            break
        }
    }

    /// True when a loaded workspace has no session (joined or being welcomed), is not reloading and
    /// has nothing pending or in flight in the commit pipeline: dropping it loses nothing.
    private func isIdle(_ id: String) -> Bool {
        guard case .loaded(let hub) = workspaces[id] else { return false }
        return hub.sessions.isEmpty && hub.welcoming.isEmpty && !hub.reloading && !commits.isBusy(id)
    }

    /// Called whenever a workspace may have become idle: drops it from memory at once when nothing
    /// of it is stored or `idleUnload` is zero, else starts its idle clock (``unloadIdleWorkspaces(now:)``
    /// drops it once `idleUnload` has passed and it is still idle).
    func unloadIfIdle(_ id: String) {
        guard isIdle(id), case .loaded(let hub) = workspaces[id] else { return }
        let neverStored = hub.durable.version == 0 && hub.live.lastSeqs.isEmpty
        if neverStored || configuration.idleUnload <= .zero {
            workspaces[id] = nil
            idleSince[id] = nil
        } else if idleSince[id] == nil {
            idleSince[id] = clock.now
        }
    }

    /// Drops the workspaces idle for `idleUnload` or more (their last commit is stored: an idle
    /// workspace has nothing in the pipeline). At most one scan of the idle set per second.
    func unloadIdleWorkspaces(now: ContinuousClock.Instant) {
        guard !idleSince.isEmpty, now - lastIdleScan >= .seconds(1) || configuration.idleUnload < .seconds(2) else { return }
        lastIdleScan = now
        for (id, since) in idleSince where now - since >= configuration.idleUnload {
            idleSince[id] = nil
            guard isIdle(id) else { continue }
            workspaces[id] = nil
            logger.debug("idle workspace unloaded", metadata: ["workspace": "\(id)"])
        }
    }

    /// A session went away: leave its workspace (presence changes).
    func sessionLeft(_ session: Session) {
        guard let id = session.workspaceId, case .loaded(let hub) = workspaces[id] else { return }
        hub.sessions.removeValue(forKey: session.id)
        hub.welcoming.remove(session.id)
        markPresenceDirty(hub)
        unloadIfIdle(hub.id)
    }

    // MARK: presence

    /// Notes that a workspace's peer list changed; the next tick past the interval broadcasts it.
    func markPresenceDirty(_ hub: WorkspaceHub) {
        hub.presenceDirty = true
        presenceDirty.insert(hub.id)
    }

    /// Broadcasts the peer list of each workspace whose presence changed, at most once per interval.
    func flushPresence(now: ContinuousClock.Instant) {
        guard !presenceDirty.isEmpty else { return }
        for id in presenceDirty {
            guard case .loaded(let hub) = workspaces[id], hub.presenceDirty else {
                presenceDirty.remove(id)
                continue
            }
            if let last = hub.lastPresenceAt, now - last < configuration.presenceInterval { continue }
            presenceDirty.remove(id)
            hub.presenceDirty = false
            hub.lastPresenceAt = now
            var peers: [Tabsync_V1_Peer] = []
            for id in hub.sessions.keys.sorted() {
                guard let session = hub.sessions[id], let hello = session.hello else { continue }
                peers.append(Tabsync_V1_Peer(
                    sessionId: String(id), clientId: hello.clientId, name: hello.clientName,
                    focusTabId: hello.focusTabId))
            }
            broadcast(Tabsync_V1_ServerMessage(peers: peers), to: hub)
        }
    }
}
