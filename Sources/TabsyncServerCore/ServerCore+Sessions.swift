import TabsyncCore
import TabsyncProto
import TabsyncStore

/// Sessions: a connection opens, says Hello, is welcomed into its workspace, submits ops, leaves.
/// Where a Welcome is decided: ``ServerCore/join(_:to:)`` makes it, the pipeline releases it
/// (``ServerCore/welcomed(_:_:workspaceId:)``).
extension ServerCore {
    mutating func connected(_ id: ConnectionID, format: WireFormat, echo: Bool, pathWorkspace: String? = nil) {
        sessions[id] = SessionMachine(
            id: id, format: format, echo: echo, opsPerSecond: settings.limits.maxOpsPerSecond, now: now,
            pathWorkspace: pathWorkspace)
        if !echo { deadlines.set(id, .session, now + settings.helloTimeout) }
        startKeepalive(id)
        if isDraining { close(id, .shuttingDown) }
    }

    mutating func disconnected(_ id: ConnectionID) {
        guard let session = sessions.removeValue(forKey: id) else { return }
        heldCloses[id] = nil
        deadlines.removeAll(id)
        releaseQuotas(session)
        sessionLeft(session)
        continueShutdown()
    }

    /// The session's deadline came: the Hello timeout before its Hello, its token's expiry after.
    mutating func timerFired(_ id: ConnectionID) {
        guard let session = sessions[id], session.closing == nil else { return }
        if case .awaitingHello = session.phase {
            refuse(id, code: .protocolError, message: "no Hello within \(settings.helloTimeout)")
        } else {
            checkTokenExpiry(id)
        }
    }

    /// A session whose send queue would pass its bound: closed 1013 at once (its queue dropped) and
    /// out of its workspace now rather than when the connection ends.
    mutating func closeSlowReader(_ id: ConnectionID) {
        guard let session = sessions[id], session.closing == nil else { return }
        metrics.slowConsumerCloses += 1
        logger.warning("slow consumer closed", metadata: ["session": "\(id)", "client": "\(session.hello?.clientId ?? "")"])
        close(id, .slowReader, grace: settings.slowCloseGrace)
        sessionLeft(session)
    }

    // MARK: receiving

    /// One whole client message.
    mutating func received(_ id: ConnectionID, _ bytes: [UInt8], binary: Bool) {
        guard let session = sessions[id], session.closing == nil else { return }
        if session.echo {
            emit(.echo(id, bytes, binary: binary))
            return
        }
        guard binary != session.format.usesTextFrames else {
            close(id, .wrongFrameType(binary: binary, subprotocol: session.format.subprotocol))
            return
        }
        let message: Tabsync_V1_ClientMessage
        do {
            message = try session.format.decodeClientMessage(bytes)
        } catch {
            logger.info("undecodable frame", metadata: ["session": "\(id)", "error": "\(error.reason.prefix(200))"])
            close(id, .undecodableFrame)
            return
        }
        handle(message, from: id)
    }

    /// Routes one decoded message through the session's machine and acts on the route.
    mutating func handle(_ message: Tabsync_V1_ClientMessage, from id: ConnectionID) {
        guard let route = sessions[id]?.route(message) else { return }
        switch route {
        case .violation(let code, let text):
            refuse(id, code: code, message: text)
        case .hello(let hello):
            accept(hello, from: id)
        case .deferred, .nothing:
            break
        case .submit(let submit, let hello):
            self.submit(submit, from: id, hello: hello)
        case .history(let query, let hello):
            historyQuery(query, from: id, workspaceId: hello.workspaceId)
        case .refocused:
            guard let workspaceId = sessions[id]?.workspaceId,
                  workspaces.withHub(workspaceId, { $0.presence.refocused(id) }) != nil else { return }
            workspaces.presenceChanged(workspaceId)
        }
    }

    /// The messages a session sent before its `Welcome`, in order (a follow-up of the Welcome).
    mutating func handleDeferred(_ id: ConnectionID) {
        guard let deferred = sessions[id]?.deferred, !deferred.isEmpty else { return }
        sessions[id]!.deferred = []
        for message in deferred { handle(message, from: id) }
    }

    // MARK: Hello

    /// Checks a Hello and joins the session to its workspace (once its token checks out and the
    /// workspace is loaded).
    private mutating func accept(_ message: Tabsync_V1_Hello, from id: ConnectionID) {
        if let problem = SessionMachine.helloProblem(message) {
            refuse(id, code: .invalidArgument, message: problem)
            return
        }
        // Before the token and the workspace are looked at: the answer says nothing of either
        // (docs/design.md, "Close codes").
        if let path = sessions[id]?.pathWorkspace, path != message.workspace {
            refuse(
                id, code: .protocolError,
                message: "Hello names workspace \"\(message.workspace)\"; the URL path names \"\(path)\"",
                closing: .workspaceNotInPath(path: path, hello: message.workspace))
            return
        }
        deadlines.set(id, .session, nil)  // the Hello came in time
        let hello = SessionMachine.Hello(
            workspaceId: message.workspace, clientId: message.clientID, clientName: message.clientName,
            lastVersion: message.lastVersion, epoch: message.epoch, presenceDeltas: message.presenceDeltas)
        if settings.accessControl {
            sessions[id]!.phase = .authenticating(hello)
            emit(.verifyToken(.session(id), message.token))
        } else {
            enter(id, hello: hello)
        }
    }

