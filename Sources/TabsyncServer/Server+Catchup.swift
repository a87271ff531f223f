import Logging
import TabsyncCore
import TabsyncProto
import TabsyncStore

/// What a node missed of one workspace in a shared store, as read on the store thread.
enum CatchUpRead: Sendable {
    /// The ops stored after `from`, in order, and the dedup state as stored at their end.
    case caughtUp(CatchUp)
    /// The log no longer holds the op right after `from` (compacted behind a snapshot), or the
    /// store went back before it: the workspace must be read whole.
    case compacted
    /// The store could not be read.
    case failed(StoreError)

    struct CatchUp: Sendable {
        var from: UInt64
        var ops: [AppliedOp]
        /// nil: the workspace was never stored (and `ops` is empty).
        var dedup: DedupState?
    }

    /// Reads what a writer at `version` missed: the dedup state first (one consistent read, at
    /// stored version D), then the ops from `version` to D (a stored op never changes, so the two
    /// agree). Store thread only.
    static func read(_ store: any WorkspaceStore, workspaceId: String, after version: UInt64) -> CatchUpRead {
        do throws(StoreError) {
            guard let dedup = try store.dedupState(workspaceId: workspaceId) else {
                return version == 0 ? .caughtUp(CatchUp(from: 0, ops: [], dedup: nil)) : .compacted
            }
            if dedup.version < version { return .compacted }
            if dedup.version == version { return .caughtUp(CatchUp(from: version, ops: [], dedup: dedup)) }
            let missing = dedup.version - version
            guard let ops = try store.ops(workspaceId: workspaceId, after: version, limit: Int(clamping: missing)) else {
                return .compacted
            }
            guard UInt64(ops.count) == missing, ops.last?.version == dedup.version else {
                return .failed(.readFailed("the log of \(workspaceId) holds \(ops.count) ops after \(version), not \(missing)"))
            }
            return .caughtUp(CatchUp(from: version, ops: ops, dedup: dedup))
        } catch {
            return .failed(error)
        }
    }
}

extension Server.Loop {
    /// A shared store: what the loop knows of other nodes' commits it has not read yet.
    ///
    /// A commit of another node is heard of (its notification, or the poll of stored versions); a
    /// loaded workspace whose heard version is above its stored version is read (one read in
    /// flight per workspace; heard again meanwhile, it is read again after) and its ops applied and
    /// broadcast in order. A workspace with records in the commit pipeline, or a `Welcome`
    /// waiting there, is not read now: its next batch runs into `behind` and catches up there
    /// (CommitPipeline.swift); once the pipeline lets it go, it is read if still behind.
    struct CatchUpState {
        /// Per loaded workspace, the highest stored version heard of and not yet read.
        var heard: [String: UInt64] = [:]
        /// Workspaces with a catch-up read on the store thread.
        var reading: Set<String> = []
        /// A poll of stored versions is on the store thread; `pollAgain`: another was asked meanwhile.
        var pollInFlight = false
        var pollAgain = false
        /// When the next poll is due (nil: not scheduled yet).
        var nextPollAt: ContinuousClock.Instant?
    }

    // MARK: hearing of commits

    /// An event of the store's listener (another node's commit, or the listener's connection).
    func storeEvent(_ event: PostgresListener.Event) {
        switch event {
        case .committed(let id, let version):
            metrics.storeNotifications += 1
            heard(id, version: version)
        case .listening(let reconnected):
            metrics.storeListening = true
            // Commits made before it listened (or while it was away) announced nothing to it:
            // every loaded workspace catches up.
            if reconnected {
                metrics.listenerReconnects += 1
                logger.info("store listener reconnected; catching up every loaded workspace")
            }
            pollStore()
        case .disconnected(let why):
            metrics.storeListening = false
            logger.warning("store listener disconnected", metadata: ["error": "\(why)"])
        }
    }

    /// Another node (or this one) stored `id` at `version`: read what is missing when it is
    /// loaded here and behind.
    func heard(_ id: String, version: UInt64) {
        guard case .loaded(let hub)? = workspaces[id], let stored = hub.stored, version > stored.workspace.version else { return }
        catchUps.heard[id] = max(catchUps.heard[id] ?? 0, version)
        catchUpIfNeeded(id)
    }

    /// Starts the catch-up read of `id` when it is behind a heard version and nothing holds it back.
    func catchUpIfNeeded(_ id: String) {
        guard let version = catchUps.heard[id] else { return }
        guard case .loaded(let hub)? = workspaces[id], let stored = hub.stored, version > stored.workspace.version else {
            catchUps.heard[id] = nil
            return
        }
        guard !catchUps.reading.contains(id), !commits.isBusy(id), hub.welcoming.isEmpty else { return }
        catchUps.heard[id] = nil
        catchUps.reading.insert(id)
        metrics.catchUpReads += 1
        let from = stored.workspace.version
        let store = self.store
        onStoreThread {
            let started = ContinuousClock.now
            let read = CatchUpRead.read(store, workspaceId: id, after: from)
            return .caughtUp(workspaceId: id, read, duration: ContinuousClock.now - started)
        }
    }

