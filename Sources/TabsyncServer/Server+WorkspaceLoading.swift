import Logging
import TabsyncCore
import TabsyncProto
import TabsyncStore

extension Server.Loop {
    /// A workspace's place in the loop's table (``Server/Loop/workspaces``); no entry means it is
    /// not in memory and no store read of it is under way.
    ///
    ///     (none) ─Hello or HTTP─▶ loading ─read─▶ loaded ─commit failed─▶ reloading ─read─▶ loaded
    ///
    /// A failed first read drops the entry (its waiters get `UNAVAILABLE` and close 1013, HTTP 503);
    /// a failed read back is tried again after ``reloadRetryPause`` (a store that is down is not
    /// asked in a loop); an idle loaded workspace is dropped (idle unload below). A shared store's
    /// hub also keeps its `stored` sequencer: set at the read, taken back at a read back.
    ///
    /// A store read of the workspace is under way exactly while it is `loading` or `reloading`, and
    /// at most one. Sessions whose Hello comes meanwhile wait in the entry itself (`waiters`: session
    /// ids, in arrival order), so they are joined, or refused, when that read finishes. A
    /// `reloading` hub keeps its sessions, presence and HTTP snapshot (from `durable`); it refuses
    /// submits `UNAVAILABLE` and is never unloaded.
    enum WorkspaceEntry {
        /// The first read from the store is under way.
        case loading(waiters: [Int])
        /// In memory, taking ops.
        case loaded(WorkspaceHub)
        /// A commit of it failed: its live state was ahead of the store and is being read back.
        case reloading(WorkspaceHub, waiters: [Int])

        /// The hub, loaded or reloading.
        var hub: WorkspaceHub? {
            switch self {
            case .loading: nil
            case .loaded(let hub), .reloading(let hub, _): hub
            }
        }

        /// Adds a session to the waiters of the read under way (in place, without copying them).
        /// A loaded entry has no read to wait for: unchanged.
        mutating func addWaiter(_ session: Int) {
            switch self {
            case .loading(var waiters):
                self = .loading(waiters: [])  // drops the entry's reference: `waiters` is unique
                waiters.append(session)
                self = .loading(waiters: waiters)
            case .reloading(let hub, var waiters):
                self = .reloading(hub, waiters: [])
                waiters.append(session)
                self = .reloading(hub, waiters: waiters)
            case .loaded:
                assertionFailure("a loaded workspace has no read to wait for")
            }
        }
    }

    /// Makes a session whose Hello named a workspace that is not loaded wait for it: for the read
    /// under way, or for a first read started now.
    func waitForLoad(_ session: Session, workspaceId id: String) {
        if workspaces[id] == nil {
            workspaces[id] = .loading(waiters: [session.id])
            readFromStore(id)
        } else {
            workspaces[id]?.addWaiter(session.id)
        }
    }

    /// Starts the first read of a workspace (a no-op when it is in memory or being read).
    func requestLoad(_ id: String) {
        guard workspaces[id] == nil else { return }
        workspaces[id] = .loading(waiters: [])
        readFromStore(id)
    }

    /// After a failed commit: keeps the hub (its sessions stay) and reads its state back from the store.
    func reload(_ id: String) {
        guard case .loaded(let hub)? = workspaces[id] else { return }
        workspaces[id] = .reloading(hub, waiters: [])
        readFromStore(id)
    }

    /// The one store read: its result comes back to ``workspaceLoaded(_:result:)`` on the loop.
    private func readFromStore(_ id: String) {
        let store = self.store
        onStoreThread {
            do throws(StoreError) {
                return .loaded(workspaceId: id, .success(try store.load(workspaceId: id)))
            } catch {
                return .loaded(workspaceId: id, .failure(error))
            }
        }
    }