    /// Joins an accepted session to its workspace: at once when loaded, else once it is.
    mutating func enter(_ id: ConnectionID, hello: SessionMachine.Hello) {
        if isBeingDeleted(hello.workspaceId) {
            return refuse(
                id, code: .unavailable, message: "the workspace is being deleted; try again",
                closing: .storeUnavailable)
        }
        guard admitToWorkspace(id, hello.workspaceId) else { return }
        sessions[id]!.phase = .loading(hello)
        if workspaces.loadedHub(hello.workspaceId) != nil {
            join(id, to: hello.workspaceId)
        } else {
            waitForLoad(id, workspaceId: hello.workspaceId)
        }
    }

    // MARK: joining and leaving

    /// Queues the session's `Welcome` (a snapshot, or the missed ops when resuming) as of the live
    /// state; it goes out once everything before it is durable, and the session joins then. The
    /// workspace is loaded (its callers check).
    mutating func join(_ id: ConnectionID, to workspaceId: String) {
        guard let session = sessions[id], case .loading(let hello) = session.phase,
              let hub = workspaces.hub(workspaceId), !hub.welcoming.contains(id) else { return }
        workspaces.withHub(workspaceId) { _ = $0.welcoming.insert(id) }
        workspaces.inUse(workspaceId)  // no longer idle
        let welcome = makeWelcome(id, hello, hub: hub)
        commits.append(nil, .welcome(workspaceId: workspaceId, session: id, welcome: welcome), at: now)
        startCommitIfIdle()
        // A shared store: a client resuming from a version this node has not read yet (it saw it
        // on another node) tells of a commit; catch up now rather than at the next poll.
        if hub.stored != nil, hello.epoch == hub.live.workspace.epoch, hello.lastVersion > hub.live.workspace.version {
            heardOf(workspaceId, version: hello.lastVersion)
        }
    }

    /// The `Welcome` as of the hub's live state: the missed ops when the session resumes and the log
    /// still holds at most `maxResumeOps` of them, else a snapshot. Its limits name the per-user op
    /// rate when the session counts against one (a token's sub under `--max-ops-per-second-per-sub`).
    func makeWelcome(_ id: ConnectionID, _ hello: SessionMachine.Hello, hub: WorkspaceHub) -> Tabsync_V1_Welcome {
        let state = hub.live
        let limits = settings.limits
        let lastSeq = state.lastSeq(of: hello.clientId)
        var welcome: Tabsync_V1_Welcome
        if hello.lastVersion > 0, hello.epoch == state.workspace.epoch,
           let missed = state.missed(after: hello.lastVersion), missed.count <= limits.maxResumeOps {
            welcome = Tabsync_V1_Welcome(
                sessionId: String(id), clientId: hello.clientId, lastSeq: lastSeq, limits: limits,
                epoch: state.workspace.epoch, missed: missed)
        } else {
            welcome = Tabsync_V1_Welcome(
                sessionId: String(id), clientId: hello.clientId, lastSeq: lastSeq, limits: limits, snapshot: state.workspace)
        }
        if let perUser = settings.quotas.maxOpsPerSecondPerSubject, sessions[id]?.access?.subject != nil {
            welcome.limits.maxOpsPerSecondPerUser = UInt32(clamping: perUser)
        }
        return welcome
    }

    /// The `Welcome` is durable: it goes out, the session joins the broadcasts and presence, and its
    /// early messages are handled after everything this event decided (a follow-up).
    mutating func welcomed(_ id: ConnectionID, _ welcome: Tabsync_V1_Welcome, workspaceId: String) {
        guard workspaces.withHub(workspaceId, { $0.welcoming.remove(id) }) != nil else { return }
        guard let session = sessions[id], session.closing == nil, case .loading(let hello) = session.phase else { return }
        sessions[id]!.phase = .joined(hello)
        send(Tabsync_V1_ServerMessage(welcome: welcome), to: id)
        workspaces.withHub(workspaceId) { $0.admit(id) }
        workspaces.presenceChanged(workspaceId)
        if !session.deferred.isEmpty { followUp(.deferredMessages(id)) }
    }

    /// A session went away (or was closed as a slow reader): it leaves its workspace.
    mutating func sessionLeft(_ session: SessionMachine) {
        guard let workspaceId = session.workspaceId,
              let dismissed = workspaces.withHub(workspaceId, { hub -> Bool in
                  hub.welcoming.remove(session.id)
                  return hub.dismiss(session.id)
              })
        else { return }
        if dismissed { workspaces.presenceChanged(workspaceId) }
        unloadIfIdle(workspaceId)
    }

