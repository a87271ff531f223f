import TabsyncCore
import TabsyncProto

/// The protocol logic of one client, without sockets: builds `Hello` and `Submit` frames, reads
/// server frames into a ``Replica``, and decides when to resync or give up.
///
/// Invariants: frames leave in `outbox` order; the outbox only holds frames for the current
/// connection and is emptied when it ends (pending ops are resubmitted from the replica after the
/// next `Welcome`, with the same seq and base version, so the server's dedup answers any that
/// already arrived: a pending op is settled only by its own answer, never by `Welcome.lastSeq`);
/// a snapshot of another history (a new epoch, or this one below a version already seen) is taken
/// whole and reported as ``ClientEvent/historyReplaced(_:)``; no op gets a seq before the first `Welcome` (seqs start after
/// `Welcome.lastSeq`, so a restarted client never reuses a consumed seq); an op refused for a
/// reason that passes (``isTransient(_:)``) is held, still shown, and sent again as a new op with
/// a new seq after a back-off or at the next `Welcome`, until it gets a permanent answer.
struct Session {
    enum Phase: Equatable {
        case idle, connecting, awaitingWelcome, ready, disconnected, closed
    }

    let workspaceId: String
    let clientId: String
    let clientName: String
    let token: String
    let format: WireFormat

    private(set) var replica: Replica
    private(set) var state: ClientState
    private(set) var phase: Phase = .idle
    /// Ops submitted before the first `Welcome`: they get seqs once the server told the last one.
    private var unsequenced: [Operation] = []
    private var focusTabId: String?
    /// Presence as the full list and deltas of the current connection tell it.
    private var peerView = PeerView()
    private var welcomedOnce = false
    /// Ask for a snapshot (not a resume) at the next `Hello`.
    private var wantSnapshot = false
    /// The current connection is being closed to reconnect at once.
    private var reconnectNow = false
    /// `close()` was called.
    private var closing = false
    private var outbox: [[UInt8]] = []
    private var outboxHead = 0
    /// Transient refusals in a row with no own op applied between: the retry back-off's attempt.
    private var transientRefusals = 0
    /// The delay after which held ops go again, when one was asked for and not yet taken by the loop.
    private var retryRequest: Duration?
    /// The back-off of held ops refused `UNAVAILABLE`.
    static let retryBackoff = Backoff(initial: .milliseconds(200), maximum: .seconds(5))
    /// How long ops refused `RATE_LIMITED` wait: the server counts ops per second.
    static let rateLimitedWait: Duration = .seconds(1)

    /// Events produced since the last `takeEvents()`.
    private(set) var events: [ClientEvent] = []

    /// A history query waiting for its answer: `frame` is set until it is sent (queries wait for
    /// a `Welcome`; one sent on a connection that ends fails, as its answer cannot come).
    struct HistoryWaiter {
        var frame: [UInt8]?
        let continuation: CheckedContinuation<Result<Tabsync_V1_HistoryAnswer, ClientError>, Never>
    }
    private var historyWaiters: [UInt32: HistoryWaiter] = [:]
    private var lastQueryId: UInt32 = 0

    init(workspaceId: String, clientId: String, clientName: String, token: String, format: WireFormat) {
        self.workspaceId = workspaceId
        self.clientId = clientId
        self.clientName = clientName
        self.token = token
        self.format = format
        let empty = Workspace(id: workspaceId)
        replica = Replica(clientId: clientId, workspace: empty)
        state = ClientState(workspace: empty)
    }

    mutating func takeEvents() -> [ClientEvent] {
        defer { events = [] }
        return events
    }

    private mutating func emit(_ event: ClientEvent) {
        events.append(event)
    }

    private mutating func setConnection(_ connection: ConnectionState) {
        guard state.connection != connection else { return }
        state.connection = connection
        emit(.connection(connection))
    }

    /// Copies the replica into the published state; emits `.workspace` when the optimistic
    /// workspace changed.
    private mutating func syncReplica() {
        state.confirmed = replica.confirmed
        state.pending = replica.pending
        state.held = replica.held
        state.unsequenced = unsequenced.count
        if state.optimistic != replica.optimistic {
            state.optimistic = replica.optimistic
            emit(.workspace(replica.optimistic))
        }
    }

