import TabsyncCore
import TabsyncLock
import TabsyncProto

/// A client's session behind its lock, and the loop's view of it (`LoopConnectionOwner`).
///
/// Both the loop thread (frames in and out) and user threads (submit, focus) use the session;
/// each call takes the lock once. Events are delivered while the lock is held, so every
/// subscriber and the handler see them in the order they happened; delivery never blocks
/// (`AsyncStream` buffers), and the handler must not call back into the client.
final class SessionBox: Sendable {
    let session: Lock<Session>
    private let listeners: Lock<Listeners>
    let handler: (@Sendable (ClientEvent) -> Void)?

    struct Listeners {
        var nextId: UInt64 = 0
        var events: [UInt64: AsyncStream<ClientEvent>.Continuation] = [:]
        var states: [UInt64: AsyncStream<ClientState>.Continuation] = [:]
        var isEmpty: Bool { events.isEmpty && states.isEmpty }
    }

    init(session: Session, handler: (@Sendable (ClientEvent) -> Void)?) {
        self.session = Lock(session)
        self.listeners = Lock(Listeners())
        self.handler = handler
    }

    /// Runs `body` on the session under its lock, then delivers the events it produced and, when
    /// they or the state changed, the state (still under the lock, to keep their order). A change
    /// with no event still reaches the state listeners: an answer repeated for a seq sent again
    /// settles its op without a new version (a waiter for "settled" would otherwise wait on).
    func withSession<R>(_ body: (inout Session) -> R) -> R {
        session.withLock { session in
            let before = session.state
            let result = body(&session)
            let events = session.takeEvents()
            if !events.isEmpty || session.state != before { deliver(events, state: session.state) }
            return result
        }
    }

    private func deliver(_ events: [ClientEvent], state: ClientState) {
        if let handler { events.forEach(handler) }
        let ended = listeners.withLock { listeners -> Listeners? in
            guard !listeners.isEmpty else { return nil }
            for continuation in listeners.events.values { events.forEach { continuation.yield($0) } }
            for continuation in listeners.states.values { continuation.yield(state) }
            guard state.connection == .closed else { return nil }
            defer { listeners = Listeners(nextId: listeners.nextId) }
            return listeners
        }
        // Outside the listeners lock: finishing runs `onTermination`, which takes it.
        if let ended {
            ended.events.values.forEach { $0.finish() }
            ended.states.values.forEach { $0.finish() }
        }
    }

    func events() -> AsyncStream<ClientEvent> {
        let (stream, continuation) = AsyncStream.makeStream(of: ClientEvent.self, bufferingPolicy: .unbounded)
        subscribe(continuation, into: \.events)
        return stream
    }

    /// A stream of states: the current one first, then one per change (only the newest kept).
    func states() -> AsyncStream<ClientState> {
        let (stream, continuation) = AsyncStream.makeStream(of: ClientState.self, bufferingPolicy: .bufferingNewest(1))
        // Under the session lock, so no change slips between the first value and the subscription.
        session.withLock { session in
            continuation.yield(session.state)
            if session.state.connection == .closed {
                continuation.finish()
            } else {
                subscribe(continuation, into: \.states)
            }
        }
        return stream
    }

    private func subscribe<T>(
        _ continuation: AsyncStream<T>.Continuation,
        into path: WritableKeyPath<Listeners, [UInt64: AsyncStream<T>.Continuation]>
    ) {
        let id = listeners.withLock { listeners in
            listeners.nextId += 1
            listeners[keyPath: path][listeners.nextId] = continuation
            return listeners.nextId
        }
        continuation.onTermination = { [weak self] _ in
            // Ids are unique across both tables.
            self?.listeners.withLock { listeners in
                listeners.events[id] = nil
                listeners.states[id] = nil
            }
        }
    }
}

extension SessionBox: LoopConnectionOwner {
    func loopConnecting(attempt: Int) {
        withSession { $0.connecting(attempt: attempt) }
    }

    func loopOpened() -> [[UInt8]] {
        [withSession { $0.opened() }]
    }

    func loopReceived(_ message: [UInt8]) -> LoopVerdict {
        guard let close = withSession({ $0.received(message) }) else { return .keep }
        return .close(code: close.code, reason: close.reason)
    }

    func loopTakeOutgoing(budget: Int) -> [[UInt8]] {
        withSession { $0.takeOutgoing(budget: budget) }
    }

    func loopClosed(_ ending: ConnectionEnding) -> LoopNext {
        withSession { $0.closed(ending) }
    }

    func loopWaiting(attempt: Int, delay: Duration) {
        withSession { $0.waiting(attempt: attempt, delay: delay) }
    }

    func loopForgotten() {
        withSession { $0.finished() }
    }

    func loopTakeRetryRequest() -> Duration? {
        withSession { $0.takeRetryRequest() }
    }

    func loopRetryDue() -> Bool {
        withSession { $0.releaseHeld() }
    }
}
