import CLibwebsockets
import Logging
import TabsyncCore
import TabsyncProto
import TabsyncStore

extension Server.Loop {
    /// Most messages a session may send while its workspace loads; more is a protocol error.
    static var maxDeferredMessages: Int { 1_000 }

    /// One whole client message from a session.
    func received(_ session: Session, _ bytes: [UInt8]) {
        let message: Tabsync_V1_ClientMessage
        do {
            message = try session.format.decodeClientMessage(bytes)
        } catch {
            close(session, code: error.closeCode, reason: "undecodable frame", flush: false)
            logger.info("undecodable frame", metadata: ["session": "\(session.id)", "error": "\(error.reason.prefix(200))"])
            return
        }
        handle(message, from: session)
    }

    private func handle(_ message: Tabsync_V1_ClientMessage, from session: Session) {
        guard session.closing == nil else { return }
        switch (message.message, session.phase) {
        case (nil, _):
            refuse(session, code: .protocolError, message: "a ClientMessage with none of its fields set")
        case (.hello(let hello), .awaitingHello):
            accept(hello, from: session)
        case (.hello, _):
            refuse(session, code: .protocolError, message: "a second Hello")
        case (_, .awaitingHello):
            refuse(session, code: .protocolError, message: "a message before Hello")
        case (_, .loading), (_, .authenticating):
            if session.deferred.count >= Self.maxDeferredMessages {
                refuse(session, code: .protocolError, message: "too many messages before Welcome")
            } else {
                session.deferred.append(message)
            }
        case (.submit(let submit), .joined(let hello)):
            self.submit(submit, from: session, hello: hello)
        case (.focus(let focus), .joined(var hello)):
            guard focus.tabID.isEmpty || Validation.isValidTabId(focus.tabID), focus.tabID != hello.focusTabId else { return }
            hello.focusTabId = focus.tabID
            session.phase = .joined(hello)
            if let hub = workspaces[hello.workspaceId]?.hub {
                hub.presence.refocused(session.id)
                markPresenceDirty(hub)
            }
        }
    }

    // MARK: Hello

    /// Checks a Hello and joins the session to its workspace (once it is loaded).
    private func accept(_ message: Tabsync_V1_Hello, from session: Session) {
        if let problem = Self.helloProblem(message) {
            refuse(session, code: .invalidArgument, message: problem)
            return
        }
        lws_set_timer_usecs(session.wsi, -1)  // the Hello came in time: cancel the hello timer
        let hello = Session.Hello(
            workspaceId: message.workspace, clientId: message.clientID, clientName: message.clientName,
            lastVersion: message.lastVersion, epoch: message.epoch, presenceDeltas: message.presenceDeltas)
        if configuration.accessTokens != nil {
            authenticate(session, hello: hello, token: message.token)  // enters once the token checks out
        } else {
            enter(session, hello: hello)
        }
    }

    /// Joins an accepted session to its workspace: at once when loaded, else once it is.
    func enter(_ session: Session, hello: Session.Hello) {
        session.phase = .loading(hello)
        if case .loaded(let hub)? = workspaces[hello.workspaceId] {
            join(session, to: hub)
        } else {
            waitForLoad(session, workspaceId: hello.workspaceId)
        }
    }

    /// What is wrong with a Hello, or nil.
    static func helloProblem(_ hello: Tabsync_V1_Hello) -> String? {
        if !Validation.isValidWorkspaceId(hello.workspace) {
            return "hello.workspace must be 1-64 chars of [A-Za-z0-9._-]"
        }
        if !Validation.isValidClientId(hello.clientID) {
            return "hello.clientId must be 1-64 chars of [A-Za-z0-9._:-]"
        }
        if hello.clientName.unicodeScalars.count > Validation.maxClientNameLength {
            return "hello.clientName is over \(Validation.maxClientNameLength) chars"
        }
        if !Validation.isCleanText(hello.clientName) {
            return "hello.clientName has control characters"
        }
        if hello.epoch.utf8.count > 256 || !Validation.isCleanText(hello.epoch) {
            return "hello.epoch is not an epoch this server gives"
        }
        return nil
    }

    // MARK: joining and leaving

    /// Queues `Welcome` (a snapshot, or the missed ops when resuming) as of the live state; it goes
    /// out once everything before it is durable, and the session joins the broadcasts then.
    /// `hub` is loaded, not reloading (its callers check).
    func join(_ session: Session, to hub: WorkspaceHub) {
        guard case .loading(let hello) = session.phase, !hub.welcoming.contains(session.id) else { return }
        hub.welcoming.insert(session.id)
        idleSince[hub.id] = nil  // no longer idle: the clock starts again when the last session leaves
        enqueue(nil, effect: .welcome(workspaceId: hub.id, session: session.id, welcome: makeWelcome(session, hello, hub: hub)))
        // A shared store: a client resuming from a version this node has not read yet (it saw it on
        // another node) tells of a commit; catch up now rather than at the next poll.
        if hub.stored != nil, hello.epoch == hub.live.workspace.epoch, hello.lastVersion > hub.live.workspace.version {
            heard(hub.id, version: hello.lastVersion)
        }
    }

    /// The `Welcome` for a session as of the hub's live state: the missed ops when it resumes and
    /// the log still holds them, else a snapshot.
    func makeWelcome(_ session: Session, _ hello: Session.Hello, hub: WorkspaceHub) -> Tabsync_V1_Welcome {
        let state = hub.live
        let lastSeq = state.lastSeq(of: hello.clientId)
        if hello.lastVersion > 0, hello.epoch == state.workspace.epoch,
           let missed = state.missed(after: hello.lastVersion), missed.count <= limits.maxResumeOps {
            return Tabsync_V1_Welcome(
                sessionId: String(session.id), clientId: hello.clientId, lastSeq: lastSeq, limits: limits,
                epoch: state.workspace.epoch, missed: missed)
        }
        return Tabsync_V1_Welcome(
            sessionId: String(session.id), clientId: hello.clientId, lastSeq: lastSeq, limits: limits,
            snapshot: state.workspace)
    }