    // MARK: user side

    /// Starts (from `.idle`); false if already started or closed.
    mutating func start() -> Bool {
        guard phase == .idle else { return false }
        phase = .connecting
        return true
    }

    /// Takes a local op. Returns its seq, or nil when it waits for the first `Welcome` (or the
    /// client is closed, in which case it is dropped). Appends its frame to the outbox when ready.
    mutating func submit(_ op: Operation) -> UInt64? {
        guard phase != .closed, !closing else { return nil }
        guard welcomedOnce else {
            unsequenced.append(op)
            state.unsequenced = unsequenced.count
            return nil
        }
        let pending = replica.submit(op)
        if phase == .ready { send(.init(submit: .init(seq: pending.seq, baseVersion: pending.baseVersion, op: op))) }
        syncReplica()
        return pending.seq
    }

    mutating func focus(_ tabId: String) {
        focusTabId = tabId
        if phase == .ready { send(.init(focus: .init(tabId: tabId))) }
    }

    /// Marks the client closing; the loop closes the connection. Waiting history queries fail.
    mutating func close() {
        closing = true
        failHistory(sentOnly: false, .closed)
    }

    // MARK: history queries

    /// A new query id (never 0, unique among the waiting ones).
    mutating func makeQueryId() -> UInt32 {
        repeat {
            lastQueryId &+= 1
        } while lastQueryId == 0 || historyWaiters[lastQueryId] != nil
        return lastQueryId
    }

    /// Registers `query` (its id set by the caller) and sends it now when welcomed, else after the
    /// next `Welcome`. A closed client answers `.closed` at once.
    mutating func query(
        _ query: Tabsync_V1_HistoryQuery,
        continuation: CheckedContinuation<Result<Tabsync_V1_HistoryAnswer, ClientError>, Never>
    ) {
        guard phase != .closed, !closing else {
            continuation.resume(returning: .failure(state.refusal ?? .closed))
            return
        }
        var message = Tabsync_V1_ClientMessage()
        message.history = query
        let frame = format.encode(message)
        if phase == .ready {
            outbox.append(frame)
            historyWaiters[query.id] = HistoryWaiter(frame: nil, continuation: continuation)
        } else {
            historyWaiters[query.id] = HistoryWaiter(frame: frame, continuation: continuation)
        }
    }

    /// History queries waiting for their answer (sent or not).
    var waitingQueries: Int { historyWaiters.count }

    /// Gives up on query `id` (its deadline passed, or its task was cancelled).
    mutating func abandonQuery(_ id: UInt32, _ error: ClientError) {
        historyWaiters.removeValue(forKey: id)?.continuation.resume(returning: .failure(error))
    }

    /// Fails the waiting queries (only those already sent when `sentOnly`).
    private mutating func failHistory(sentOnly: Bool, _ error: ClientError) {
        for (id, waiter) in historyWaiters where !sentOnly || waiter.frame == nil {
            historyWaiters[id] = nil
            waiter.continuation.resume(returning: .failure(error))
        }
    }

    /// Sends the queries that waited for a `Welcome`.
    private mutating func sendWaitingQueries() {
        for id in historyWaiters.keys.sorted() {
            guard let frame = historyWaiters[id]?.frame else { continue }
            outbox.append(frame)
            historyWaiters[id]?.frame = nil
        }
    }

    /// The next connection starts at once (no back-off); the caller then reconnects.
    mutating func requestReconnect() {
        reconnectNow = true
    }

    /// Asks for a snapshot at the next connection; the caller then reconnects.
    mutating func requestResync(reason: String) {
        wantSnapshot = true
        reconnectNow = true
        state.resyncs += 1
        emit(.resync(reason: reason))
    }

    var hasOutgoing: Bool { outboxHead < outbox.count }

    private mutating func send(_ message: Tabsync_V1_ClientMessage) {
        outbox.append(format.encode(message))
    }

