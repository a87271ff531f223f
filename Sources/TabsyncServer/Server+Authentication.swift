import CLibwebsockets
import Foundation
import Logging
import TabsyncCore
import TabsyncProto

extension Server {
    /// Who waits for a token check: a session's Hello, or an HTTP request (by their loop ids).
    enum AuthRequest: Sendable {
        case session(Int)
        case http(Int)
    }
}

/// Access control on the event loop: tokens checked off the loop, roles applied to every Submit,
/// sessions ended at their token's `exp`. Active only when `configuration.accessTokens` is set.
///
/// Guarantees:
/// - The loop never awaits a check: the token goes to the verifier's own thread (jwt-kit's key
///   collection is an actor) and the result comes back through the inbox (``Server/Task/authenticated(_:_:)``); the
///   session waits meanwhile (phase `authenticating`, its messages deferred), as it waits for a load.
/// - A refused token is answered before anything of the workspace is looked at: the answer and its
///   timing do not depend on whether the workspace exists (`Error UNAUTHORIZED`, close 4401; HTTP 401).
/// - A session ends with 4401 at its token's `exp` (its lws timer), and every Submit checks `exp` again.
/// - No token text reaches a log line or a message: only ``AuthError``'s fixed descriptions do.
extension Server.Loop {
    /// A well-formed Hello with access control on: checks its token, then enters the workspace.
    func authenticate(_ session: Session, hello: Session.Hello, token: String) {
        guard let verifier = configuration.accessTokens else { return }
        session.phase = .authenticating(hello)
        verifyOffLoop(token, verifier, for: .session(session.id))
    }

    /// Runs the check on a task; its result comes back to ``authenticated(_:_:)`` on the loop.
    private func verifyOffLoop(_ token: String, _ verifier: TokenVerifier, for request: Server.AuthRequest) {
        let inbox = server.inbox
        verifier.verify(token, now: Date()) { result in inbox.post(.authenticated(request, result)) }
    }

    /// A token check finished.
    func authenticated(_ request: Server.AuthRequest, _ result: Result<AccessGrant, AuthError>) {
        switch request {
        case .session(let id):
            sessionAuthenticated(id, result)
        case .http(let id):
            snapshotRequestAuthorized(id, result)
        }
    }

    private func sessionAuthenticated(_ id: Int, _ result: Result<AccessGrant, AuthError>) {
        guard let session = sessions[id], session.closing == nil,
              case .authenticating(var hello) = session.phase else { return }
        let grant: AccessGrant
        switch result {
        case .failure(let error):
            unauthorized(session, error)
            return
        case .success(let granted):
            grant = granted
        }
        guard grant.admits(hello.workspaceId) else {
            unauthorized(session, .wrongWorkspace)
            return
        }
        guard !grant.isExpired(at: Date()) else {
            unauthorized(session, .expired)
            return
        }
        session.access = grant
        hello.clientName = grant.subject  // presence shows who the token names, not a chosen name
        armExpiryTimer(session)
        logger.info("session authenticated", metadata: [
            "session": "\(session.id)", "sub": "\(grant.subject)", "role": "\(grant.role.rawValue)",
            "workspace": "\(hello.workspaceId)",
        ])
        enter(session, hello: hello)
    }

    /// Sends `Error UNAUTHORIZED` (the refusal's fixed description) and closes 4401.
    func unauthorized(_ session: Session, _ error: AuthError) {
        logger.info("session unauthorized", metadata: [
            "session": "\(session.id)", "code": "\(error.code.wireName)", "reason": "\(error)",
        ])
        send(Tabsync_V1_ServerMessage(error: Tabsync_V1_Error(code: error.code, message: error.description)), to: session)
        close(session, code: error.closeCode ?? 4401, reason: error.code.wireName)
    }

    // MARK: expiry

    /// Sets the session's lws timer to its token's `exp` (the hello timer is done by then).
    private func armExpiryTimer(_ session: Session) {
        guard let access = session.access else { return }
        let seconds = max(0, access.expiresAt.timeIntervalSinceNow)
        // Past about 100 years lws' microsecond arithmetic is not worth trusting: the Submit check holds anyway.
        let usecs = Int64(min(seconds, 3_153_600_000) * 1_000_000) + 1_000
        lws_set_timer_usecs(session.wsi, usecs)
    }

    /// The session's lws timer fired (after its Hello): ends it 4401 if its token has expired,
    /// else arms the timer again (it fired early).
    func checkTokenExpiry(_ session: Session) {
        guard let access = session.access, session.closing == nil else { return }
        if access.isExpired(at: Date()) {
            unauthorized(session, .expired)
        } else {
            armExpiryTimer(session)
        }
    }

