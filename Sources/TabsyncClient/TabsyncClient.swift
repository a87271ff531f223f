import Synchronization
import TabsyncCore
import TabsyncProto

/// A tabsync client: one connection to one workspace, kept up until `close()`.
///
/// It sends `Hello` with its stable client id (resuming from the last version it saw), keeps a
/// ``Replica`` (the optimistic state a UI shows), submits ops with increasing seqs, resubmits
/// pending ops after a reconnect (same seq and base version: never applied twice), reconnects
/// with back-off and jitter, and resyncs on a version gap or an epoch change.
///
/// Thread rule: every method is safe from any thread. Network work happens on the
/// ``ClientLoop``'s thread; many clients may share one loop (the load generator runs thousands).
/// Changes are told through ``events()``, ``states()``, ``waitUntil(timeout:_:)`` and the
/// configuration's `onEvent` handler.
public final class TabsyncClient: Sendable {
    public struct Configuration: Sendable {
        /// The server; the client connects to its `/v1/workspaces/{workspace}/ws`
        /// (``ServerURL/session(for:)``).
        public var url: ServerURL
        public var workspace: String
        /// Stable across reconnects and restarts (1–64 chars of `[A-Za-z0-9._:-]`).
        public var clientId: String
        /// Shown to peers in presence (≤ 64 chars).
        public var clientName: String
        public var token: String
        /// The subprotocol: `.proto` (binary) by default, or `.json`.
        public var format: WireFormat
        public var backoff: Backoff
        /// Accept any certificate on `wss://` (self-signed, an unknown issuer, expired, another
        /// name): no protection against an impostor. For tests only.
        public var allowSelfSignedCertificates: Bool
        /// Called for every event, in order, on the thread that caused it (mostly the loop
        /// thread), while the client's lock is held: keep it short and do not call the client
        /// from it.
        public var onEvent: (@Sendable (ClientEvent) -> Void)?

        public init(
            url: ServerURL, workspace: String, clientId: String, clientName: String = "", token: String = "",
            format: WireFormat = .proto, backoff: Backoff = .default, allowSelfSignedCertificates: Bool = false,
            onEvent: (@Sendable (ClientEvent) -> Void)? = nil
        ) {
            self.url = url
            self.workspace = workspace
            self.clientId = clientId
            self.clientName = clientName
            self.token = token
            self.format = format
            self.backoff = backoff
            self.allowSelfSignedCertificates = allowSelfSignedCertificates
            self.onEvent = onEvent
        }
    }

    public let configuration: Configuration
    /// The loop this client's connection lives on.
    public let loop: ClientLoop
    private let id: UInt64
    private let box: SessionBox

    /// Makes a client on `loop` (or on a loop of its own when nil). It does not connect until
    /// ``start()``.
    public init(_ configuration: Configuration, loop: ClientLoop? = nil) throws(ClientError) {
        self.configuration = configuration
        if let loop {
            self.loop = loop
        } else {
            self.loop = try ClientLoop()
        }
        id = self.loop.makeConnectionId()
        box = SessionBox(
            session: Session(
                workspaceId: configuration.workspace, clientId: configuration.clientId,
                clientName: configuration.clientName, token: configuration.token, format: configuration.format),
            handler: configuration.onEvent)
    }

    deinit {
        loop.send(.close(id: id, code: 1000, reason: "client released"))
    }

    /// Starts connecting; the client then stays connected (reconnecting as needed) until `close()`.
    /// Calling it again does nothing.
    public func start() {
        guard box.withSession({ $0.start() }) else { return }
        let sent = loop.send(.open(
            id: id, owner: box, url: configuration.url.session(for: configuration.workspace), subprotocol: configuration.format.subprotocol,
            backoff: configuration.backoff, allowSelfSigned: configuration.allowSelfSignedCertificates))
        if !sent { box.withSession { $0.finished() } }
    }

    /// Everything the client knows now.
    public var state: ClientState {
        box.session.withLock { $0.state }
    }

    /// Submits an op: it shows in `state.optimistic` at once and is sent when connected (after
    /// the next `Welcome` if not). Returns its seq, or nil when it waits for the first `Welcome`
    /// to get one (or the client is closed: the op is dropped).
    @discardableResult
    public func submit(_ op: Operation) -> UInt64? {
        let (seq, flush) = box.withSession { session in (session.submit(op), session.hasOutgoing) }
        if flush { loop.send(.flush(id: id)) }
        return seq
    }

    /// Tells peers which tab this client views (sent again after every reconnect).
    public func focus(_ tabId: String) {
        let flush = box.withSession { session in
            session.focus(tabId)
            return session.hasOutgoing
        }
        if flush { loop.send(.flush(id: id)) }
    }

