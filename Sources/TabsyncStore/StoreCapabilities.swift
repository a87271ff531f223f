/// A store and what it can do beyond the log, as typed values (docs/architecture.md, "Where things
/// are decided"):
/// a server is built with one and never asks a store at run time what it is.
///
/// Guarantees: ``history`` and ``admin``, when set, are ``store`` itself. Every store tabsync
/// ships (memory, SQLite, PostgreSQL) is wrapped by ``init(_:)``, which requires both
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

    /// A store that keeps history and the admin log: every store tabsync ships.
    public init(_ store: some HistoryStore & AdminStore) {
        self.store = store
        history = store
        admin = store
    }

    /// A store that keeps history but no admin log.
    public init(history store: some HistoryStore) {
        self.store = store
        history = store
        admin = nil
    }

    /// A store that keeps only the log.
    public init(logOnly store: some WorkspaceStore) {
        self.store = store
        history = nil
        admin = nil
    }
}