    /// The Welcome is out: the session receives broadcasts and its early messages are handled.
    func welcomed(_ session: Session, _ welcome: Tabsync_V1_Welcome, hub: WorkspaceHub) {
        hub.welcoming.remove(session.id)
        guard case .loading(let hello) = session.phase, session.closing == nil else { return }
        session.phase = .joined(hello)
        send(Tabsync_V1_ServerMessage(welcome: welcome), to: session)
        hub.sessions[session.id] = session
        hub.presence.join(session.id)
        markPresenceDirty(hub)
        let deferred = session.deferred
        session.deferred = []
        for message in deferred { handle(message, from: session) }
    }

    /// A session went away: leave its workspace (presence changes).
    func sessionLeft(_ session: Session) {
        guard let id = session.workspaceId, let hub = workspaces[id]?.hub else { return }
        if hub.sessions.removeValue(forKey: session.id) != nil {
            hub.presence.leave(session.id)
            markPresenceDirty(hub)
        }
        hub.welcoming.remove(session.id)
        unloadIfIdle(hub.id)
    }

    // MARK: Submit

    private func submit(_ submit: Tabsync_V1_Submit, from session: Session, hello: Session.Hello) {
        guard permits(submit, from: session) else { return }
        let hub: WorkspaceHub
        switch workspaces[hello.workspaceId] {
        case .loaded(let loaded)?:
            hub = loaded
        case .reloading?:
            reject(session, seq: submit.seq, code: .unavailable, message: "the store failed; the workspace is reloading")
            return
        case .loading?, nil:
            return
        }
        let now = clock.now
        if case .draining = shutdown {
            reject(session, seq: submit.seq, code: .unavailable, message: "the server is shutting down")
            return
        }
        // RATE_LIMITED and an op that does not decode consume the seq like any refusal (DESIGN.md).
        let request: SubmitInput.Request
        if !session.takeToken(rate: limits.maxOpsPerSecond, now: now) {
            request = .refuse(.rateLimited("over \(limits.maxOpsPerSecond) ops per second"))
            strike(session, now: now)
        } else {
            do throws(ConversionError) {
                guard submit.hasOp else { throw .opKindMissing }
                request = .op(try Operation(submit.op))
            } catch {
                request = .refuse(error.opError)
            }
        }
        let input = SubmitInput(
            clientId: hello.clientId, seq: submit.seq, baseVersion: submit.baseVersion, request: request, receivedAt: now)
        sequence(input, from: session.id, hub: hub)
        startCommitIfIdle()
    }

    /// Runs a Submit through the workspace's live sequencer and queues what it became in the commit
    /// pipeline: its record (what a restart needs, the rekeys' old keys included) and its effect,
    /// with the Submit itself for re-sequencing. Seq 0 is refused at once (nothing consumed). The
    /// caller starts the batch (``startCommitIfIdle()``).
    func sequence(_ input: SubmitInput, from sessionId: Int, hub: WorkspaceHub) {
        let outcome: Sequencer.Outcome
        switch input.request {
        case .op(let op):
            outcome = hub.live.submit(clientId: input.clientId, seq: input.seq, baseVersion: input.baseVersion, op: op)
        case .refuse(let error):
            outcome = hub.live.refuse(clientId: input.clientId, seq: input.seq, error: error)
        }
        let record = CommitRecord(
            workspaceId: hub.id, clientId: input.clientId, seq: input.seq, outcome: outcome, after: hub.live)
        switch outcome {
        case .applied(let ops):
            commits.append(
                record, .broadcast(workspaceId: hub.id, submitter: sessionId, ops: ops, receivedAt: input.receivedAt),
                input: input)
        case .rejected(let error) where input.seq == 0:
            if let session = sessions[sessionId] { reject(session, seq: input.seq, code: error.code, message: error.message) }
        case .rejected(let error):
            commits.append(record, .reject(workspaceId: hub.id, session: sessionId, seq: input.seq, error: error), input: input)
        case .answeredAgain(let answer):
            commits.append(nil, .answer(workspaceId: hub.id, session: sessionId, answer: answer), input: input)
        case .ignored:
            break
        }
    }

    /// Counts consecutive seconds with rate-limited ops; `rateLimitStrikes` of them close 1008.
    func strike(_ session: Session, now: ContinuousClock.Instant) {
        let second = (now - session.openedAt).components.seconds
        if second == session.lastStrikeSecond { return }
        session.rateStrikes = second == session.lastStrikeSecond + 1 ? session.rateStrikes + 1 : 1
        session.lastStrikeSecond = second
        if session.rateStrikes >= configuration.rateLimitStrikes {
            logger.warning("rate limit abuse closed", metadata: ["session": "\(session.id)"])
            close(session, code: 1008, reason: "sustained op rate over the limit")
        }
    }

    /// Sends `Rejected` at once (nothing was consumed, so nothing waits for the store).
    func reject(_ session: Session, seq: UInt64, code: ErrorCode, message: String) {
        metrics.opsRejected[code, default: 0] += 1
        send(Tabsync_V1_ServerMessage(rejected: Tabsync_V1_Rejected(seq: seq, code: code, message: message)), to: session)
    }
}
