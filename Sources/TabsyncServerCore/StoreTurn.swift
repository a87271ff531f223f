import Logging
import TabsyncStore

/// One store turn: a store or holder-registry action of the core (``ServerCore/Action``) carried
/// out against a store and a registry, and the event that answers it. The one copy of the store's
/// round trip: the driver runs it on its store executor; the deterministic simulation and the wire
/// fuzzer call it directly, with stores of their own (the simulation's faults are a store
/// decorator). ``ServerCore`` never calls it: the core decides, whoever owns the store carries out.
///
/// Guarantees: every store action (`.hold`, `.load`, `.commit`, `.readChanges`, `.pollVersions`,
/// `.release`, `.checkHolders`, `.heartbeat`, `.admin`, `.readHistory`) is answered as the core's docs say (a
/// `.commit` refused `behind` with the catch-up read made in the same turn, a failed check for a
/// newer holder as "none"), except `.release`, which nothing answers, and `.heartbeat` and
/// `.checkHolders` without a registry. Each call may block on the store: run it where store calls
/// belong (the driver's serial store executor), never on the event loop.
package struct StoreTurn: Sendable {
    package let store: any WorkspaceStore
    /// History reads go here; nil: they are answered "this store keeps no history".
    package let history: (any HistoryStore)?
    /// Admin calls go here; nil: they are answered "this store keeps no admin log".
    package let admin: (any AdminStore)?
    /// Webhook calls go here; nil: they are answered "this store keeps no webhooks".
    package let webhooks: (any WebhookStore)?
    /// The holder registry; nil: the store keeps none (`.hold` answers "no other holder").
    package let holders: (any HolderRegistry)?
    /// The clock a store call's duration is measured on (the simulation's stands still).
    package let clock: @Sendable () -> ContinuousClock.Instant
    /// Where a failure nothing answers is logged (a release).
    package let logger: Logger?

    package init(
        stores: StoreCapabilities, holders: (any HolderRegistry)?,
        clock: @escaping @Sendable () -> ContinuousClock.Instant = { ContinuousClock.now }, logger: Logger? = nil
    ) {
        store = stores.store
        history = stores.history
        admin = stores.admin
        webhooks = stores.webhooks
        self.holders = holders
        self.clock = clock
        self.logger = logger
    }

    /// Carries out `action` and returns the event that answers it (nil: nothing answers it, or it
    /// is no store action).
    package func answer(_ action: ServerCore.Action) -> ServerCore.Event? {
        switch action {
        case .hold(let workspaceId):
            guard let holders else { return .held(workspaceId: workspaceId, .success(0)) }
            do throws(StoreError) {
                return .held(workspaceId: workspaceId, .success(try holders.hold(workspaceId: workspaceId)))
            } catch {
                return .held(workspaceId: workspaceId, .failure(error))
            }
        case .load(let workspaceId):
            do throws(StoreError) {
                return .loaded(workspaceId: workspaceId, .success(try store.load(workspaceId: workspaceId)))
            } catch {
                return .loaded(workspaceId: workspaceId, .failure(error))
            }
        case .commit(let id, let batch):
            let started = clock()
            do throws(StoreError) {
                try store.commit(batch)
                return .committed(batch: id, .stored, duration: clock() - started)
            } catch {
                let duration = clock() - started
                guard case .behind(let versions) = error else { return .committed(batch: id, .failed(error), duration: duration) }
                // Still in the same store turn: read what each behind workspace missed.
                var after: [String: UInt64] = [:]
                for workspaceId in versions.keys { after[workspaceId] = batch.baseVersions[workspaceId] ?? 0 }
                return .committed(batch: id, .behind(readChanges(after: after)), duration: duration)
            }
        case .readChanges(let versions):
            let started = clock()
            let reads = readChanges(after: versions)
            return .caughtUp(reads, duration: clock() - started)
        case .pollVersions(let ids):
            let started = clock()
            do throws(StoreError) {
                let versions = try store.storedVersions(workspaceIds: ids)
                return .polled(.success(versions), duration: clock() - started)
            } catch {
                return .polled(.failure(error), duration: clock() - started)
            }
        case .release(let workspaceId):
            do throws(StoreError) {
                try holders?.release(workspaceIds: [workspaceId])
            } catch {
                // Its registration expires with the node's heartbeat, or goes when it stops.
                logger?.debug("could not release a workspace in the holder registry", metadata: [
                    "workspace": "\(workspaceId)", "error": "\(error)",
                ])
            }
            return nil
        case .checkHolders(let workspaceId):
            let newer = (try? holders?.hasNewerHolder(workspaceId: workspaceId)) ?? false
            return .holdersChecked(workspaceId: workspaceId, newerHolder: newer)
        case .heartbeat:
            guard let holders else { return nil }
            do throws(StoreError) {
                try holders.heartbeat()
                return .heartbeatFinished(nil)
            } catch {
                return .heartbeatFinished(error)
            }
        case .admin(let call):
            return .adminAnswered(call, adminAnswer(call.work))
        case .readHistory(let call):
            guard let history else {
                return .historyRead(call, .failure(.store(.readFailed("this store keeps no history"))))
            }
            do throws(HistoryFailure) {
                return .historyRead(call, .success(try HistoryReader(store: history).answer(call.read, workspaceId: call.workspaceId)))
            } catch {
                return .historyRead(call, .failure(error))
            }
        case .send, .broadcast, .echo, .ping, .close, .verifyToken, .respond, .feedOpen, .feedWrite, .feedClose, .stop:
            return nil
        }
    }

    /// Carries out an admin call on a store that keeps the admin log (``AdminStore``).
    private func adminAnswer(_ work: ServerCore.AdminCall.Work) -> Result<ServerCore.AdminAnswer, StoreError> {
        guard let admin else {
            return .failure(.readFailed("this store keeps no admin log"))
        }
        do throws(StoreError) {
            switch work {
            case .append(let command): return .success(.appended(try admin.appendAdminCommand(command)))
            case .readLog(let after): return .success(.entries(try admin.adminEntries(after: after)))
            case .listWorkspaces(let after, let limit):
                return .success(.workspaces(try admin.workspaceSummaries(after: after, limit: limit)))
            case .delete(let id): return .success(.deleted(try admin.deleteWorkspace(id)))
            case .addWebhook, .listWebhooks, .removeWebhook, .enableWebhook: return try webhookAnswer(work)
            }
        } catch {
            return .failure(error)
        }
    }

    /// Carries out a webhook call on a store that keeps webhooks (``WebhookStore``).
    private func webhookAnswer(_ work: ServerCore.AdminCall.Work) throws(StoreError) -> Result<ServerCore.AdminAnswer, StoreError> {
        guard let webhooks else { return .failure(.readFailed("this store keeps no webhooks")) }
        switch work {
        case .addWebhook(let hook):
            guard try webhooks.webhooks().count < WebhookSpec.maxHooks else { return .success(.webhookAdded(nil)) }
            let pattern = WorkspacePattern(hook.workspaces)
            try webhooks.registerWebhook(hook, matching: { pattern?.matches($0) ?? false })
            return .success(.webhookAdded(hook))
        case .removeWebhook(let id): return .success(.webhookRemoved(try webhooks.removeWebhook(id: id)))
        case .enableWebhook(let id):
            guard try webhooks.enableWebhook(id: id) else { return .success(.webhookEnabled(nil)) }
            return .success(.webhookEnabled(try webhooks.webhooks().first { $0.id == id }))
        default:
            // Every cursor of every hook (at most WebhookSpec.maxHooks): an admin's call, not a hot path.
            let hooks = try webhooks.webhooks()
            var failing: [String: ServerCore.WebhookFailing] = [:]
            for hook in hooks { failing[hook.id] = ServerCore.WebhookFailing(try webhooks.webhookCursors(hookId: hook.id)) }
            return .success(.webhooks(hooks, failing: failing))
        }
    }

    /// What a writer at `versions` missed of each of those workspaces, in one store call.
    private func readChanges(after versions: [String: UInt64]) -> [String: CatchUpRead] {
        let changes: Result<[String: StoredChanges], StoreError>
        do throws(StoreError) {
            changes = .success(try store.changes(after: versions))
        } catch {
            changes = .failure(error)
        }
        return CatchUpRead.reads(changes, after: versions)
    }
}
