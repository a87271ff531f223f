import Dispatch
import Foundation
import Glibc
import Synchronization

/// Receives the commits other nodes announce: one connection, `LISTEN` on the store's channel, on a
/// thread of its own (never the event loop's). For each notification it calls `onEvent` with
/// `.committed(_:)`: the workspace's new version, and the batch's changes when they fit in the
/// payload (``CommitNotification``); without them the server reads the ops after its own version.
///
/// Guarantees: a connection that breaks, or whose keepalive query (``Options/keepaliveSeconds``
/// of silence) gets no answer within ``Options/keepaliveTimeoutSeconds``, is dropped and reopened
/// with back-off (100 ms doubling to ``Options/maxBackoffSeconds``); each successful `LISTEN`
/// reports `.listening(reconnected:)`: after a reconnect notifications may have been lost, so
/// every loaded workspace must catch up. `onEvent` runs on the listener's thread, one event at a
/// time; it must return quickly (hand the event to an inbox). ``stop()`` returns once the thread
/// has ended; no event follows it.
public final class PostgresListener: Sendable {
    /// What the listener tells (``CommitFeedEvent``).
    public typealias Event = CommitFeedEvent

    public struct Options: Sendable, Equatable {
        /// Silence after which a keepalive query is sent.
        public var keepaliveSeconds: Double
        /// How long the keepalive query may stay unanswered before the connection is dropped.
        public var keepaliveTimeoutSeconds: Double
        /// The longest wait between reconnect attempts.
        public var maxBackoffSeconds: Double

        public init(keepaliveSeconds: Double = 5, keepaliveTimeoutSeconds: Double = 5, maxBackoffSeconds: Double = 5) {
            self.keepaliveSeconds = keepaliveSeconds
            self.keepaliveTimeoutSeconds = keepaliveTimeoutSeconds
            self.maxBackoffSeconds = maxBackoffSeconds
        }
    }

    private let url: String
    private let store: PostgresStore.Options
    private let options: Options
    private let onEvent: @Sendable (Event) -> Void
    private let ownBackend: (@Sendable () -> Int32)?
    private let stopping = Atomic<Bool>(false)
    private let started = Atomic<Bool>(false)
    /// A pipe whose read end wakes the thread's poll when ``stop()`` writes to it.
    private let wakeRead: Int32
    private let wakeWrite: Int32
    private let finished = DispatchSemaphore(value: 0)

    /// Listens on the channel of the store opened with `store` options (``PostgresStore/Options/channel``).
    /// `ownBackend`: the server process of this node's own store connection (0: none), whose
    /// notifications are skipped: the node knows its commits from their results, and decoding
    /// their payloads would be work for nothing.
    public init(
        url: String, store: PostgresStore.Options = .init(), options: Options = .init(),
        ownBackend: (@Sendable () -> Int32)? = nil, onEvent: @escaping @Sendable (Event) -> Void
    ) {
        self.url = url
        self.store = store
        self.options = options
        self.ownBackend = ownBackend
        self.onEvent = onEvent
        var fds: [Int32] = [-1, -1]
        if pipe(&fds) != 0 { fatalError("pipe: \(errno)") }
        wakeRead = fds[0]
        wakeWrite = fds[1]
    }

    deinit {
        close(wakeRead)
        close(wakeWrite)
    }

    /// Starts the listener's thread (once).
    public func start() {
        guard !started.exchange(true, ordering: .sequentiallyConsistent) else { return }
        let thread = Thread { [self] in
            run()
            finished.signal()
        }
        thread.name = "tabsync-pg-listener"
        thread.start()
    }

    /// Stops the thread and closes the connection; returns when the thread has ended.
    public func stop() {
        guard !stopping.exchange(true, ordering: .sequentiallyConsistent) else { return }
        var byte: UInt8 = 1
        _ = write(wakeWrite, &byte, 1)
        if started.load(ordering: .sequentiallyConsistent) { finished.wait() }
    }

    // MARK: - the thread

    private var isStopping: Bool { stopping.load(ordering: .sequentiallyConsistent) }

    private func run() {
        var backoff = 0.1
        var reconnected = false
        while !isStopping {
            do throws(PGError) {
                let db = try PGConnection(
                    url: url, connectTimeoutSeconds: store.connectTimeoutSeconds,
                    applicationName: store.applicationName + " listener")
                defer { db.close() }
                try db.execute("LISTEN " + PGConnection.quoteIdentifier(store.channel))
                onEvent(.listening(reconnected: reconnected))
                reconnected = true
                backoff = 0.1
                try listen(db)
            } catch {
                if isStopping { return }
                onEvent(.disconnected(error.description))
                reconnected = true
                _ = wait(socket: nil, seconds: backoff)
                backoff = min(backoff * 2, options.maxBackoffSeconds)
            }
        }
    }

    /// Waits on the connection until stopped; throws when it breaks.
    private func listen(_ db: PGConnection) throws(PGError) {
        var lastHeard = ContinuousClock.now
        var pingSent: ContinuousClock.Instant?
        let keepalive = Duration.seconds(options.keepaliveSeconds)
        let timeout = Duration.seconds(options.keepaliveTimeoutSeconds)
        while !isStopping {
            let now = ContinuousClock.now
            let deadline = pingSent.map { $0 + timeout } ?? lastHeard + keepalive
            let seconds = max(0, Double((deadline - now).components.attoseconds) / 1e18 + Double((deadline - now).components.seconds))
            guard let readable = wait(socket: db.socket, seconds: seconds) else { return }  // stopped
            if readable {
                try db.consumeInput()
                lastHeard = ContinuousClock.now
                let own = ownBackend?() ?? 0
                for notification in db.takeNotifications() where own == 0 || notification.pid != own {
                    if let event = Self.parse(notification.payload) { onEvent(event) }
                }
                if pingSent != nil, try db.resultIfReady() { pingSent = nil }
            }
            let later = ContinuousClock.now
            if let sent = pingSent {
                if later - sent >= timeout { throw .connection("keepalive unanswered for \(options.keepaliveTimeoutSeconds) s") }
            } else if later - lastHeard >= keepalive {
                try db.send("SELECT 1")
                pingSent = later
            }
        }
    }

    /// Polls `socket` (when given) and the wake pipe: true when the socket is readable, false on
    /// timeout, nil when stopped.
    private func wait(socket: Int32?, seconds: Double) -> Bool? {
        var fds = [pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)]
        if let socket { fds.append(pollfd(fd: socket, events: Int16(POLLIN), revents: 0)) }
        let milliseconds = Int32(min(max(seconds * 1000, 0), 60_000).rounded(.up))
        let count = poll(&fds, nfds_t(fds.count), milliseconds)
        if isStopping || (count > 0 && fds[0].revents != 0) { return nil }
        return count > 0 && fds.count > 1 && fds[1].revents != 0
    }

    /// The event a notification's payload gives (``CommitNotification/parse(_:)``); nil when it
    /// is none of tabsync's.
    static func parse(_ payload: String) -> Event? {
        CommitNotification.parse(payload).map(Event.committed)
    }
}
