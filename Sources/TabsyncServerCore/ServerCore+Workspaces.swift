import TabsyncCore
import TabsyncProto
import TabsyncStore

/// The workspace table: loads, reads back after a failed commit, idle unloads (``WorkspaceEntry``).
extension ServerCore {
    /// Pause between two reads back of a workspace whose read failed.
    static var reloadRetryPause: Duration { .milliseconds(250) }

    /// Makes a session whose Hello named a workspace that is not loaded wait for it: for the read
    /// under way, or for a first read started now.
    mutating func waitForLoad(_ id: ConnectionID, workspaceId: String) {
        if workspaces[workspaceId] == nil {
            workspaces[workspaceId] = WorkspaceEntry(phase: .loading, hub: nil, waiters: [id])
            startRead(workspaceId)
        } else {
            workspaces[workspaceId]!.waiters.append(id)
        }
    }

    /// Starts the first read of a workspace (nothing when it is in memory or being read).
    mutating func requestLoad(_ workspaceId: String) {
        guard workspaces[workspaceId] == nil else { return }
        workspaces[workspaceId] = WorkspaceEntry(phase: .loading, hub: nil)
        startRead(workspaceId)
    }

    /// After a failed commit: keeps the hub (its members stay) and reads its state back.
    mutating func reload(_ workspaceId: String) {
        guard workspaces[workspaceId]?.phase == .loaded else { return }
        workspaces[workspaceId]!.phase = .reloading
        startRead(workspaceId)
    }

    /// Reads a workspace from the store; with a holder registry, registers as its holder first, so
    /// no commit the read does not see goes unannounced to this node (``HolderRegistry``).
    private mutating func startRead(_ workspaceId: String) {
        emit(settings.holderRegistry == nil ? .load(workspaceId) : .hold(workspaceId))
    }

    /// The registration before a read is back: the read follows; a failed registration fails the
    /// read it was for.
    mutating func held(_ id: String, _ result: Result<Int, StoreError>) {
        guard let entry = workspaces[id], entry.phase != .loaded else { return }
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
        guard let entry = workspaces[id] else { return }
        switch (entry.phase, result) {
        case (.loading, .success(let stored)):
            let hub = WorkspaceHub(
                id: id, sequencer: sequencer(id, from: stored), maxPresencePeers: settings.maxPresencePeers,
                shared: settings.sharedStore)
            workspaces[id] = WorkspaceEntry(phase: .loaded, hub: hub)
            for session in stillWaiting(entry.waiters, for: id) { join(session, to: id) }
            answerPendingHTTP(for: id, failed: false)
            unloadIfIdle(id)
        case (.loading, .failure(let error)):
            drop(id)
            logger.error("store load failed", metadata: ["workspace": "\(id)", "error": "\(error)"])
            for session in stillWaiting(entry.waiters, for: id) {
                send(Tabsync_V1_ServerMessage(error: Tabsync_V1_Error(code: .unavailable, message: "\(error)")), to: session)
                close(session, .storeUnavailable)
            }
            answerPendingHTTP(for: id, failed: true)
        case (.reloading, .success(let stored)):
            guard var hub = entry.hub else { return }
            let before = hub.durable
            hub.restore(sequencer(id, from: stored))
            workspaces[id] = WorkspaceEntry(phase: .loaded, hub: hub)
            reloadRetries[id] = nil
            reloadFailing.remove(id)
            logger.info("workspace reloaded after a failed commit", metadata: ["workspace": "\(id)", "version": "\(hub.durable.version)"])
            catchUpReadBack(id, sessionsSaw: before, log: stored?.log ?? [])
            for session in stillWaiting(entry.waiters, for: id) { join(session, to: id) }
            unloadIfIdle(id)
        case (.reloading, .failure(let error)):
            // The store cannot even read: read again after a pause (the waiters keep waiting), so a
            // store that refuses at once is not asked in a loop.
            workspaces[id]!.waiters = stillWaiting(entry.waiters, for: id)
            // Logged once per outage of a workspace, not at every retry (4 a second).
            if reloadFailing.insert(id).inserted {
                logger.warning("store read failed; trying again", metadata: ["workspace": "\(id)", "error": "\(error)"])
            }
            reloadRetries[id] = now + Self.reloadRetryPause
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
        guard let hub = workspaces[id]?.hub else { return }
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
            return
        }
        metrics.opsReadBack += UInt64(missed.count)
        for op in missed { broadcast(Tabsync_V1_ServerMessage(applied: op), to: hub.members) }
    }

    /// Reads back, once their pause is over, the workspaces whose read back failed.
    mutating func retryReloads() {
        guard !reloadRetries.isEmpty else { return }
        for (id, at) in reloadRetries.sorted(by: { $0.key < $1.key }) where at <= now {
            reloadRetries[id] = nil
            if workspaces[id]?.phase == .reloading { startRead(id) }
        }
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
        workspaces[id] = nil
        reloadFailing.remove(id)
        moves.forget(id)
        if settings.sharedStore { emit(.release(id)) }
    }

    /// True when a workspace is loaded, has no session (joined or being welcomed) and nothing in
    /// the commit pipeline: dropping it loses nothing.
    private func isIdle(_ id: String) -> Bool {
        guard let hub = workspaces[id]?.loadedHub else { return false }
        return hub.members.isEmpty && hub.welcoming.isEmpty && !commits.isBusy(id)
    }

    /// Called whenever a workspace may have become idle: drops it at once when nothing of it is
    /// stored or `idleUnload` is zero, else starts its idle clock.
    mutating func unloadIfIdle(_ id: String) {
        guard isIdle(id), let hub = workspaces[id]?.hub else { return }
        let neverStored = hub.durable.version == 0 && hub.live.lastSeqs.isEmpty
        if neverStored || settings.idleUnload <= .zero || moves.handingOver.contains(id) {
            drop(id)
            idleSince[id] = nil
        } else if idleSince[id] == nil {
            idleSince[id] = now
        }
    }

    /// Drops the workspaces idle for `idleUnload` or more. At most one scan per second.
    mutating func unloadIdleWorkspaces() {
        guard !idleSince.isEmpty, now - lastIdleScan >= .seconds(1) || settings.idleUnload < .seconds(2) else { return }
        lastIdleScan = now
        for (id, since) in idleSince.sorted(by: { $0.key < $1.key }) where now - since >= settings.idleUnload {
            idleSince[id] = nil
            guard isIdle(id) else { continue }
            drop(id)
            logger.debug("idle workspace unloaded", metadata: ["workspace": "\(id)"])
        }
    }
}
