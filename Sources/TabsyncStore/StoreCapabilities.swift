/// A store and what it can do beyond the log, as typed values (docs/architecture.md, "Where things
/// are decided"):
/// a server is built with one and never asks a store at run time what it is.
///
/// Guarantees: ``history``, ``admin`` and ``webhooks``, when set, are ``store`` itself. Every store
/// tabsync ships (memory, SQLite, PostgreSQL) is wrapped by the ``init(_:)`` that requires all three
/// conformances, so a shipped store that lost one fails to compile instead of answering "keeps
/// no history" at run time. The narrower initialisers are for test stores that keep less (a
/// store decorator of faults, the simulation's store).
public struct StoreCapabilities: Sendable {
    /// The log: loads, commits, catch-up reads.
    public let store: any WorkspaceStore
    /// Who made each op and when, and milestones (``HistoryStore``); nil: history reads are
    /// answered "this store keeps no history".
    public let history: (any HistoryStore)?
    /// The admin log, the workspace list and deletes (``AdminStore``); nil: admin calls are
    /// answered "this store keeps no admin log".
    public let admin: (any AdminStore)?

    /// The webhooks and their cursors (``WebhookStore``); nil: webhook calls are answered "this
    /// store keeps no webhooks".
    public let webhooks: (any WebhookStore)?

    /// A store that keeps history, the admin log and webhooks: every store tabsync ships.
    public init(_ store: some HistoryStore & WebhookStore) {
        self.store = store
        history = store
        admin = store
        webhooks = store
    }

    /// A store that keeps history and the admin log, no webhooks (the simulation's store).
    public init(withoutWebhooks store: some HistoryStore & AdminStore) {
        self.store = store
        history = store
        admin = store
        webhooks = nil
    }

    /// A store that keeps history but no admin log.
    public init(history store: some HistoryStore) {
        self.store = store
        history = store
        admin = nil
        webhooks = nil
    }

    /// A store that keeps only the log.
    public init(logOnly store: some WorkspaceStore) {
        self.store = store
        history = nil
        admin = nil
        webhooks = nil
    }
}
