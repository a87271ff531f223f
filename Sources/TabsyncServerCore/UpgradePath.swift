import TabsyncCore

/// The path a WebSocket upgrade asked for (docs/design.md, "The protocol in brief"): `/`, where
/// the session's `Hello` alone names its workspace (older clients), or `/v1/workspaces/{id}/ws`,
/// where the path names it too, so that a proxy can route by workspace (docs/design.md, "Several
/// nodes and placement"), and a `Hello` naming another workspace is refused
/// (``CloseReason/workspaceNotInPath(path:hello:)``, close 4400).
///
/// Guarantees: ``parse(_:)`` is pure and total; `.workspace(id)` always holds an id that passes
/// `Validation.isValidWorkspaceId` (1–64 characters of `A–Z a–z 0–9 . _ -`). The path it reads is
/// the one libwebsockets hands over: already percent-decoded, with `.`/`..` segments resolved and
/// without its query, so `/v1/workspaces/te%61m/ws` names `team`, and a `%` still present (sent
/// as `%25`) is refused like any other character outside the rule: a path is decoded once, never
/// twice.
package enum UpgradePath: Equatable, Sendable {
    /// `/`: the workspace is the one the `Hello` names.
    case root
    /// `/v1/workspaces/{id}/ws`: the `Hello` must name this workspace.
    case workspace(String)

    /// The path's parts around the workspace id.
    package static let prefix = "/v1/workspaces/"
    package static let suffix = "/ws"

    /// The upgrade path for `path` (decoded, without its query), or why it is refused.
    package static func parse(_ path: String) throws(UpgradePathError) -> UpgradePath {
        if path == "/" { return .root }
        guard path.hasPrefix(prefix), path.hasSuffix(suffix),
              path.utf8.count >= prefix.utf8.count + suffix.utf8.count
        else { throw .notFound }
        let id = String(path.dropFirst(prefix.count).dropLast(suffix.count))
        // `/v1/workspaces/a/b/ws` is not a workspace path at all; `/v1/workspaces//ws` names an
        // empty id, which the rule refuses (400).
        if id.contains("/") { throw .notFound }
        guard Validation.isValidWorkspaceId(id) else { throw .invalidWorkspaceId(String(id.prefix(80))) }
        return .workspace(id)
    }

    /// The workspace the path names, nil for `/`.
    package var workspaceId: String? {
        switch self {
        case .root: nil
        case .workspace(let id): id
        }
    }
}

/// Why an upgrade's path is refused: answered at the handshake, before any WebSocket frame, with
/// the HTTP status ``status`` and a body saying what is wrong (docs/design.md, "Bad input").
package enum UpgradePathError: Error, Equatable, Sendable {
    /// Neither `/` nor `/v1/workspaces/{id}/ws` (404, the answer of any unknown path).
    case notFound
    /// `/v1/workspaces/{id}/ws` whose id breaks the workspace id rule (400); the id as decoded,
    /// cut to 80 characters.
    case invalidWorkspaceId(String)

    /// The HTTP status of the refusal.
    package var status: UInt32 {
        switch self {
        case .notFound: 404
        case .invalidWorkspaceId: 400
        }
    }

    /// The whole refusal: status and a one-line body.
    package var response: HTTPResponse {
        switch self {
        case .notFound:
            .notFound  // as any other unknown path
        case .invalidWorkspaceId:
            HTTPResponse(
                status: status,
                body: "invalid workspace id in the path: it must be 1-64 characters of [A-Za-z0-9._-]\n")
        }
    }
}
