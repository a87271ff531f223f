import Foundation
import TabsyncCore
import TabsyncStore

/// One call of the admin API (docs/operating.md, "The admin API"), parsed from its method, path,
/// query and body without looking at anything else: a request that does not parse is answered
/// 400/404/405 with a line that says why, before its token is looked at.
package enum AdminRequest: Sendable, Equatable {
    /// `GET /v1/admin/workspaces[?after=ID&limit=N]`
    case listWorkspaces(after: String?, limit: Int)
    /// `GET /v1/admin/workspaces/{id}/sessions`
    case listSessions(workspace: String)
    /// `DELETE /v1/admin/workspaces/{id}`
    case deleteWorkspace(String)
    /// `POST /v1/admin/kick` `{"session": ID}` or `{"sub": SUB}`
    case kick(KickTarget)
    /// `POST /v1/admin/revocations` `{"jti": ID}` or `{"sub": SUB, "issuedBefore": RFC3339}`
    case revoke(AdminCommand)
    /// `GET /v1/admin/revocations`
    case listRevocations
    /// `POST /v1/admin/webhooks` `{"url": U, "workspaces": GLOB, "secret": "whsec_…"}`
    case addWebhook(WebhookSpec)
    /// `GET /v1/admin/webhooks`
    case listWebhooks
    /// `DELETE /v1/admin/webhooks/{id}`
    case removeWebhook(String)
    /// `POST /v1/admin/webhooks/{id}/enable`: a disabled hook sends again from its cursor.
    case enableWebhook(String)

    /// A request that does not parse, with the response that says why.
    package struct Refusal: Error, Equatable {
        package var response: HTTPResponse
        init(_ response: HTTPResponse) { self.response = response }
    }

    package enum KickTarget: Sendable, Equatable {
        case session(String)
        case subject(String)
    }

    /// The workspace the request is about, when it names one (a scoped admin token must grant it).
    package var workspace: String? {
        switch self {
        case .listSessions(let id), .deleteWorkspace(let id): id
        default: nil
        }
    }

    /// The largest request body read (a kick, a revocation or a webhook is a line of JSON).
    package static let maxBodyBytes = 8 * 1024
    /// The most workspaces one list answer names.
    package static let maxListLimit = 1_000

    /// The request, or the response refusing it.
    package static func parse(method: String, path: String, query: String, body: [UInt8]) -> Result<AdminRequest, Refusal> {
        let parts = path.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        // "", "v1", "admin", ...
        guard parts.count >= 4, parts[0].isEmpty, parts[1] == "v1", parts[2] == "admin" else { return .failure(Refusal(.notFound)) }
        let rest = Array(parts.dropFirst(3))
        switch (method, rest.count, rest.first) {
        case ("GET", 1, "workspaces"):
            let params = queryItems(query)
            var limit = 100
            if let text = params["limit"] {
                guard let value = Int(text), (1...maxListLimit).contains(value) else {
                    return .failure(Refusal(badRequest("limit must be a whole number from 1 to \(maxListLimit)")))
                }
                limit = value
            }
            if let after = params["after"], !Validation.isValidWorkspaceId(after) {
                return .failure(Refusal(badRequest("after must be a workspace id")))
            }
            return .success(.listWorkspaces(after: params["after"], limit: limit))
        case ("GET", 3, "workspaces") where rest[2] == "sessions":
            guard Validation.isValidWorkspaceId(rest[1]) else { return .failure(Refusal(badRequest("not a workspace id"))) }
            return .success(.listSessions(workspace: rest[1]))
        case ("DELETE", 2, "workspaces"):
            guard Validation.isValidWorkspaceId(rest[1]) else { return .failure(Refusal(badRequest("not a workspace id"))) }
            return .success(.deleteWorkspace(rest[1]))
        case ("POST", 1, "kick"):
            guard let object = jsonObject(body) else { return .failure(Refusal(badRequest("the body must be a JSON object"))) }
            if let session = object["session"] as? String, object.count == 1, !session.isEmpty, session.count <= 128 {
                return .success(.kick(.session(session)))
            }
            if let sub = object["sub"] as? String, object.count == 1, !sub.isEmpty, sub.count <= 256 {
                return .success(.kick(.subject(sub)))
            }
            return .failure(Refusal(badRequest(#"give exactly one of {"session": ID} or {"sub": SUB}"#)))
        case ("GET", 1, "revocations"):
            return .success(.listRevocations)
        case ("POST", 1, "revocations"):
            guard let object = jsonObject(body) else { return .failure(Refusal(badRequest("the body must be a JSON object"))) }
            if let jti = object["jti"] as? String, object.count == 1, !jti.isEmpty, jti.count <= 256 {
                return .success(.revoke(.revokeToken(jti: jti)))
            }
            if let sub = object["sub"] as? String, let before = object["issuedBefore"] as? String, object.count == 2,
               !sub.isEmpty, sub.count <= 256 {
                guard let date = RFC3339.parse(before).map(Date.init(timeIntervalSince1970:)) else {
                    return .failure(Refusal(badRequest("issuedBefore must be an RFC 3339 time, e.g. 2026-11-27T18:00:00Z")))
                }
                return .success(.revoke(.revokeSubject(sub: sub, issuedBefore: date)))
            }
            return .failure(Refusal(badRequest(#"give {"jti": ID} or {"sub": SUB, "issuedBefore": RFC3339}"#)))
        case ("GET", 1, "webhooks"):
            return .success(.listWebhooks)
        case ("POST", 1, "webhooks"):
            guard let object = jsonObject(body) else { return .failure(Refusal(badRequest("the body must be a JSON object"))) }
            guard let url = object["url"] as? String, let workspaces = object["workspaces"] as? String,
                  let secret = object["secret"] as? String, object.count == 3 else {
                return .failure(Refusal(badRequest(#"give exactly {"url": URL, "workspaces": GLOB, "secret": "whsec_..."}"#)))
            }
            switch WebhookSpec.parse(url: url, workspaces: workspaces, secret: secret) {
            case .success(let spec): return .success(.addWebhook(spec))
            case .failure(let why): return .failure(Refusal(badRequest(why.description)))
            }
        case ("DELETE", 2, "webhooks"):
            guard WebhookSpec.isValidId(rest[1]) else { return .failure(Refusal(badRequest("not a webhook id (wh_ and 32 hex digits)"))) }
            return .success(.removeWebhook(rest[1]))
        case ("POST", 3, "webhooks") where rest[2] == "enable":
            guard WebhookSpec.isValidId(rest[1]) else { return .failure(Refusal(badRequest("not a webhook id (wh_ and 32 hex digits)"))) }
            return .success(.enableWebhook(rest[1]))
        case (_, 1, "workspaces"), (_, 3, "workspaces"), (_, 2, "workspaces"), (_, 1, "kick"), (_, 1, "revocations"),
             (_, 1, "webhooks"), (_, 2, "webhooks"), (_, 3, "webhooks") where rest[2] == "enable":
            return .failure(Refusal(HTTPResponse(status: 405, body: "method \(method) not allowed on \(path)\n")))
        default:
            return .failure(Refusal(.notFound))
        }
    }

    static func badRequest(_ why: String) -> HTTPResponse { HTTPResponse(status: 400, body: why + "\n") }

    private static func jsonObject(_ body: [UInt8]) -> [String: Any]? {
        guard !body.isEmpty, let value = try? JSONSerialization.jsonObject(with: Data(body)) else { return nil }
        return value as? [String: Any]
    }

    private static func queryItems(_ query: String) -> [String: String] {
        var items: [String: String] = [:]
        for pair in query.split(separator: "&") {
            let kv = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let key = kv.first else { continue }
            let value = kv.count > 1 ? String(kv[1]).removingPercentEncoding ?? String(kv[1]) : ""
            items[String(key)] = value
        }
        return items
    }
}

/// What an admin answer holds, as JSON (keys sorted, one object per line's worth).
package enum AdminJSON {
    package static func response(_ value: Any) -> HTTPResponse { response(200, value) }

    package static func response(_ status: UInt32, _ value: Any) -> HTTPResponse {
        let data = (try? JSONSerialization.data(withJSONObject: value, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data("{}".utf8)
        return HTTPResponse(status: status, contentType: "application/json", bytes: Array(data) + [0x0A])
    }

    package static func error(_ status: UInt32, _ message: String) -> HTTPResponse {
        HTTPResponse(status: status, body: message + "\n")
    }

    /// A hook as the admin API shows it: never its secret; with `failing`, its pending failed
    /// delivery (`"failing": {"workspaces", "workspace", "attempts", "since", "nextAttempt",
    /// "lastError"}`, the last error naming the `webhook-id` it failed at).
    package static func webhook(_ hook: WebhookRegistration, failing: ServerCore.WebhookFailing? = nil) -> [String: Any] {
        var object: [String: Any] = [
            "id": hook.id, "url": hook.url, "workspaces": hook.workspaces,
            "createdAt": RFC3339.format(hook.createdAt.timeIntervalSince1970), "enabled": hook.isEnabled,
        ]
        if let reason = hook.disabledReason { object["disabledReason"] = reason }
        if let at = hook.disabledAt { object["disabledAt"] = RFC3339.format(at.timeIntervalSince1970) }
        if let failing {
            let cursor = failing.cursor
            var pending: [String: Any] = [
                "workspaces": failing.workspaces, "workspace": cursor.workspace, "attempts": cursor.attempts,
            ]
            if let since = cursor.firstFailure { pending["since"] = RFC3339.format(since.timeIntervalSince1970) }
            if let next = cursor.nextAttempt { pending["nextAttempt"] = RFC3339.format(next.timeIntervalSince1970) }
            if let error = cursor.lastError { pending["lastError"] = error }
            object["failing"] = pending
        }
        return object
    }

    package static func command(_ entry: AdminEntry) -> [String: Any] {
        var object: [String: Any] = ["number": entry.number, "at": RFC3339.format(entry.at.timeIntervalSince1970)]
        switch entry.command {
        case .revokeToken(let jti): object["jti"] = jti
        case .revokeSubject(let sub, let before):
            object["sub"] = sub
            object["issuedBefore"] = RFC3339.format(before.timeIntervalSince1970)
        case .kickSession(let id): object["kick"] = ["session": id]
        case .kickSubject(let sub, let workspaces): object["kick"] = ["sub": sub, "workspaces": workspaces]
        case .deleteWorkspace(let id): object["deleted"] = id
        }
        return object
    }
}
