import TabsyncCore
import TabsyncProto
import TabsyncStore

/// Loading, reading back and unloading workspaces: the moves of the ``WorkspaceTable`` that need
/// sessions, the store or the commit pipeline.
extension ServerCore {
    /// Makes a session whose Hello named a workspace that is not loaded wait for it: for the read
    /// under way, or for a first read started now.
    mutating func waitForLoad(_ id: ConnectionID, workspaceId: String) {
        if workspaces.load(workspaceId, waiter: id) { startRead(workspaceId) }
    }

    /// Starts the first read of a workspace (nothing when it is in memory or being read).
    mutating func requestLoad(_ workspaceId: String) {
        if workspaces.load(workspaceId, waiter: nil) { startRead(workspaceId) }
    }

    /// After a failed commit: keeps the hub (its members stay) and reads its state back.
    mutating func reload(_ workspaceId: String) {
        if workspaces.reload(workspaceId) { startRead(workspaceId) }
    }

    /// Reads a workspace from the store; with a holder registry, registers as its holder first, so
    /// no commit the read does not see goes unannounced to this node (``HolderRegistry``).
    private mutating func startRead(_ workspaceId: String) {
        emit(settings.holderRegistry == nil ? .load(workspaceId) : .hold(workspaceId))
    }

    /// The registration before a read is back: the read follows; a failed registration fails the
    /// read it was for.
    mutating func held(_ id: String, _ result: Result<Int, StoreError>) {
        guard let phase = workspaces.phase(id), phase != .loaded else { return }
        switch result {
        case .success(let others):
            if others > 0 {
                metrics.workspaceSplits += 1
                logger.info("workspace held by other nodes too: split", metadata: ["workspace": "\(id)", "nodes": "\(others)"])
            }
            emit(.load(id))
        case .failure(let error):
            workspaceLoaded(id, result: .failure(error))
        }
    }

    /// A store read finished: moves the entry on and joins or refuses the sessions that waited.
    mutating func workspaceLoaded(_ id: String, result: Result<StoredWorkspace?, StoreError>) {
        guard let phase = workspaces.phase(id) else { return }
        switch (phase, result) {
        case (.loading, .success(let stored)):
            let hub = WorkspaceHub(
                id: id, sequencer: sequencer(id, from: stored), maxPresencePeers: settings.maxPresencePeers,
                shared: settings.sharedStore)
            let waiters = workspaces.loaded(id, hub) ?? []
            for session in stillWaiting(waiters, for: id) { join(session, to: id) }
            answerPendingHTTP(for: id, failed: false)
            unloadIfIdle(id)
        case (.loading, .failure(let error)):
            let waiters = workspaces.waiters(id)
            drop(id)
            logger.error("store load failed", metadata: ["workspace": "\(id)", "error": "\(error)"])
            for session in stillWaiting(waiters, for: id) {
                send(Tabsync_V1_ServerMessage(error: Tabsync_V1_Error(code: .unavailable, message: "\(error)")), to: session)
                close(session, .storeUnavailable)
            }
            answerPendingHTTP(for: id, failed: true)
        case (.reloading, .success(let stored)):
            guard let (before, waiters) = workspaces.reloaded(id, restore: sequencer(id, from: stored)) else { return }
            let version = workspaces.hub(id)?.durable.version ?? 0
            logger.info("workspace reloaded after a failed commit", metadata: ["workspace": "\(id)", "version": "\(version)"])
            catchUpReadBack(id, sessionsSaw: before, log: stored?.log ?? [])
            settleFeeds(of: id, readSerial: nil)  // a feed past the node reads the store again
            for session in stillWaiting(waiters, for: id) { join(session, to: id) }
            unloadIfIdle(id)
        case (.reloading, .failure(let error)):
            // The store cannot even read: read again after a pause (the waiters keep waiting), so a
            // store that refuses at once is not asked in a loop. Logged once per outage of a
            // workspace, not at every retry (4 a second).
            let waiters = stillWaiting(workspaces.waiters(id), for: id)
            if workspaces.reloadFailed(id, waiters: waiters, at: now) {
                logger.warning("store read failed; trying again", metadata: ["workspace": "\(id)", "error": "\(error)"])
            }
        case (.loaded, _):
            break  // no read of it was under way
        }
    }

