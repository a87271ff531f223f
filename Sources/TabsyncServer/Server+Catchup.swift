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
        /// The refusals since `from` and the last seqs the ops and refusals do not imply
        /// (``StoredChanges``); nil: the workspace was never stored (and `ops` is empty).
        var dedup: DedupState?
    }

    /// Reads what a writer at `versions` missed of each of those workspaces, in one store call
    /// (``WorkspaceStore/changes(after:)``). Store thread only.
    static func read(_ store: any WorkspaceStore, after versions: [String: UInt64]) -> [String: CatchUpRead] {
        var reads: [String: CatchUpRead] = [:]
        do throws(StoreError) {
            let changes = try store.changes(after: versions)
            for (id, version) in versions {
                switch changes[id] {
                case .changes(let ops, let dedup)?: reads[id] = .caughtUp(CatchUp(from: version, ops: ops, dedup: dedup))
                case .compacted?: reads[id] = .compacted
                case nil: reads[id] = .failed(.readFailed("the store did not answer for \(id)"))
                }
            }
        } catch {
            for id in versions.keys { reads[id] = .failed(error) }
        }
        return reads
    }
}

extension Server.Loop {
    /// A shared store: what the loop knows of other nodes' commits it has not read yet.
    ///
    /// A commit of another node is heard of (its notification, or the poll of stored versions); a
    /// notification that carries the batch's changes is taken as it comes when it follows the
    /// workspace's version here (``took(_:version:_:)``); otherwise a loaded workspace whose heard
    /// version is above its stored version is read and its ops applied and broadcast in order. One read is in flight at a time and covers every workspace due when
    /// it starts (one store call, ``WorkspaceStore/changes(after:)``); those heard meanwhile wait for
    /// the next, so a busy node reads many workspaces per round trip, as group commit writes. A workspace with records in the commit pipeline, or a `Welcome`
    /// waiting there, is not read now: its next batch runs into `behind` and catches up there
    /// (CommitPipeline.swift); once the pipeline lets it go, it is read if still behind.
    struct CatchUpState {
        /// Per loaded workspace, the highest stored version heard of and not yet read.
        var heard: [String: UInt64] = [:]
        /// The workspaces of the catch-up read on the store thread (empty: none in flight).
        var reading: Set<String> = []
        var readInFlight = false
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
        case .committed(let notification):
            metrics.storeNotifications += 1
            if let changes = notification.changes,
               took(notification.workspaceId, version: notification.version, changes) { return }
            heard(notification.workspaceId, version: notification.version)
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

    /// A notification carrying its batch's changes: taken at once, as a catch-up read's answer
    /// would be, when the workspace is loaded here at exactly their base version and nothing holds
    /// it back (a batch of its own in the pipeline: the notification may be of that very batch, or
    /// its `behind` catches up; a `Welcome` waiting). True when there was nothing else to do (taken,
    /// not loaded here, or already at that version); false: the caller reads instead.
    func took(_ id: String, version: UInt64, _ changes: CommitNotification.Changes) -> Bool {
        guard case .loaded(let hub)? = workspaces[id], let stored = hub.stored else { return true }
        guard version > stored.workspace.version else { return true }
        guard changes.base == stored.workspace.version, !commits.isBusy(id), hub.welcoming.isEmpty else { return false }
        let missed = CatchUpRead.CatchUp(
            from: changes.base, ops: changes.ops,
            dedup: DedupState(version: version, lastSeqs: changes.lastSeqs, rejections: changes.refusals, rekeys: []))
        do throws(OpError) {
            try takeStored(missed, into: hub, live: true)
            metrics.notificationsTaken += 1
        } catch {
            fellBehind(hub, why: "\(error)")
        }
        return true
    }

    /// Another node (or this one) stored `id` at `version`: read what is missing when it is
    /// loaded here and behind.
    func heard(_ id: String, version: UInt64) {
        guard case .loaded(let hub)? = workspaces[id], let stored = hub.stored, version > stored.workspace.version else { return }
        catchUps.heard[id] = max(catchUps.heard[id] ?? 0, version)
        startCatchUpRead()
    }

    /// Starts one read of every workspace behind a heard version that nothing holds back, unless a
    /// read is in flight (its answer starts the next).
    func startCatchUpRead() {
        guard !catchUps.readInFlight, !catchUps.heard.isEmpty else { return }
        var versions: [String: UInt64] = [:]
        for (id, version) in catchUps.heard {
            guard case .loaded(let hub)? = workspaces[id], let stored = hub.stored, version > stored.workspace.version else {
                catchUps.heard[id] = nil
                continue
            }
            guard !commits.isBusy(id), hub.welcoming.isEmpty else { continue }
            catchUps.heard[id] = nil
            versions[id] = stored.workspace.version
        }
        guard !versions.isEmpty else { return }
        catchUps.readInFlight = true
        catchUps.reading = Set(versions.keys)
        metrics.catchUpReads += 1
        let store = self.store
        let asked = versions
        onStoreThread {
            let started = ContinuousClock.now
            let reads = CatchUpRead.read(store, after: asked)
            return .caughtUp(reads, duration: ContinuousClock.now - started)
        }
    }

    /// A catch-up read is back: applies and broadcasts each workspace's missed ops unless it moved
    /// on meanwhile (then its pipeline's `behind` catches it up), then reads again what was heard
    /// meanwhile.
    func caughtUp(_ reads: [String: CatchUpRead], duration: Duration) {
        catchUps.readInFlight = false
        catchUps.reading = []
        metrics.storeSeconds.observe(duration.seconds)
        for (id, read) in reads.sorted(by: { $0.key < $1.key }) { caughtUp(id, read) }
        startCatchUpRead()
    }

    private func caughtUp(_ id: String, _ read: CatchUpRead) {
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
