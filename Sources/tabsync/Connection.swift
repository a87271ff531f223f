import TabsyncClient
import TabsyncCore
import TabsyncProto

/// One command's connection to its workspace: connect, wait for the first `Welcome`, submit ops
/// and wait for their answers. Every failure becomes a ``CommandError`` with a clear message.
///
/// A refusal that passes (the store is down or restarting: `UNAVAILABLE`, or close 1013 before the
/// `Welcome`; the rate limit: `RATE_LIMITED`) is not an answer: the client sends the op again with
/// back-off (docs/design.md, 'Transient refusals are retried') for up to `retryFor`, and only a
/// permanent refusal exits 3.
struct Connection {
    let client: TabsyncClient
    let server: String
    let timeout: Duration
    let retryFor: Duration

    /// Connects and waits for the first `Welcome`.
    /// - Throws: `.badArgument` for a bad URL or workspace id (naming the option or variable it came
    ///   from), `.unreachable` when the first attempt fails or nothing answers in time, `.refused` when the server refuses the `Hello`.
    static func open(
        _ options: ConnectionOptions, workspace: String? = nil,
        onEvent: (@Sendable (ClientEvent) -> Void)? = nil
    ) async throws(CommandError) -> Connection {
        let (server, url) = try options.resolvedServer()
        let workspaceId = try options.resolvedWorkspace(workspace)
        let token = try options.resolvedToken()
        let client: TabsyncClient
        do {
            // TLS: a private CA from --ca-file, or no verification at all (--insecure-skip-verify).
            var loopOptions = ClientLoop.Options()
            loopOptions.caFile = options.resolvedCAFile
            if options.insecureSkipVerify && url.usesTLS {
                printError("tabsync: warning: --insecure-skip-verify: the server's certificate is not checked (for tests only)")
            }
            client = try TabsyncClient(.init(
                url: url, workspace: workspaceId, clientId: options.clientId ?? ClientIdentity.stableId(),
                clientName: String(options.resolvedName.prefix(64)), token: token,
                allowSelfSignedCertificates: options.insecureSkipVerify, onEvent: onEvent),
                loop: try ClientLoop(options: loopOptions))
        } catch {
            throw .failed("\(error)")
        }
        let connection = Connection(
            client: client, server: server, timeout: .seconds(options.timeout), retryFor: .seconds(options.retryFor))
        client.start()
        let state: ClientState
        // A server that cannot give a Welcome now (1013: its store is unavailable; 1012: it is
        // restarting) is tried again, with the client's back-off, until `retryFor` has passed.
        let retryUntil = ContinuousClock.now + connection.retryFor
        do {
            state = try await client.waitUntil(timeout: connection.timeout + connection.retryFor) { state in
                guard state.welcomes == 0, state.refusal == nil else { return true }
                guard let ending = state.lastEnding, ending.kind != .closedLocally else { return false }
                return !(Self.passes(ending) && ContinuousClock.now < retryUntil)
            }
        } catch {
            client.close()
            throw connection.failure(error, state: client.state)
        }
        if state.welcomes == 0 {
            client.close()
            throw connection.failure(nil, state: state)
        }
        return connection
    }

    /// The exit-3 error for a refusal or an operator's ending; nil for other client errors.
    static func commandError(_ error: ClientError) -> CommandError? {
        switch error {
        case .refused(let code, let message): .refused(code: code.wireName, message: message)
        case .ended(4408, let reason): .refused(code: "KICKED", message: reason)
        case .ended(4410, let reason): .refused(code: "WORKSPACE_DELETED", message: reason)
        case .ended(let code, let reason): .refused(code: "CLOSED_\(code)", message: reason)
        default: nil
        }
    }

    /// Whether a connection that ended so may be welcomed if tried again soon.
    static func passes(_ ending: ConnectionEnding) -> Bool {
        ending.kind == .closedByServer && [1012, 1013, 4429].contains(ending.code)
    }

    /// The command error for a connection that did not get welcomed.
    private func failure(_ error: ClientError?, state: ClientState) -> CommandError {
        if let refusal = state.refusal ?? error, let refused = Self.commandError(refusal) { return refused }
        if let ending = state.lastEnding, ending.code == 4429, let error = state.lastServerError,
           let refused = Self.commandError(error) {
            return refused  // over an operator's quota for all of --retry-for
        }
        if let ending = state.lastEnding {
            let why = ending.reason.isEmpty ? "\(ending.kind)" : ending.reason
            return .unreachable("cannot reach the server at \(server): \(why)")
        }
        if case .timedOut = error {
            return .unreachable("no answer from the server at \(server) within \(timeout)")
        }
        return .unreachable("cannot reach the server at \(server)")
    }