    // MARK: roles

    /// True when the session may submit this op (always, without access control). Otherwise a
    /// token past `exp` ends the session 4401, and an op its role does not allow is refused
    /// `NOT_PERMITTED` at once: nothing is sequenced, stored or consumed (the seq neither), though
    /// it still spends a rate token (sustained refusals close 1008 like any flood).
    func permits(_ submit: Tabsync_V1_Submit, from session: Session) -> Bool {
        guard configuration.accessTokens != nil else { return true }
        guard let access = session.access, !access.isExpired(at: Date()) else {
            unauthorized(session, .expired)
            return false
        }
        if access.role.permits(submit.op.kind) { return true }
        let now = clock.now
        if !session.takeToken(rate: limits.maxOpsPerSecond, now: now) { strike(session, now: now) }
        let refusal = AuthError.notPermitted(role: access.role, op: submit.hasOp ? Self.opName(submit.op.kind) : "an empty op")
        reject(session, seq: submit.seq, code: refusal.code, message: refusal.description)
        return false
    }

    static func opName(_ kind: Tabsync_V1_Op.OneOf_Kind?) -> String {
        switch kind {
        case .add?: "add"
        case .open?: "open"
        case .move?: "move"
        case .remove?: "remove"
        case .activate?: "activate"
        case .update?: "update"
        case .setEditable?: "setEditable"
        case .replace?: "replace"
        case .rekey?: "rekey"
        case nil: "an empty op"
        }
    }

    // MARK: HTTP

    /// `GET /v1/workspaces/{id}` with access control on: `Authorization: Bearer TOKEN` for that
    /// workspace, else 401 (the same answer whether or not the workspace exists or the id is valid).
    /// Nil: answered later, once the token is checked (and the workspace loaded).
    func authorizeSnapshotRequest(_ id: String, wsi: OpaquePointer, user: UnsafeMutableRawPointer?) -> HTTPResponse? {
        guard let verifier = configuration.accessTokens, let user else { return .unauthorized }
        guard let token = Self.bearerToken(wsi) else { return .unauthorized }
        let requestId = makeId()
        user.storeBytes(of: requestId, as: Int.self)
        pendingHTTP[requestId] = PendingHTTP(wsi: wsi, workspaceId: id, response: nil, authorizing: true)
        verifyOffLoop(token, verifier, for: .http(requestId))
        return nil
    }

    private func snapshotRequestAuthorized(_ requestId: Int, _ result: Result<AccessGrant, AuthError>) {
        guard let pending = pendingHTTP[requestId], pending.authorizing else { return }  // the client left
        let id = pending.workspaceId
        var response: HTTPResponse?
        switch result {
        case .success(let grant) where grant.admits(id) && !grant.isExpired(at: Date()):
            if Validation.isValidWorkspaceId(id) {
                pendingHTTP[requestId] = nil
                response = snapshotOrLoad(id, wsi: pending.wsi, user: lws_wsi_user(pending.wsi))
                if response == nil { return }  // waits for the load (a new pending entry)
            } else {
                response = .notFound
            }
        case .success:
            logger.info("http unauthorized", metadata: ["reason": "\(AuthError.wrongWorkspace)"])
            response = .unauthorized
        case .failure(let error):
            logger.info("http unauthorized", metadata: ["reason": "\(error)"])
            response = .unauthorized
        }
        pendingHTTP[requestId] = PendingHTTP(wsi: pending.wsi, workspaceId: id, response: response)
        lws_callback_on_writable(pending.wsi)
    }

    /// The token of an `Authorization: Bearer TOKEN` header, nil when there is none.
    static func bearerToken(_ wsi: OpaquePointer) -> String? {
        let length = Int(lws_hdr_total_length(wsi, WSI_TOKEN_HTTP_AUTHORIZATION))
        guard length > 0, length <= 8192 else { return nil }
        var buffer = [CChar](repeating: 0, count: length + 1)
        guard lws_hdr_copy(wsi, &buffer, Int32(buffer.count), WSI_TOKEN_HTTP_AUTHORIZATION) >= 0 else { return nil }
        let value = String(nulTerminated: buffer)
        let scheme = "bearer "
        guard value.lowercased().hasPrefix(scheme) else { return nil }
        let token = value.dropFirst(scheme.count).trimmingCharacters(in: " \t")
        return token.isEmpty ? nil : token
    }
}

extension HTTPResponse {
    /// No valid token for this workspace (missing, invalid, expired or for another workspace).
    static let unauthorized = HTTPResponse(status: 401, body: "unauthorized\n")
}