    /// Frames to write, about `budget` bytes (at least one when any wait).
    mutating func takeOutgoing(budget: Int) -> [[UInt8]] {
        var frames: [[UInt8]] = []
        var bytes = 0
        while outboxHead < outbox.count && (frames.isEmpty || bytes + outbox[outboxHead].count <= budget) {
            bytes += outbox[outboxHead].count
            frames.append(outbox[outboxHead])
            outbox[outboxHead] = []
            outboxHead += 1
        }
        if outboxHead == outbox.count {
            outbox.removeAll(keepingCapacity: true)
            outboxHead = 0
        }
        return frames
    }

    private mutating func clearOutbox() {
        outbox = []
        outboxHead = 0
    }

    // MARK: loop side

    mutating func connecting(attempt: Int) {
        phase = .connecting
        setConnection(.connecting(attempt: attempt))
    }

    mutating func waiting(attempt: Int, delay: Duration) {
        setConnection(.waiting(attempt: attempt, delay: delay))
    }

    /// The socket is open: the `Hello` to send first.
    mutating func opened() -> [UInt8] {
        phase = .awaitingWelcome
        clearOutbox()
        setConnection(.awaitingWelcome)
        var hello = Tabsync_V1_Hello(
            workspace: workspaceId, clientId: clientId, clientName: clientName, token: token, presenceDeltas: true)
        peerView.reset()
        if welcomedOnce && !wantSnapshot && replica.confirmed.version > 0 {
            hello.lastVersion = replica.confirmed.version
            hello.epoch = replica.confirmed.epoch
        }
        return format.encode(Tabsync_V1_ClientMessage(hello: hello))
    }

    /// One frame from the server; returns a close to perform, if any.
    mutating func received(_ bytes: [UInt8]) -> (code: UInt16, reason: String)? {
        let message: Tabsync_V1_ServerMessage
        do {
            message = try format.decodeServerMessage(bytes)
        } catch {
            requestResync(reason: "undecodable frame from the server: \(error.reason)")
            return (error.closeCode, "undecodable frame")
        }
        switch message.message {
        case .welcome(let welcome):
            return receivedWelcome(welcome)
        case .applied(let applied):
            guard phase == .ready else { return protocolTrouble("applied before welcome") }
            guard let op = try? AppliedOp(applied) else {
                return resync("the server sent an applied op without a kind")
            }
            return receivedApplied(op)
        case .rejected(let rejected):
            let code = ErrorCode(rejected.code)
            if let code, Self.isTransient(code), !closing {
                // Retried, never rolled back (docs/design.md, 'Transient refusals are retried').
                if let held = replica.hold(rejectedSeq: rejected.seq) {
                    transientRefusals += 1
                    let delay = code == .rateLimited
                        ? Self.rateLimitedWait : Self.retryBackoff.delay(attempt: transientRefusals)
                    retryRequest = min(retryRequest ?? delay, delay)
                    let rejection = Rejection(
                        seq: rejected.seq, code: code, message: rejected.message, op: held.op, firstSeq: held.firstSeq)
                    state.retries += 1
                    state.lastTransientRefusal = rejection
                    emit(.retrying(rejection, after: delay))
                }
                syncReplica()
                return nil
            }
            let op = replica.receive(rejectedSeq: rejected.seq)
            if code == .answerGone {
                // Not a refusal: the server cannot answer any more (docs/design.md, 'Submit, seqs and dedup').
                emit(.answerGone(seq: rejected.seq, firstSeq: op?.firstSeq ?? rejected.seq))
                syncReplica()
                return nil
            }
            let rejection = Rejection(
                seq: rejected.seq, code: code, message: rejected.message, op: op?.op,
                firstSeq: op?.firstSeq ?? rejected.seq)
            state.rejections.append(rejection)
            if state.rejections.count > 100 { state.rejections.removeFirst(state.rejections.count - 100) }
            emit(.rejected(rejection))
            syncReplica()
            return nil
        case .presence(let presence):
            guard peerView.apply(presence) else { return nil }
            if !presence.delta || state.peers != peerView.peers {
                state.peers = peerView.peers
                emit(.presence(peerView.peers))
            }
            if state.othersCount != peerView.othersCount {
                state.othersCount = peerView.othersCount
                emit(.othersCount(peerView.othersCount))
            }
            return nil
        case .error(let error):
            let code = ErrorCode(error.code)
            emit(.serverError(code: code, message: error.message))
            if let code { state.lastServerError = .refused(code, error.message) }
            if code == .unauthorized && state.refusal == nil {
                // Always followed by 4401 (a token refused, expired or revoked): keep its reason.
                state.refusal = .refused(.unauthorized, error.message)
            } else if phase == .awaitingWelcome, let code, Self.refusesForGood(code) {
                // The server refused the Hello itself: retrying would be refused the same way.
                state.refusal = .refused(code, error.message)
            }
            return nil
        case .history(let answer):
            emit(.history(answer))
            if let waiter = historyWaiters.removeValue(forKey: answer.id) {
                if answer.hasError {
                    waiter.continuation.resume(
                        returning: .failure(.queryFailed(ErrorCode(answer.error.code), answer.error.message)))
                } else {
                    waiter.continuation.resume(returning: .success(answer))
                }
            }
            return nil
        case nil:
            return protocolTrouble("a server message with no field set")
        }
    }

