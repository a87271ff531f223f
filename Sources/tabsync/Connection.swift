import TabsyncClient
import TabsyncCore

/// One command's connection to its workspace: connect, wait for the first `Welcome`, submit ops
/// and wait for their answers. Every failure becomes a ``CommandError`` with a clear message.
struct Connection {
    let client: TabsyncClient
    let server: String
    let timeout: Duration

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
        let connection = Connection(client: client, server: server, timeout: .seconds(options.timeout))
        client.start()
        let state: ClientState
        do {
            state = try await client.waitUntil(timeout: connection.timeout) { state in
                state.welcomes > 0 || state.refusal != nil
                    || (state.lastEnding != nil && state.lastEnding?.kind != .closedLocally)
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

    /// The command error for a connection that did not get welcomed.
    private func failure(_ error: ClientError?, state: ClientState) -> CommandError {
        if let refusal = state.refusal ?? error, case .refused(let code, let message) = refusal {
            return .refused(code: code.wireName, message: message)
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

    /// Submits `op` and waits until the server applies or refuses it.
    /// - Returns: the state right after the answer.
    @discardableResult
    func submit(_ op: Operation) async throws(CommandError) -> ClientState {
        guard let seq = client.submit(op) else { throw .failed("the connection closed before the op was sent") }
        let state: ClientState
        do {
            state = try await client.waitUntil(timeout: timeout) { state in
                state.rejections.contains { $0.seq == seq }
                    || !state.pending.contains { $0.seq == seq }
                    || state.refusal != nil
            }
        } catch {
            throw .unreachable("no answer from the server at \(server) within \(timeout) (\(error))")
        }
        if let rejection = state.rejections.last(where: { $0.seq == seq }) {
            throw .refused(code: rejection.code?.wireName ?? "UNKNOWN", message: rejection.message)
        }
        if let refusal = state.refusal, case .refused(let code, let message) = refusal {
            throw .refused(code: code.wireName, message: message)
        }
        return state
    }

    func close() {
        client.close()
    }
}
