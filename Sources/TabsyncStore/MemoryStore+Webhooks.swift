import Foundation

/// The webhooks of a memory store: registrations in the order taken, cursors by hook and workspace.
struct MemoryWebhooks: Sendable {
    var registrations: [WebhookRegistration] = []
    var cursors: [String: [String: WebhookCursor]] = [:]
}

/// The webhooks of a ``MemoryStore`` (``WebhookStore``): gone with the process, as the rest of it.
extension MemoryStore: WebhookStore {
    public func addWebhook(_ hook: WebhookRegistration, cursors: [String: UInt64]) throws(StoreError) {
        try hooks.withLock { (state: inout MemoryWebhooks) throws(StoreError) in
            guard !state.registrations.contains(where: { $0.id == hook.id }) else {
                throw .writeFailed("a webhook with id \(hook.id) exists")
            }
            state.registrations.append(hook)
            var rows: [String: WebhookCursor] = [:]
            for (workspace, version) in cursors {
                rows[workspace] = WebhookCursor(hookId: hook.id, workspace: workspace, delivered: version)
            }
            state.cursors[hook.id] = rows
        }
    }

    public func webhooks() throws(StoreError) -> [WebhookRegistration] {
        hooks.withLock { $0.registrations }
    }

    public func removeWebhook(id: String) throws(StoreError) -> Bool {
        hooks.withLock { state in
            guard let index = state.registrations.firstIndex(where: { $0.id == id }) else { return false }
            state.registrations.remove(at: index)
            state.cursors[id] = nil
            return true
        }
    }

    public func webhookCursors(hookId: String) throws(StoreError) -> [WebhookCursor] {
        hooks.withLock { state in (state.cursors[hookId] ?? [:]).values.sorted { $0.workspace < $1.workspace } }
    }

    public func saveWebhookCursor(_ cursor: WebhookCursor) throws(StoreError) {
        hooks.withLock { state in
            guard state.registrations.contains(where: { $0.id == cursor.hookId }) else { return }
            let stored = state.cursors[cursor.hookId]?[cursor.workspace]
            state.cursors[cursor.hookId, default: [:]][cursor.workspace] = WebhookCursorMerge.merged(stored: stored, save: cursor)
        }
    }

    public func disableWebhook(id: String, reason: String, at: Date) throws(StoreError) -> Bool {
        hooks.withLock { state in
            guard let index = state.registrations.firstIndex(where: { $0.id == id && $0.isEnabled }) else { return false }
            let hook = state.registrations[index]
            state.registrations[index] = WebhookRegistration(
                id: hook.id, url: hook.url, workspaces: hook.workspaces, secret: hook.secret, createdAt: hook.createdAt,
                disabledReason: reason, disabledAt: at)
            return true
        }
    }

    public func enableWebhook(id: String) throws(StoreError) -> Bool {
        hooks.withLock { state in
            guard let index = state.registrations.firstIndex(where: { $0.id == id }) else { return false }
            state.registrations[index].disabledReason = nil
            state.registrations[index].disabledAt = nil
            for (workspace, cursor) in state.cursors[id] ?? [:] {
                state.cursors[id]?[workspace] = WebhookCursor(hookId: id, workspace: workspace, delivered: cursor.delivered)
            }
            return true
        }
    }

    public func claimWebhookCursors(hookId: String, workspaces: [String], node: String, until: Date, now: Date) throws(StoreError) -> Set<String> {
        hooks.withLock { state in state.registrations.contains { $0.id == hookId } ? Set(workspaces) : [] }
    }

    /// The lowest version an enabled hook delivered of the workspace (nil: none has a cursor of it).
    func hookFloor(_ workspaceId: String) -> Int64? {
        hooks.withLock { state in
            state.registrations.filter(\.isEnabled).compactMap { state.cursors[$0.id]?[workspaceId].map { Int64($0.delivered) } }.min()
        }
    }
}