    // MARK: Submit

    /// A Submit from a joined session: checked against its role and rate, then sequenced.
    private mutating func submit(_ submit: Tabsync_V1_Submit, from id: ConnectionID, hello: SessionMachine.Hello) {
        guard permits(submit, from: id) else { return }
        guard let phase = workspaces.phase(hello.workspaceId) else { return }
        switch phase {
        case .loaded:
            break
        case .reloading:
            reject(id, seq: submit.seq, code: .unavailable, message: "the store failed; the workspace is reloading")
            return
        case .loading:
            return
        }
        // A stopping server takes no new op and refuses none: the Submit is left unanswered and
        // consumes nothing, so the client sends it again, with the same seq, to the next server
        // (a refusal here would make the client drop an op the user made).
        guard !isDraining else { return }
        // RATE_LIMITED and an op that does not decode consume the seq like any refusal
        // (docs/design.md, "Protocol").
        let request: SubmitInput.Request
        var abusive = false
        if !sessions[id]!.takeToken(rate: settings.limits.maxOpsPerSecond, now: now) {
            request = .refuse(.rateLimited("over \(settings.limits.maxOpsPerSecond) ops per second"))
            abusive = strike(id)
        } else if let refusal = subjectRateRefusal(id) {
            request = .refuse(refusal)
            abusive = strike(id)
        } else {
            do throws(ConversionError) {
                guard submit.hasOp else { throw .opKindMissing }
                request = .op(try Operation(submit.op))
            } catch {
                request = .refuse(error.opError)
            }
        }
        var input = SubmitInput(
            clientId: hello.clientId, seq: submit.seq, baseVersion: submit.baseVersion, request: request, receivedAt: now)
        input.author = sessions[id]?.access?.subject ?? hello.clientName
        if case .op(let op) = request, op.needsHistory, awaitHistory(input, op, from: id, workspaceId: hello.workspaceId) { return }
        sequence(input, from: id, workspaceId: hello.workspaceId)
        // After the refusal that tipped it is queued: the close waits for that answer.
        if abusive {
            logger.warning("rate limit abuse closed", metadata: ["session": "\(id)"])
            close(id, .rateLimitAbuse)
        }
        startCommitIfIdle()
    }

    /// Runs a Submit through the workspace's live sequencer and queues what it became in the commit
    /// pipeline: its record and its effect, with the Submit itself for re-sequencing. Seq 0 is
    /// refused at once (nothing consumed). The caller starts the batch.
    mutating func sequence(_ input: SubmitInput, from id: ConnectionID, workspaceId: String) {
        guard let (outcome, record) = workspaces.withHub(workspaceId, { hub -> (Sequencer.Outcome, CommitRecord?) in
            let outcome: Sequencer.Outcome
            switch input.request {
            case .op(let op):
                outcome = hub.live.submit(clientId: input.clientId, seq: input.seq, baseVersion: input.baseVersion, op: op)
            case .refuse(let error):
                outcome = hub.live.refuse(clientId: input.clientId, seq: input.seq, error: error)
            }
            let record = CommitRecord(
                workspaceId: workspaceId, clientId: input.clientId, seq: input.seq, outcome: outcome, after: hub.live,
                author: input.author)
            return (outcome, record)
        }) else { return }
        switch outcome {
        case .applied(let ops):
            commits.append(
                record, .broadcast(workspaceId: workspaceId, submitter: id, ops: ops, receivedAt: input.receivedAt),
                input: input, at: now)
        case .rejected(let error) where input.seq == 0:
            reject(id, seq: input.seq, code: error.code, message: error.message)
        case .rejected(let error):
            commits.append(
                record, .reject(workspaceId: workspaceId, session: id, seq: input.seq, error: error), input: input, at: now)
        case .answeredAgain(let answer):
            commits.append(nil, .answer(workspaceId: workspaceId, session: id, answer: answer), input: input, at: now)
        case .ignored:
            // The seq was consumed and its answer has left the sequencer's memory (its op left the
            // log, or its refusal the refusals kept): it is answered `Rejected ANSWER_GONE`, in
            // order behind the answers queued before it, so the client settles it by its Welcome's
            // state (docs/design.md, "Submit, seqs and dedup"). A node behind its store meets it
            // too, for a seq it took as new and learned another node consumed (simulation seed 2901).
            commits.append(nil, .answerGone(workspaceId: workspaceId, session: id, seq: input.seq), input: input, at: now)
        }
    }

    /// Counts a second with rate-limited ops; true once `rateLimitStrikes` ran in a row: the
    /// caller closes the session 1008 once the refusal is queued.
    mutating func strike(_ id: ConnectionID) -> Bool {
        sessions[id]!.strike(now: now, limit: settings.rateLimitStrikes)
    }
}
