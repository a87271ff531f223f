import Foundation
import Logging
import TabsyncCore
import TabsyncProto
import TabsyncStore

/// Every decision the server makes, as one value without sockets, threads or clocks of its own.
///
/// The driver (`TabsyncServer`'s event loop) turns what happens into ``Event``s, calls
/// ``handle(_:now:into:)`` with the time, and carries out the ``Action``s it gets back, in order.
/// Whatever an action causes (a store answer, a token check, a closed socket) comes back as a later
/// event. The pieces inside, one job each: the per-connection ``SessionMachine``, the
/// ``WorkspaceTable`` of ``WorkspaceHub`` values, the ``CommitPipeline``, catch-up on other
/// nodes' commits (``CatchUpState``), presence (``PresenceRoster``), and ``CloseReason``.
///
/// Guarantees:
/// - An event is handled whole before the next one starts: work one event causes for later (a
///   session's messages deferred until its `Welcome`) runs after everything the event itself
///   decided, in the order it was caused. So the actions of one call are in the order the rules
///   say, by construction: effects of the commit pipeline go out in pipeline order, and a
///   `Welcome` never goes out ahead of the `Applied`s that came before it in the pipeline.
/// - Nothing of a workspace reaches a session before it is durable (docs/design.md, "Durability"):
///   `Applied`, `Rejected`, repeated answers and `Welcome` are pipeline effects.
/// - The same events at the same instants give the same actions (no clock reads; the one random
///   pause, before a check for a newer holder, comes from ``Settings/jitterSeed``); the
///   deterministic simulation relies on it.
package struct ServerCore {
    package let settings: Settings
    let logger: Logger
    /// Counters and histograms for `/metrics` (the driver keeps its own, ``DriverMetrics``).
    package var metrics = Metrics()

    var sessions: [ConnectionID: SessionMachine] = [:]
    /// Every workspace in memory or being read, with its clocks and marks.
    var workspaces: WorkspaceTable
    var commits = CommitPipeline()
    var catchUps = CatchUpState()
    /// When this node beats next in the holder registry (nil: at the next timeout).
    var nextHeartbeat: Instant?
    /// Each session's Hello timeout or token expiry, and its keepalive (ServerCore+Deadlines.swift,
    /// ServerCore+Keepalive.swift): entries go with their session.
    var deadlines: DeadlineTable
    /// The instant the driver sends ``Event/timeout`` at, nil for none: the earliest of the core's
    /// deadlines as of the last event handled (ServerCore+Deadlines.swift; docs/architecture.md,
    /// "Core and driver").
    package private(set) var nextDeadline: Instant?
    /// The core's random pauses, from ``Settings/jitterSeed``.
    var jitter: Jitter
    /// Snapshot requests not answered yet: waiting for a token check or a load.
    var pendingHTTP: [RequestID: PendingHTTP] = [:]
    /// Open change feeds (ServerCore+Feed.swift), and which follow each workspace.
    var feeds: [RequestID: Feed] = [:]
    var feedsByWorkspace: [String: Set<RequestID>] = [:]
    /// HTTP writes whose ops are in the pipeline (ServerCore+Write.swift), by request id.
    var httpWrites: [RequestID: HTTPWrite] = [:]
    var shutdown: ShutdownState = .running
    /// The admin API's state: revocations in force, the admin log's cursor, deletes under way.
    var admin = AdminState()
    /// Counts for the operators' quotas.
    var quotas = QuotaState()
    /// History reads out at the store, and who waits for each (ServerCore+History.swift).
    var historyReads = HistoryReads()
    /// Sessions closed while the pipeline still owed them an answer: each one's close goes out
    /// once its answers have (``close(_:_:grace:)``).
    var heldCloses: [ConnectionID: Duration] = [:]

    /// The instant of the event being handled, and the wall clock at one instant.
    private var clock: Clock
    /// What the current event decided and caused, until ``handle(_:now:into:)`` hands it over.
    private var outbox = Outbox()

    /// The instant of the event being handled.
    var now: Instant { clock.now }

    /// The core's time: the instant of the event being handled, never going back, and the wall
    /// clock at one instant, so tokens' `exp` is read against `now` without a clock read.
    private struct Clock {
        private(set) var now: Instant
        let wallOrigin: (instant: Instant, date: Date)

        mutating func advance(to instant: Instant) { now = max(now, instant) }

        var wallNow: Date { wallOrigin.date.addingTimeInterval((now - wallOrigin.instant).seconds) }
    }

    /// Actions decided while handling the current event, and work it caused for after itself (see
    /// the guarantees).
    private struct Outbox {
        var actions: [Action] = []
        var followUps: [FollowUp] = []
    }

    enum FollowUp {
        /// Handle, in order, the messages a session sent before its `Welcome` went out.
        case deferredMessages(ConnectionID)
    }

    enum ShutdownState: Equatable {
        case running
        /// Not accepting; waiting for commits to finish (until `closeBy`), then closing every
        /// session 1001 (`closed`), then stopping once none is left (or at `finishBy`).
        case draining(since: Instant, closeBy: Instant, finishBy: Instant, closed: Bool)
        case stopped
    }

    /// A snapshot request waiting for its token check (`authorizing`) or its workspace's load.
    struct PendingHTTP {
        var workspaceId: String
        var authorizing: Bool
        /// A history read (`/history`, `/closed`, `?version=`, `?at=`); nil: the snapshot.
        var history: HistoryRead? = nil
        /// The change feed (`/events`): how it starts; nil: not a feed.
        var feed: FeedStart? = nil
        /// The feed's grant, once its token was checked (with access control).
        var grant: AccessGrant? = nil
        /// An HTTP write (`POST …/ops`); nil: not a write.
        var write: WriteStart? = nil
    }

    /// `now`: the instant the core starts at; `wallClock`: the wall-clock time at that instant.
    package init(settings: Settings, logger: Logger, now: Instant, wallClock: Date = Date()) {
        self.settings = settings
        self.logger = logger
        clock = Clock(now: now, wallOrigin: (now, wallClock))
        workspaces = WorkspaceTable(now: now)
        deadlines = DeadlineTable(origin: now)
        jitter = Jitter(seed: settings.jitterSeed)
        commits.linger.limit = settings.commitLinger
        adoptAdminLog(settings.adminLog)
        nextDeadline = earliestDeadline()  // a first heartbeat or poll is due at once
    }

    /// Handles one event at `now` and appends what to do, in order, to `actions`.
    package mutating func handle(_ event: Event, now: Instant, into actions: inout [Action]) {
        clock.advance(to: now)
        if case .pong(let id) = event {
            // A pong decides nothing and moves at most its session's keepalive deadline
            // (ServerCore+Keepalive.swift): the other deadlines need not be looked at.
            if let moved = heard(id), nextDeadline.map({ moved < $0 }) ?? true { nextDeadline = moved }
            return
        }
        dispatch(event)
        while !outbox.followUps.isEmpty {
            let next = outbox.followUps.removeFirst()
            switch next {
            case .deferredMessages(let id): handleDeferred(id)
            }
        }
        closeAnswered()
        nextDeadline = earliestDeadline()
        actions.append(contentsOf: outbox.actions)
        outbox.actions.removeAll(keepingCapacity: true)
    }

    private mutating func dispatch(_ event: Event) {
        switch event {
        case .connected(let id, let format, let echo, let workspace):
            connected(id, format: format, echo: echo, pathWorkspace: workspace)
        case .frame(let id, let bytes, let binary):
            heard(id)
            received(id, bytes, binary: binary)
        case .pong(let id):
            heard(id)
        case .frameTooBig(let id):
            close(id, .messageTooBig(limit: settings.limits.maxFrameBytes))
        case .disconnected(let id):
            disconnected(id)
        case .backlogExceeded(let id):
            closeSlowReader(id)
        case .timeout:
            timeout()
        case .loaded(let workspaceId, let result):
            workspaceLoaded(workspaceId, result: result)
        case .committed(let batch, let result, let duration):
            commitFinished(batch: batch, result: result, duration: duration)
        case .caughtUp(let reads, let duration):
            caughtUp(reads, duration: duration)
        case .polled(let result, let duration):
            polled(result, duration: duration)
        case .heard(let feedEvent):
            heard(feedEvent)
        case .holdersChecked(let workspaceId, let newerHolder):
            holdersChecked(workspaceId, newerHolder: newerHolder)
        case .held(let workspaceId, let result):
            held(workspaceId, result)
        case .heartbeatFinished(let error):
            if let error {
                metrics.heartbeatsFailed += 1
                logger.warning("holder registry heartbeat failed", metadata: ["error": "\(error)"])
            } else {
                metrics.heartbeatsStored += 1
            }
        case .tokenVerified(let request, let result):
            tokenVerified(request, result)
        case .snapshotRequested(let id, let workspaceId, let token):
            snapshotRequested(id, workspaceId: workspaceId, bearerToken: token)
        case .historyRequested(let id, let workspaceId, let resource, let query, let token):
            historyRequested(id, workspaceId: workspaceId, resource: resource, query: query, bearerToken: token)
        case .historyRead(let call, let result):
            historyRead(call, result)
        case .adminRequested(let id, let request, let token):
            adminRequested(id, request, bearerToken: token)
        case .adminAnswered(let call, let result):
            adminAnswered(call, result)
        case .feedRequested(let requestId, let workspaceId, let after, let token):
            feedRequested(requestId, workspaceId: workspaceId, after: after, bearerToken: token)
        case .writeRequested(let requestId, let workspaceId, let key, let body, let token):
            writeRequested(requestId, workspaceId: workspaceId, key: key, body: body, bearerToken: token)
        case .feedBacklogExceeded(let id):
            metrics.feedsCut += 1
            endFeed(id)
        case .requestGone(let id):
            endFeed(id, tellDriver: false)
            pendingHTTP[id] = nil
            historyReads.forgetRequest(id)
            admin.authorizing[id] = nil
            admin.listing[id] = nil
        case .shutdown:
            beginShutdown()
        }
    }

    // MARK: what the driver may ask

    /// True from the start of a graceful stop: new sessions are closed 1001 and `/healthz` answers
    /// 503 `draining` (``health``).
    package var isDraining: Bool { shutdown != .running }

    /// Open WebSocket sessions.
    package var sessionCount: Int { sessions.count }

    /// Workspaces held in memory (loading, loaded or reloading).
    package var workspacesInMemory: Int { workspaces.count }

    /// The live state of a workspace in memory (it runs ahead of the store), for checks from
    /// outside the core (the wire fuzzer); nil when not in memory.
    package func liveWorkspace(_ id: String) -> Workspace? { workspaces.hub(id)?.live.workspace }

    /// The wall-clock time at `now`.
    var wallNow: Date { clock.wallNow }

    // MARK: actions

    /// Queues one message to one open session, or to one whose close waits for its answers.
    mutating func send(_ message: Tabsync_V1_ServerMessage, to id: ConnectionID) {
        if writeAnswered(id, message) { return }
        guard let session = sessions[id], session.closing == nil || heldCloses[id] != nil else { return }
        outbox.actions.append(.send(id, message))
    }

    /// Queues one message to every member of a hub.
    mutating func broadcast(_ message: Tabsync_V1_ServerMessage, to members: [ConnectionID]) {
        guard !members.isEmpty else { return }
        outbox.actions.append(.broadcast(members, message))
    }

    /// Closes a session for `reason` (once; later closes of the same session are ignored). The
    /// session takes nothing more from now on; when the commit pipeline still owes it an answer
    /// (an `Applied`, `Rejected` or repeated answer to a seq it consumed) and the close flushes the
    /// queue, the close waits until those answers went out (the server sends a pending `Rejected`
    /// before any close: docs/design.md, "Close codes"; ``CloseReason/waitsForAnswers`` says which
    /// closes wait).
    mutating func close(_ id: ConnectionID, _ reason: CloseReason, grace: Duration = .seconds(5)) {
        if writeUnanswerable(id) { return }
        guard sessions[id] != nil, sessions[id]!.closing == nil else { return }
        sessions[id]!.closing = reason
        if reason.waitsForAnswers, commits.owesAnswer(to: id) {
            heldCloses[id] = grace
            return
        }
        outbox.actions.append(.close(id, reason, grace: grace))
    }

    /// Sends each held close whose session the pipeline owes nothing any more, after the answers
    /// this event released (so they go out before it).
    private mutating func closeAnswered() {
        guard !heldCloses.isEmpty else { return }
        for (id, grace) in heldCloses.sorted(by: { $0.key < $1.key }) where !commits.owesAnswer(to: id) {
            heldCloses[id] = nil
            guard let reason = sessions[id]?.closing else { continue }
            outbox.actions.append(.close(id, reason, grace: grace))
        }
    }

    mutating func emit(_ action: Action) {
        outbox.actions.append(action)
    }

    mutating func followUp(_ work: FollowUp) {
        outbox.followUps.append(work)
    }

    /// Sends `Error{code, message}`, then closes 4400 (a protocol violation or a refused Hello):
    /// `.protocolViolation(code)` unless `reason` names a more precise one.
    mutating func refuse(_ id: ConnectionID, code: ErrorCode, message: String, closing reason: CloseReason? = nil) {
        logger.info("session refused", metadata: ["session": "\(id)", "code": "\(code.wireName)", "message": "\(message)"])
        send(Tabsync_V1_ServerMessage(error: Tabsync_V1_Error(code: code, message: message)), to: id)
        close(id, reason ?? .protocolViolation(code))
    }

    /// Sends `Rejected` at once (nothing was consumed, so nothing waits for the store).
    mutating func reject(_ id: ConnectionID, seq: UInt64, code: ErrorCode, message: String) {
        metrics.opsRejected[code, default: 0] += 1
        send(Tabsync_V1_ServerMessage(rejected: Tabsync_V1_Rejected(seq: seq, code: code, message: message)), to: id)
    }

    // MARK: time

    /// Every ``HolderRegistrySettings/heartbeatInterval`` while running: a heartbeat in the holder
    /// registry (the first at the first timeout). A stopping node beats no more; it leaves the registry
    /// once its stop is over.
    mutating func beatIfDue() {
        guard let registry = settings.holderRegistry, shutdown == .running else { return }
        if let next = nextHeartbeat, now < next { return }
        nextHeartbeat = now + registry.heartbeatInterval
        emit(.heartbeat)
    }

    // MARK: shutdown

    private mutating func beginShutdown() {
        guard shutdown == .running else { return }
        logger.notice("shutting down", metadata: ["sessions": "\(sessions.count)"])
        // Commits drain for at most 70% of the timeout; the close frames get the rest but 10%.
        let timeout = max(settings.shutdownTimeout, .milliseconds(100))
        shutdown = .draining(since: now, closeBy: now + timeout * 0.7, finishBy: now + timeout * 0.9, closed: false)
        startCommitIfIdle()  // a lingering batch goes now
        continueShutdown()
    }

    /// While draining (every timeout, commit and close): once nothing is being stored (or at
    /// `closeBy`), closes every session 1001; once none is left (or at `finishBy`), stops.
    mutating func continueShutdown() {
        guard case .draining(let since, let closeBy, let finishBy, let closed) = shutdown else { return }
        if !closed && (commits.isIdle || now >= closeBy) {
            shutdown = .draining(since: since, closeBy: closeBy, finishBy: finishBy, closed: true)
            logger.notice("closing every session 1001", metadata: [
                "sessions": "\(sessions.count)", "since_stop": "\(since.duration(to: now))",
                "commits_idle": "\(commits.isIdle)",
            ])
            for id in sessions.keys.sorted() { close(id, .shuttingDown) }
            for id in feeds.keys.sorted() { endFeed(id) }
        }
        guard case .draining(_, _, _, true) = shutdown else { return }
        if sessions.isEmpty || now >= finishBy {
            shutdown = .stopped
            emit(.stop)
        }
    }
}