    /// After a read back: the hub's members saw `before` (its durable state), and the store may
    /// hold more (another node's ops, or a batch whose `COMMIT` lost its answer but took effect).
    /// Those go out from the log just read, in order, so versions stay contiguous at every member.
    /// When the log no longer holds them, or the store holds another history, the members are
    /// closed 1013: they resume by `lastVersion` + `epoch`, or get a snapshot.
    private mutating func catchUpReadBack(_ id: String, sessionsSaw before: Workspace, log: [AppliedOp]) {
        guard let hub = workspaces.hub(id) else { return }
        let current = hub.durable
        guard current.epoch != before.epoch || current.version != before.version else { return }
        let missed = log.drop { $0.version <= before.version }
        guard current.epoch == before.epoch, current.version > before.version,
              missed.first?.version == before.version + 1, missed.last?.version == current.version
        else {
            logger.warning("workspace read back at another history; its sessions resume", metadata: [
                "workspace": "\(id)", "from": "\(before.version)", "to": "\(current.version)",
            ])
            for member in hub.members { close(member, .storeChanged) }
            endFeeds(of: id)
            return
        }
        metrics.opsReadBack += UInt64(missed.count)
        for op in missed { broadcast(Tabsync_V1_ServerMessage(applied: op), to: hub.members) }
        feedApplied(missed, of: id)
    }

    /// Reads back, once their pause is over, the workspaces whose read back failed.
    mutating func retryReloads() {
        for id in workspaces.dueReloads(at: now) { startRead(id) }
    }

    /// The waiters still open and still waiting for this workspace, in order.
    private func stillWaiting(_ waiters: [ConnectionID], for workspaceId: String) -> [ConnectionID] {
        waiters.filter { id in
            guard let session = sessions[id], session.closing == nil, case .loading(let hello) = session.phase else {
                return false
            }
            return hello.workspaceId == workspaceId
        }
    }

    private func sequencer(_ id: String, from stored: StoredWorkspace?) -> Sequencer {
        stored.map { $0.sequencer(limits: settings.limits) }
            ?? Sequencer(workspace: Workspace(id: id, epoch: settings.storeEpoch), limits: settings.limits)
    }

    // MARK: idle unload

    /// Forgets a workspace; with a shared store, this node no longer holds it.
    mutating func drop(_ id: String) {
        workspaces.remove(id)
        if settings.sharedStore { emit(.release(id)) }
    }

    /// True when a workspace is loaded, has no session (joined or being welcomed), no change feed
    /// and nothing in the commit pipeline: dropping it loses nothing.
    private func isIdle(_ id: String) -> Bool {
        workspaces.hasNoSession(id) && !commits.isBusy(id) && !hasFeeds(id)
    }

    /// Called whenever a workspace may have become idle: drops it at once when nothing of it is
    /// stored or `idleUnload` is zero, else starts its idle clock.
    mutating func unloadIfIdle(_ id: String) {
        guard isIdle(id), let hub = workspaces.hub(id) else { return }
        let neverStored = hub.durable.version == 0 && hub.live.lastSeqs.isEmpty
        if neverStored || settings.idleUnload <= .zero || workspaces.moves.handingOver.contains(id) {
            drop(id)
        } else {
            workspaces.becameIdle(id, at: now)
        }
    }

    /// Drops the workspaces idle for `idleUnload` or more. At most one scan per second.
    mutating func unloadIdleWorkspaces() {
        for id in workspaces.dueIdle(at: now, idleUnload: settings.idleUnload) {
            guard isIdle(id) else { continue }
            drop(id)
            logger.debug("idle workspace unloaded", metadata: ["workspace": "\(id)"])
        }
    }
}
