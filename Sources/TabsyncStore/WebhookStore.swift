import Foundation
import TabsyncCore

/// One registered webhook as a store keeps it (docs/design.md, "Webhooks"): where to send, which
/// workspaces, and the signing secret. The secret is kept because signing needs it; nothing that
/// shows a hook to anyone (the admin API, a log line, `/metrics`) reads it.
public struct WebhookRegistration: Sendable, Equatable {
    /// The hook's id (`wh_` and random characters), given by the server when it is registered.
    public var id: String
    /// The target, `http` or `https` (checked by the admin API before it reaches a store).
    public var url: String
    /// The workspaces it follows: a glob as the token's `ws` claim.
    public var workspaces: String
    /// `whsec_` and the standard base64 of the key's bytes.
    public var secret: String
    /// When the hook was registered (to the millisecond, as every store keeps it).
    public var createdAt: Date
    /// Why the hook was disabled (its deliveries failed for too long: the last error and since
    /// when); nil while it is enabled.
    public var disabledReason: String?
    /// When it was disabled (nil: enabled, or disabled by a release that did not keep the time).
    public var disabledAt: Date?

    public var isEnabled: Bool { disabledReason == nil }

    public init(
        id: String, url: String, workspaces: String, secret: String, createdAt: Date, disabledReason: String? = nil,
        disabledAt: Date? = nil
    ) {
        self.id = id
        self.url = url
        self.workspaces = workspaces
        self.secret = secret
        self.createdAt = Date(timeIntervalSince1970: (createdAt.timeIntervalSince1970 * 1000).rounded(.down) / 1000)
        self.disabledReason = disabledReason
        self.disabledAt = disabledAt.map { Date(timeIntervalSince1970: ($0.timeIntervalSince1970 * 1000).rounded(.down) / 1000) }
    }
}

/// How far one hook has delivered one workspace, and its pending attempt: the durable outbox is
/// this cursor over the op log (docs/design.md, "Webhooks").
public struct WebhookCursor: Sendable, Equatable {
    public var hookId: String
    public var workspace: String
    /// The last version the receiver answered 2xx for (0: none yet).
    public var delivered: UInt64
    /// Failed attempts of the next version so far.
    public var attempts: Int
    /// When the first of those attempts failed (nil: none failed).
    public var firstFailure: Date?
    /// When the next attempt is due (nil: now).
    public var nextAttempt: Date?
    /// Why the last of those attempts failed, as the admin list shows it (nil: none failed). Never
    /// holds the hook's secret; the URL's host at most.
    public var lastError: String?

    public init(
        hookId: String, workspace: String, delivered: UInt64, attempts: Int = 0, firstFailure: Date? = nil, nextAttempt: Date? = nil,
        lastError: String? = nil
    ) {
        self.hookId = hookId
        self.workspace = workspace
        self.delivered = delivered
        self.attempts = attempts
        self.firstFailure = firstFailure.map(Self.millis)
        self.nextAttempt = nextAttempt.map(Self.millis)
        self.lastError = lastError
    }

    private static func millis(_ date: Date) -> Date {
        Date(timeIntervalSince1970: (date.timeIntervalSince1970 * 1000).rounded(.down) / 1000)
    }
}

/// What a store keeps for webhooks: the registrations and a cursor per hook and workspace.
///
/// Guarantees asked of a conformer:
/// - ``addWebhook(_:cursors:)`` stores the hook and its starting cursors in one transaction, and is
///   durable when it returns; a second hook with the same id is refused (`writeFailed`) and
///   changes nothing.
/// - ``webhooks()`` lists every hook, oldest registration first.
/// - ``removeWebhook(id:)`` removes the hook and every cursor of it at once.
/// - ``saveWebhookCursor(_:)`` never moves `delivered` back (a save below the stored one keeps the
///   stored one, and takes the rest of the save only when it is at the same version), and stores
///   nothing for a hook that is not registered (a deliverer racing a removal does not bring its
///   cursors back).
/// - ``disableWebhook(id:reason:at:)`` marks an enabled hook disabled with its reason and time and
///   keeps its cursors; ``enableWebhook(id:)`` clears both and the pending attempt of each of its
///   cursors (attempts, first failure, next time, last error), keeping what was delivered, so delivery resumes
///   from the cursor and a failure starts a new give-up period.
public protocol WebhookStore: AdminStore {
    func addWebhook(_ hook: WebhookRegistration, cursors: [String: UInt64]) throws(StoreError)
    func webhooks() throws(StoreError) -> [WebhookRegistration]
    /// False when no hook has this id.
    func removeWebhook(id: String) throws(StoreError) -> Bool
    /// The hook's cursors, by workspace ascending.
    func webhookCursors(hookId: String) throws(StoreError) -> [WebhookCursor]
    func saveWebhookCursor(_ cursor: WebhookCursor) throws(StoreError)
    /// False when no enabled hook has this id.
    func disableWebhook(id: String, reason: String, at: Date) throws(StoreError) -> Bool
    /// False when no hook has this id (enabling an enabled hook clears its pending attempts too).
    func enableWebhook(id: String) throws(StoreError) -> Bool
    /// Takes or renews the lease on the hook's cursors of `workspaces` for `node` until `until`, and
    /// returns those this node holds the lease of now: a cursor's lease goes to a node when it is
    /// free, already this node's, or ran out before `now`, and (on a store several nodes share)
    /// only to the node holding the workspace, or to any node when no live node holds it
    /// (``HolderRegistry``). A cursor not yet stored is made at 0. A store of one node grants every
    /// workspace of a registered hook.
    func claimWebhookCursors(hookId: String, workspaces: [String], node: String, until: Date, now: Date) throws(StoreError) -> Set<String>
}

extension WebhookStore {
    /// Registers `hook` delivering what is committed from now on: a cursor at the present stored
    /// version of every workspace with an applied op that `matches` accepts (read a page at a
    /// time). A workspace first written later has no cursor, and starts at 0.
    public func registerWebhook(_ hook: WebhookRegistration, matching matches: (String) -> Bool) throws(StoreError) {
        var cursors: [String: UInt64] = [:]
        var after: String?
        while true {
            let page = try workspaceIds(after: after, limit: 500)
            guard let last = page.last else { break }
            let versions = try storedVersions(workspaceIds: page.filter(matches))
            cursors.merge(versions) { $1 }
            after = last
        }
        try addWebhook(hook, cursors: cursors)
    }
}

/// A cursor save as every store applies it (``WebhookStore/saveWebhookCursor(_:)``): the stored
/// cursor after `save` is applied to `stored`.
enum WebhookCursorMerge {
    static func merged(stored: WebhookCursor?, save: WebhookCursor) -> WebhookCursor {
        guard let stored else { return save }
        if save.delivered < stored.delivered { return stored }
        return save
    }
}