    /// Sends a history query (its `id` is chosen here) and waits for its answer. Sent at once when
    /// welcomed, else after the next `Welcome`.
    /// - Throws: ``ClientError/queryFailed(_:_:)`` when the server answers with an error (outside
    ///   retention, not permitted); ``ClientError/connectionLost(_:)`` when the connection it went
    ///   on ends first; ``ClientError/timedOut(_:)`` after `timeout`; ``ClientError/closed`` (or the
    ///   refusal) when the client is or becomes closed; ``ClientError/closed`` when the task is
    ///   cancelled.
    public func history(
        _ query: Tabsync_V1_HistoryQuery, timeout: Duration = .seconds(10)
    ) async throws(ClientError) -> Tabsync_V1_HistoryAnswer {
        var query = query
        query.id = box.withSession { $0.makeQueryId() }
        let queryId = query.id
        let result = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Result<Tabsync_V1_HistoryAnswer, ClientError>, Never>) in
                let flush = box.withSession { session in
                    session.query(query, continuation: continuation)
                    return session.hasOutgoing
                }
                if flush { loop.send(.flush(id: id)) }
                // The deadline; a query already answered is not there any more.
                Task { [weak box = self.box] in
                    try? await Task.sleep(for: timeout)
                    box?.withSession { $0.abandonQuery(queryId, .timedOut(timeout)) }
                }
            }
        } onCancel: {
            box.withSession { $0.abandonQuery(queryId, .closed) }
        }
        return try result.get()
    }

    /// Stored ops, newest first: a page of at most `limit` (0: the server's default of 50) before
    /// version `before` (0: from the newest). The answer's `next` is the `before` of the next page.
    public func historyOps(
        before: UInt64 = 0, limit: UInt32 = 0, timeout: Duration = .seconds(10)
    ) async throws(ClientError) -> Tabsync_V1_HistoryAnswer {
        var page = Tabsync_V1_HistoryPage()
        page.before = before
        page.limit = limit
        var query = Tabsync_V1_HistoryQuery()
        query.what = .ops(page)
        return try await history(query, timeout: timeout)
    }

    /// The workspace as it was at `version` (the answer's `state`).
    public func historyState(version: UInt64, timeout: Duration = .seconds(10)) async throws(ClientError) -> Tabsync_V1_HistoryAnswer {
        var query = Tabsync_V1_HistoryQuery()
        query.what = .version(version)
        return try await history(query, timeout: timeout)
    }

    /// The workspace as it was at time `at` (RFC 3339; the answer's `state`, whose `version` is the
    /// last op at or before it).
    public func historyState(at: String, timeout: Duration = .seconds(10)) async throws(ClientError) -> Tabsync_V1_HistoryAnswer {
        var query = Tabsync_V1_HistoryQuery()
        query.what = .at(at)
        return try await history(query, timeout: timeout)
    }

    /// Tabs closed recently and not back, newest first, at most `limit` (0: the server's 20).
    public func recentlyClosed(limit: UInt32 = 0, timeout: Duration = .seconds(10)) async throws(ClientError) -> [Tabsync_V1_ClosedTab] {
        var query = Tabsync_V1_HistoryQuery()
        query.what = .closed(limit)
        return try await history(query, timeout: timeout).closed
    }

    /// Closes the connection (1000) and connects again at once, resuming.
    public func reconnect() {
        box.withSession { $0.requestReconnect() }
        loop.send(.reconnect(id: id))
    }

    /// Reconnects at once asking for a full snapshot.
    public func resync(reason: String = "requested") {
        box.withSession { $0.requestResync(reason: reason) }
        loop.send(.reconnect(id: id))
    }

    /// Shuts the socket down without a close frame, as a network failure would; the client
    /// reconnects as after any loss. For tests and fault injection.
    public func dropConnection() {
        loop.send(.drop(id: id))
    }

    /// Closes for good (close code 1000); pending ops are abandoned. `state.connection` becomes
    /// `.closed` once the loop has closed the socket.
    public func close() {
        box.withSession { $0.close() }
        if !loop.send(.close(id: id, code: 1000, reason: "client closed")) {
            box.withSession { $0.finished() }
        }
    }

    /// A stream of every event from now on; it ends when the client is closed.
    public func events() -> AsyncStream<ClientEvent> {
        box.events()
    }

    /// The current state, then a new value per change (a slow reader sees only the newest).
    public func states() -> AsyncStream<ClientState> {
        box.states()
    }

    /// Waits until `condition` holds for the state (checked now and after every change).
    /// - Throws: ``ClientError/timedOut(_:)`` after `timeout`; ``ClientError/closed`` when the
    ///   client closes first (or ``ClientError/refused(_:_:)`` when the server refused it).
    @discardableResult
    public func waitUntil(
        timeout: Duration = .seconds(10), _ condition: @escaping @Sendable (ClientState) -> Bool
    ) async throws(ClientError) -> ClientState {
        enum Outcome: Sendable { case met(ClientState), ended(ClientState?), timedOut }
        let states = box.states()
        let outcome = await withTaskGroup(of: Outcome.self) { group in
            group.addTask {
                var last: ClientState?
                for await state in states {
                    if condition(state) { return .met(state) }
                    last = state
                }
                return .ended(last)
            }
            group.addTask {
                try? await Task.sleep(for: timeout)
                return .timedOut
            }
            let first = await group.next() ?? .timedOut
            group.cancelAll()
            return first
        }
        switch outcome {
        case .met(let state): return state
        case .timedOut: throw .timedOut(timeout)
        case .ended(let state): throw state?.refusal ?? .closed
        }
    }
}