    /// After a commit: the catch-ups the pipeline held back.
    func resumeCatchUps() {
        guard !catchUps.heard.isEmpty else { return }
        for id in Array(catchUps.heard.keys) { catchUpIfNeeded(id) }
    }

    /// A catch-up read is back: applies and broadcasts the missed ops unless the workspace moved
    /// on meanwhile (then its pipeline's `behind` catches it up), then reads again if more was heard.
    func caughtUp(_ id: String, _ read: CatchUpRead, duration: Duration) {
        catchUps.reading.remove(id)
        metrics.storeSeconds.observe(duration.seconds)
        defer { catchUpIfNeeded(id) }
        guard case .loaded(let hub)? = workspaces[id], let stored = hub.stored else { return }
        switch read {
        case .caughtUp(let missed):
            guard missed.from == stored.workspace.version else { return }  // another read got there first
            guard !commits.isBusy(id), hub.welcoming.isEmpty else {
                catchUps.heard[id] = max(catchUps.heard[id] ?? 0, missed.dedup?.version ?? 0)
                return
            }
            do throws(OpError) {
                try takeStored(missed, into: hub, live: true)
            } catch {
                fellBehind(hub, why: "\(error)")
            }
        case .compacted:
            guard !commits.isBusy(id) else { return }
            fellBehind(hub, why: "the log no longer holds the ops after version \(stored.workspace.version)")
        case .failed(let error):
            // The poll finds it again once the store answers.
            logger.warning("catch-up read failed", metadata: ["workspace": "\(id)", "error": "\(error)"])
        }
    }

    /// Takes ops other nodes stored (and the dedup state at their end) into the hub's `stored`
    /// sequencer, and its live one when `live` (the caller's live state equals the stored one, or
    /// is about to be started again from it), then broadcasts them as `Applied` to its sessions:
    /// they are durable. Throws when an op does not follow (the hub must be read back whole).
    func takeStored(_ missed: CatchUpRead.CatchUp, into hub: WorkspaceHub, live: Bool) throws(OpError) {
        for op in missed.ops {
            try hub.stored!.adopt(op)
            if live { try hub.live.adopt(op) }
        }
        if let dedup = missed.dedup {
            for rejection in dedup.rejections {
                hub.stored!.adopt(rejection)
                if live { hub.live.adopt(rejection) }
            }
            for (client, seq) in dedup.lastSeqs {
                hub.stored!.adopt(lastSeq: seq, of: client)
                if live { hub.live.adopt(lastSeq: seq, of: client) }
            }
        }
        hub.durable = hub.stored!.workspace
        metrics.opsCaughtUp += UInt64(missed.ops.count)
        for op in missed.ops { broadcast(Tabsync_V1_ServerMessage(applied: op), to: hub) }
    }

    /// The hub cannot be brought up to date op by op: its sessions are closed 1013 (they resume
    /// by `lastVersion`, or get a snapshot) and it is read back whole.
    func fellBehind(_ hub: WorkspaceHub, why: String) {
        logger.warning("workspace fell behind the store; reading it back whole", metadata: [
            "workspace": "\(hub.id)", "why": "\(why)",
        ])
        for session in hub.sessions.values { close(session, code: 1013, reason: "behind the store: resume") }
        catchUps.heard[hub.id] = nil
        reload(hub.id)
    }

    // MARK: polling

    /// Every tick: polls the stored versions when the interval has passed.
    func pollStoreIfDue(now: ContinuousClock.Instant) {
        guard let shared = configuration.sharedStore, shared.pollInterval > .zero else { return }
        guard let due = catchUps.nextPollAt else {
            catchUps.nextPollAt = now + shared.pollInterval
            return
        }
        if now >= due { pollStore() }
    }

    /// Reads the stored version of every loaded workspace (one store call); those behind catch up.
    func pollStore() {
        guard let shared = configuration.sharedStore else { return }
        catchUps.nextPollAt = clock.now + shared.pollInterval
        guard !catchUps.pollInFlight else {
            catchUps.pollAgain = true
            return
        }
        var ids: [String] = []
        for (id, entry) in workspaces {
            if case .loaded(let hub) = entry, hub.stored != nil { ids.append(id) }
        }
        guard !ids.isEmpty else { return }
        catchUps.pollInFlight = true
        let store = self.store
        let loaded = ids
        onStoreThread {
            let started = ContinuousClock.now
            do throws(StoreError) {
                let versions = try store.storedVersions(workspaceIds: loaded)
                return .polled(.success(versions), duration: ContinuousClock.now - started)
            } catch {
                return .polled(.failure(error), duration: ContinuousClock.now - started)
            }
        }
    }

    /// The stored versions are back: each loaded workspace behind them catches up.
    func polled(_ result: Result<[String: UInt64], StoreError>, duration: Duration) {
        catchUps.pollInFlight = false
        metrics.storeSeconds.observe(duration.seconds)
        switch result {
        case .success(let versions):
            for (id, version) in versions { heard(id, version: version) }
        case .failure(let error):
            logger.debug("store poll failed", metadata: ["error": "\(error)"])
        }
        if catchUps.pollAgain {
            catchUps.pollAgain = false
            pollStore()
        }
    }
}