    private mutating func receivedWelcome(_ welcome: Tabsync_V1_Welcome) -> (code: UInt16, reason: String)? {
        guard phase == .awaitingWelcome else { return protocolTrouble("a second welcome") }
        if welcome.recovered {
            guard welcome.epoch == replica.confirmed.epoch else {
                return resync("resumed with epoch \(welcome.epoch), had \(replica.confirmed.epoch)")
            }
            guard let missed = try? welcome.missedOps() else { return resync("a missed op without a kind") }
            for op in missed {
                switch replica.receive(applied: op) {
                case .applied: emit(.applied(op))
                case .stale: break
                case .gap(let expected, let got): return resync("resume gap: expected version \(expected), got \(got)")
                case .diverged(let error): return resync("a missed op does not fit: \(error)")
                }
            }
            replica.resume(lastSeq: welcome.lastSeq)
        } else {
            var snapshot = Workspace(welcome.snapshot)
            if snapshot.id.isEmpty {
                snapshot = Workspace(
                    id: workspaceId, version: snapshot.version, epoch: welcome.epoch, tabs: snapshot.tabs,
                    activeTabId: snapshot.activeTabId, editable: snapshot.editable)
            }
            if snapshot.epoch.isEmpty { snapshot.epoch = welcome.epoch }
            let held = replica.confirmed
            // Another history: a new epoch, or this one below a version already seen (a store
            // brought back from a backup). Taken whole, never spliced (docs/design.md, "Durability").
            if welcomedOnce, snapshot.epoch != held.epoch || snapshot.version < held.version {
                replica.replaceHistory(with: snapshot, lastSeq: welcome.lastSeq)
                let replacement = HistoryReplacement(
                    previousEpoch: held.epoch, previousVersion: held.version, epoch: snapshot.epoch, version: snapshot.version)
                state.historyReplacements += 1
                state.lastHistoryReplacement = replacement
                emit(.historyReplaced(replacement))
            } else {
                replica.reset(to: snapshot, lastSeq: welcome.lastSeq)
            }
        }
        if welcome.hasLimits {
            let limits = Limits(welcome.limits)
            replica.limits = limits
            state.limits = limits
        }
        phase = .ready
        wantSnapshot = false
        state.sessionId = welcome.sessionID
        state.welcomes += 1
        if !welcomedOnce {
            welcomedOnce = true
            for op in unsequenced { replica.submit(op) }
            unsequenced = []
        }
        // Resubmit everything still pending, in seq order, as it was first sent: those at or below
        // lastSeq too, whose answers were lost with a connection; the server answers each again
        // (its Applied, its Rejected, or ANSWER_GONE), and only that answer settles it.
        clearOutbox()
        for pending in replica.pending {
            send(.init(submit: .init(seq: pending.seq, baseVersion: pending.baseVersion, op: pending.op)))
        }
        // Then the held ones, as new ops: a new connection is as good a moment to try as any.
        for released in replica.releaseHeld() {
            send(.init(submit: .init(seq: released.seq, baseVersion: released.baseVersion, op: released.op)))
        }
        retryRequest = nil
        if let focusTabId { send(.init(focus: .init(tabId: focusTabId))) }
        sendWaitingQueries()
        emit(.welcomed(recovered: welcome.recovered))
        setConnection(.ready)
        syncReplica()
        return nil
    }

