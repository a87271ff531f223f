import Logging
import TabsyncCore
import TabsyncProto
import TabsyncStore

extension Server.Loop {
    /// A workspace's place in the loop: being loaded from the store, or in memory.
    enum WorkspaceEntry {
        case loading
        case loaded(WorkspaceHub)
    }

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
    func reload(_ id: String) {
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
}