    /// A store read finished: moves the entry on (see ``WorkspaceEntry``) and joins or refuses the
    /// sessions that waited for it.
    func workspaceLoaded(_ id: String, result: Result<StoredWorkspace?, StoreError>) {
        switch (workspaces[id], result) {
        case (.loading(let waiters)?, .success(let stored)):
            let hub = WorkspaceHub(
                id: id, sequencer: sequencer(id, from: stored), maxPresencePeers: configuration.maxPresencePeers,
                shared: configuration.sharedStore != nil)
            workspaces[id] = .loaded(hub)
            for session in stillWaiting(waiters, for: id) { join(session, to: hub) }
            answerPendingHTTP(for: id, failed: false)
            unloadIfIdle(id)
        case (.loading(let waiters)?, .failure(let error)):
            workspaces[id] = nil
            logger.error("store load failed", metadata: ["workspace": "\(id)", "error": "\(error)"])
            for session in stillWaiting(waiters, for: id) {
                send(Tabsync_V1_ServerMessage(error: Tabsync_V1_Error(code: .unavailable, message: "\(error)")), to: session)
                close(session, code: 1013, reason: "store unavailable")
            }
            answerPendingHTTP(for: id, failed: true)
        case (.reloading(let hub, let waiters)?, .success(let stored)):
            let before = hub.durable
            hub.restore(sequencer(id, from: stored))
            workspaces[id] = .loaded(hub)
            logger.info("workspace reloaded after a failed commit", metadata: ["workspace": "\(id)", "version": "\(hub.durable.version)"])
            catchUpReadBack(hub, sessionsSaw: before, log: stored?.log ?? [])
            for session in stillWaiting(waiters, for: id) { join(session, to: hub) }
            unloadIfIdle(id)
        case (.reloading(let hub, let waiters)?, .failure(let error)):
            // The store cannot even read: read again after a pause (the waiters keep waiting), so a
            // store that refuses at once (PostgreSQL down) is not asked in a loop.
            workspaces[id] = .reloading(hub, waiters: stillWaiting(waiters, for: id).map(\.id))
            if reloadRetries[id] == nil {
                logger.warning("store read failed; trying again", metadata: ["workspace": "\(id)", "error": "\(error)"])
            }
            reloadRetries[id] = clock.now + Self.reloadRetryPause
        case (.loaded?, _), (nil, _):
            break  // no read of it was under way
        }
    }

    /// After a read back: the hub's sessions saw `before` (its durable state), and the store may hold
    /// more, stored while this node could not commit (another node's ops, or a batch of this node
    /// whose `COMMIT` lost its answer but took effect). Those ops go out from the log just read, in
    /// order, so versions stay contiguous at every session. When the log no longer holds them, or
    /// the store holds another history (an epoch change, a version behind), the sessions are closed
    /// 1013: they resume by `lastVersion` + `epoch`, or get a snapshot.
    private func catchUpReadBack(_ hub: WorkspaceHub, sessionsSaw before: Workspace, log: [AppliedOp]) {
        let now = hub.durable
        guard now.epoch != before.epoch || now.version != before.version else { return }
        let missed = log.drop { $0.version <= before.version }
        guard now.epoch == before.epoch, now.version > before.version,
              missed.first?.version == before.version + 1, missed.last?.version == now.version
        else {
            logger.warning("workspace read back at another history; its sessions resume", metadata: [
                "workspace": "\(hub.id)", "from": "\(before.version)", "to": "\(now.version)",
            ])
            for session in hub.sessions.values { close(session, code: 1013, reason: "the store changed: resume") }
            return
        }
        metrics.opsReadBack += UInt64(missed.count)
        for op in missed { broadcast(Tabsync_V1_ServerMessage(applied: op), to: hub) }
    }

    /// Pause between two reads back of a workspace whose read failed.
    static var reloadRetryPause: Duration { .milliseconds(250) }

    /// Reads back, once their pause is over, the workspaces whose read back failed (every tick).
    func retryReloads(now: ContinuousClock.Instant) {
        guard !reloadRetries.isEmpty else { return }
        for (id, at) in reloadRetries where at <= now {
            reloadRetries[id] = nil
            if case .reloading? = workspaces[id] { readFromStore(id) }
        }
    }

    /// The waiters still open and still waiting for this workspace, in order.
    private func stillWaiting(_ waiters: [Int], for workspaceId: String) -> [Session] {
        waiters.compactMap { sessionId -> Session? in
            guard let session = sessions[sessionId], session.closing == nil,
                  case .loading(let hello) = session.phase, hello.workspaceId == workspaceId else { return nil }
            return session
        }
    }

    private func sequencer(_ id: String, from stored: StoredWorkspace?) -> Sequencer {
        stored.map { $0.sequencer(limits: limits) }
            ?? Sequencer(workspace: Workspace(id: id, epoch: store.epoch), limits: limits)
    }

    // MARK: idle unload

    /// True when a workspace is loaded (not reloading), has no session (joined or being welcomed)
    /// and has nothing pending or in flight in the commit pipeline: dropping it loses nothing.
    private func isIdle(_ id: String) -> Bool {
        guard case .loaded(let hub)? = workspaces[id] else { return false }
        return hub.sessions.isEmpty && hub.welcoming.isEmpty && !commits.isBusy(id)
    }

    /// Called whenever a workspace may have become idle: drops it from memory at once when nothing
    /// of it is stored or `idleUnload` is zero, else starts its idle clock (``unloadIdleWorkspaces(now:)``
    /// drops it once `idleUnload` has passed and it is still idle).
    func unloadIfIdle(_ id: String) {
        guard isIdle(id), let hub = workspaces[id]?.hub else { return }
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
}