    private mutating func receivedApplied(_ op: AppliedOp) -> (code: UInt16, reason: String)? {
        switch replica.receive(applied: op) {
        case .applied:
            if op.clientId == clientId { transientRefusals = 0 }
            emit(.applied(op))
            syncReplica()
            return nil
        case .stale:
            // An answer again to a seq sent again: it may settle a pending op.
            syncReplica()
            return nil
        case .gap(let expected, let got):
            // Resume from the last version held: the server sends what is missing.
            reconnectNow = true
            state.resyncs += 1
            emit(.resync(reason: "version gap: expected \(expected), got \(got)"))
            return (1000, "version gap")
        case .diverged(let error):
            return resync("an applied op does not fit: \(error)")
        }
    }

    private mutating func resync(_ reason: String) -> (code: UInt16, reason: String)? {
        requestResync(reason: reason)
        return (1000, "resync")
    }

    private mutating func protocolTrouble(_ reason: String) -> (code: UInt16, reason: String)? {
        requestResync(reason: "protocol error from the server: \(reason)")
        return (1002, "protocol error")
    }

    /// Refusals of an op that may pass when it is sent again: the store could not take it
    /// (`UNAVAILABLE`, nothing consumed) or the connection was over its rate (`RATE_LIMITED`).
    static func isTransient(_ code: ErrorCode) -> Bool {
        code == .unavailable || code == .rateLimited
    }

    /// The delay after which the held ops should go again, once per request (the loop arms a timer).
    mutating func takeRetryRequest() -> Duration? {
        defer { retryRequest = nil }
        return retryRequest
    }

    /// The retry timer fired: sends every held op again as a new op with a new seq, when welcomed
    /// (else the next `Welcome` does). True when frames were queued.
    mutating func releaseHeld() -> Bool {
        guard phase == .ready, !closing, !replica.held.isEmpty else { return false }
        for released in replica.releaseHeld() {
            send(.init(submit: .init(seq: released.seq, baseVersion: released.baseVersion, op: released.op)))
        }
        syncReplica()
        return true
    }

    /// Error codes answering a `Hello` that no retry can fix. `PROTOCOL_ERROR` is not one: a
    /// correct client meets it only when the server timed its Hello out under load.
    static func refusesForGood(_ code: ErrorCode) -> Bool {
        switch code {
        case .invalidArgument, .unauthorized, .notPermitted: true
        default: false
        }
    }

    /// Close codes after which the client does not reconnect: 4401 (token refused or revoked), 4408
    /// (kicked by an operator), 4410 (the workspace was deleted).
    static let endsForGood: Set<UInt16> = [4401, 4408, 4410]

    /// The connection ended; returns what the loop does next.
    mutating func closed(_ ending: ConnectionEnding) -> LoopNext {
        clearOutbox()
        state.lastEnding = ending
        emit(.disconnected(ending))
        // Their answers cannot come any more; queries not sent yet wait for the next Welcome.
        failHistory(sentOnly: true, .connectionLost(ending.reason.isEmpty ? "\(ending.kind)" : ending.reason))
        if closing || state.refusal != nil || Self.endsForGood.contains(ending.code ?? 0) {
            if state.refusal == nil, ending.code == 4401, !closing {
                state.refusal = .refused(.unauthorized, ending.reason)
            } else if state.refusal == nil, !closing, let code = ending.code, code != 4401 {
                state.refusal = .ended(code: code, reason: ending.reason)
            }
            phase = .closed
            setConnection(.closed)
            failHistory(sentOnly: false, state.refusal ?? .closed)
            return .stop
        }
        let refusedBeforeWelcome = phase == .awaitingWelcome && ending.kind == .closedByServer
        phase = .disconnected
        if reconnectNow {
            reconnectNow = false
            return .reconnectNow
        }
        return refusedBeforeWelcome ? .retryAfterRefusal : .retry
    }

    /// The loop stopped or the connection was forgotten: closed for good.
    mutating func finished() {
        phase = .closed
        setConnection(.closed)
        failHistory(sentOnly: false, state.refusal ?? .closed)
    }
}