    /// What the workspace looks like now (with this client's pending ops).
    var workspace: Workspace { client.state.optimistic }

    /// Submits `op` and waits until the server applies or refuses it for good; a refusal that
    /// passes is retried for up to `retryFor` from the first one.
    /// - Returns: the state right after the answer.
    @discardableResult
    func submit(_ op: Operation) async throws(CommandError) -> ClientState {
        guard let seq = client.submit(op) else { throw .failed("the connection closed before the op was sent") }
        let answered: @Sendable (ClientState) -> Bool = { state in
            !state.isWaiting(firstSeq: seq) || state.refusal != nil
        }
        let held: @Sendable (ClientState) -> Bool = { state in state.held.contains { $0.firstSeq == seq } }
        var state: ClientState
        do {
            state = try await client.waitUntil(timeout: timeout) { answered($0) || held($0) }
        } catch {
            throw .unreachable("no answer from the server at \(server) within \(timeout) (\(error))")
        }
        if !answered(state) {
            // Refused for now: the client sends it again with back-off until a permanent answer.
            let giveUpAt = ContinuousClock.now + retryFor
            do {
                state = try await client.waitUntil(timeout: retryFor + timeout) { state in
                    answered(state) || (held(state) && ContinuousClock.now >= giveUpAt)
                }
            } catch {
                throw .unreachable("no answer from the server at \(server) while retrying (\(error))")
            }
            if !answered(state) {
                let why = state.lastTransientRefusal.map { "\($0.code?.wireName ?? "?"): \($0.message)" } ?? "?"
                throw .unreachable(
                    "the server could not take the change for \(retryFor) (\(why)); it was not applied (--retry-for sets how long to keep trying)")
            }
        }
        if let rejection = state.rejections.last(where: { $0.firstSeq == seq }) {
            throw .refused(code: rejection.code?.wireName ?? "UNKNOWN", message: rejection.message)
        }
        if let refusal = state.refusal, let refused = Self.commandError(refusal) { throw refused }
        return state
    }

    /// Asks a history query and waits for its answer. A store that cannot be read now
    /// (`UNAVAILABLE`) or a connection lost on the way is tried again with back-off for up to
    /// `retryFor`.
    /// - Throws: `.refused` (exit 3) when the server cannot answer (outside retention, no such
    ///   version); `.unreachable` when no answer comes.
    func history(_ query: Tabsync_V1_HistoryQuery) async throws(CommandError) -> Tabsync_V1_HistoryAnswer {
        let giveUpAt = ContinuousClock.now + retryFor
        var attempt = 0
        while true {
            let why: String
            do throws(ClientError) {
                return try await client.history(query, timeout: timeout)
            } catch .queryFailed(let code, let message) where code == .unavailable {
                why = "UNAVAILABLE: \(message)"
            } catch .queryFailed(let code, let message) {
                throw .refused(code: code?.wireName ?? "UNKNOWN", message: message)
            } catch .connectionLost(let reason) {
                why = reason
            } catch {
                if let refused = Self.commandError(error) { throw refused }
                throw .unreachable("no answer from the server at \(server) (\(error))")
            }
            attempt += 1
            let delay = Backoff(initial: .milliseconds(200), maximum: .seconds(2)).delay(attempt: attempt)
            guard ContinuousClock.now + delay < giveUpAt else {
                throw .unreachable(
                    "the server could not answer for \(retryFor) (\(why)) (--retry-for sets how long to keep trying)")
            }
            try? await Task.sleep(for: delay)
        }
    }

    func close() {
        client.close()
    }

    /// Opens a connection (as ``open(_:workspace:onEvent:)``), runs `body` with it and closes it,
    /// whatever `body` returns or throws.
    @discardableResult
    static func with<T>(_ options: ConnectionOptions, _ body: (Connection) async throws -> T) async throws -> T {
        let connection = try await open(options)
        defer { connection.close() }
        return try await body(connection)
    }
}
