import Foundation
import TabsyncCore
import TabsyncProto

/// Access control: tokens checked by the driver off the loop, roles applied to every Submit,
/// sessions ended at their token's `exp`. Active only when ``ServerCore/Settings/accessControl``.
///
/// Guarantees:
/// - A refused token is answered before anything of the workspace is looked at: the answer does
///   not depend on whether the workspace exists (`Error UNAUTHORIZED`, close 4401; HTTP 401).
/// - A session ends with 4401 at its token's `exp` (its deadline), and every Submit checks `exp` again.
/// - No token text reaches a log line or a message: only ``AuthError``'s fixed descriptions do.
extension ServerCore {
    /// A token check finished.
    mutating func tokenVerified(_ request: AuthRequest, _ result: Result<AccessGrant, AuthError>) {
        switch request {
        case .session(let id): sessionAuthenticated(id, result)
        case .http(let id): snapshotRequestAuthorized(id, result)
        case .admin(let id): adminAuthorized(id, result)
        }
    }

    private mutating func sessionAuthenticated(_ id: ConnectionID, _ result: Result<AccessGrant, AuthError>) {
        guard let session = sessions[id], session.closing == nil, case .authenticating(var hello) = session.phase else { return }
        let grant: AccessGrant
        switch result {
        case .failure(let error):
            return unauthorized(id, error)
        case .success(let granted):
            grant = granted
        }
        guard grant.admits(hello.workspaceId) else { return unauthorized(id, .wrongWorkspace) }
        guard !grant.isExpired(at: wallNow) else { return unauthorized(id, .expired) }
        guard !admin.revocations.revokes(grant) else { return unauthorized(id, .revoked) }
        if settings.quotas.countsSubjects {
            let open = quotas.connectionsBySubject[grant.subject, default: 0]
            if let limit = settings.quotas.maxConnectionsPerSubject, open >= limit {
                return overQuota(id, "\(grant.subject) already has \(open) sessions: the limit per sub is \(limit) (--max-connections-per-sub)")
            }
            quotas.connectionsBySubject[grant.subject] = open + 1
            sessions[id]!.quotaSubject = grant.subject
        }
        sessions[id]!.access = grant
        hello.clientName = grant.subject  // presence shows who the token names, not a chosen name
        armExpiryTimer(id)
        logger.info("session authenticated", metadata: [
            "session": "\(id)", "sub": "\(grant.subject)", "role": "\(grant.role.rawValue)", "workspace": "\(hello.workspaceId)",
        ])
        enter(id, hello: hello)
    }

    /// Sends `Error UNAUTHORIZED` (the refusal's fixed description) and closes 4401.
    mutating func unauthorized(_ id: ConnectionID, _ error: AuthError) {
        logger.info("session unauthorized", metadata: ["session": "\(id)", "code": "\(error.code.wireName)", "reason": "\(error)"])
        send(Tabsync_V1_ServerMessage(error: Tabsync_V1_Error(code: error.code, message: error.description)), to: id)
        close(id, .unauthorized(error.code))
    }

    /// Sets the session's deadline to its token's `exp`.
    private mutating func armExpiryTimer(_ id: ConnectionID) {
        guard let access = sessions[id]?.access else { return }
        let seconds = max(0, access.expiresAt.timeIntervalSince(wallNow))
        // Past about 100 years the timer is not worth trusting: the Submit check holds anyway.
        deadlines.set(id, .session, now + .milliseconds(Int64(min(seconds, 3_153_600_000) * 1000) + 1))
    }

    /// The session's deadline came after its Hello: ends it 4401 if its token has expired, else
    /// sets it again (the wall clock ran slower than the core's).
    mutating func checkTokenExpiry(_ id: ConnectionID) {
        guard let access = sessions[id]?.access, sessions[id]?.closing == nil else { return }
        if access.isExpired(at: wallNow) {
            unauthorized(id, .expired)
        } else {
            armExpiryTimer(id)
        }
    }

    /// True when the session may submit this op (always, without access control). Otherwise a
    /// token past `exp` ends the session 4401, and an op its role does not allow is refused
    /// `NOT_PERMITTED` at once: nothing is sequenced, stored or consumed (the seq neither), though it
    /// still spends a rate token (sustained refusals close 1008 like any flood).
    mutating func permits(_ submit: Tabsync_V1_Submit, from id: ConnectionID) -> Bool {
        guard settings.accessControl else { return true }
        guard let access = sessions[id]?.access, !access.isExpired(at: wallNow) else {
            unauthorized(id, .expired)
            return false
        }
        if access.role.permits(submit.op.kind) { return true }
        let abusive = !sessions[id]!.takeToken(rate: settings.limits.maxOpsPerSecond, now: now) && strike(id)
        let refusal = AuthError.notPermitted(role: access.role, op: submit.hasOp ? Self.opName(submit.op.kind) : "an empty op")
        reject(id, seq: submit.seq, code: refusal.code, message: refusal.description)
        // After the refusal that tipped it, as for any flood (ServerCore+Sessions.swift `submit`).
        if abusive {
            logger.warning("rate limit abuse closed", metadata: ["session": "\(id)"])
            close(id, .rateLimitAbuse)
        }
        return false
    }

    package static func opName(_ kind: Tabsync_V1_Op.OneOf_Kind?) -> String {
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
        case .restore?: "restore"
        case .reopen?: "reopen"
        case .group?: "group"
        case .ungroup?: "ungroup"
        case .updateGroup?: "updateGroup"
        case nil: "an empty op"
        }
    }
}
