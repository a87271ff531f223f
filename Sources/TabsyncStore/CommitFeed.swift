import TabsyncLock

/// What a feed of a shared store's commits tells a server (``CommitFeed``).
public enum CommitFeedEvent: Sendable, Equatable {
    /// The feed listens (again, when `reconnected`): commits made while it did not were not told,
    /// so every loaded workspace must catch up.
    case listening(reconnected: Bool)
    /// A commit reached a workspace's version, with its changes when they fit.
    case committed(CommitNotification)
    /// The feed lost its connection; it reconnects on its own.
    case disconnected(String)
}

/// Tells a server of the commits other writers make to a store it shares with them, so it can
/// catch up without polling. A server knows its feed only through this protocol
/// (``PostgresCommitFeed`` is the one for PostgreSQL); without a feed it polls.
///
/// Guarantees asked of a conformer: events come one at a time on the feed's own thread, never on
/// the server's event loop; `.listening` follows every (re)connection; nothing comes after
/// ``stop()`` returns.
public protocol CommitFeed: Sendable {
    /// Starts delivering events to `onEvent` (which must return quickly: it hands them to a loop).
    func start(_ onEvent: @escaping @Sendable (CommitFeedEvent) -> Void)
    /// Stops the feed; returns once no event can follow.
    func stop()
}

/// A PostgreSQL store's commit feed: a ``PostgresListener`` on the store's channel, started with
/// the server. `ownBackend` names this node's own store connection, whose notifications are
/// skipped (the node knows its commits from their results).
public final class PostgresCommitFeed: CommitFeed {
    private let url: String
    private let store: PostgresStore.Options
    private let options: PostgresListener.Options
    private let ownBackend: (@Sendable () -> Int32)?
    private let listener = ListenerSlot()

    public init(
        url: String, store: PostgresStore.Options = .init(), options: PostgresListener.Options = .init(),
        ownBackend: (@Sendable () -> Int32)? = nil
    ) {
        self.url = url
        self.store = store
        self.options = options
        self.ownBackend = ownBackend
    }

    public func start(_ onEvent: @escaping @Sendable (CommitFeedEvent) -> Void) {
        let made = PostgresListener(url: url, store: store, options: options, ownBackend: ownBackend, onEvent: onEvent)
        guard listener.set(made) else { return }
        made.start()
    }

    public func stop() {
        listener.take()?.stop()
    }
}


/// The feed's listener, set once by `start` and taken by `stop`.
final class ListenerSlot: Sendable {
    private let state = Lock<(listener: PostgresListener?, started: Bool)>((nil, false))

    /// False when a listener was set before (the feed starts once).
    func set(_ listener: PostgresListener) -> Bool {
        state.withLock { state in
            guard !state.started else { return false }
            state = (listener, true)
            return true
        }
    }

    func take() -> PostgresListener? {
        state.withLock { state in
            defer { state.listener = nil }
            return state.listener
        }
    }
}
