import Foundation
import TabsyncStore

/// What an admin asks to register as a webhook (docs/design.md, "Webhooks"), checked: a URL a
/// hook may target, a workspace glob, and a secret in the Standard Webhooks form.
///
/// Guarantees: a value exists only when all three passed ``parse(url:workspaces:secret:)``; its
/// `description` (and so any log line or error that prints it) never holds the secret.
package struct WebhookSpec: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    package let url: String
    package let workspaces: WorkspacePattern
    package let secret: String

    package static let maxURLBytes = 2_048
    /// The secret's key length bounds, in bytes (Standard Webhooks: 24 to 64).
    package static let secretBytes = 24...64
    package static let secretPrefix = "whsec_"
    /// The most hooks one store keeps; the next registration is refused 409.
    package static let maxHooks = 100

    /// The spec, or a line saying what is wrong with it (the secret never in it).
    package static func parse(url: String, workspaces: String, secret: String) -> Result<WebhookSpec, WebhookSpecError> {
        if let why = urlProblem(url) { return .failure(.url(why)) }
        guard let pattern = WorkspacePattern(workspaces) else {
            return .failure(.workspaces("workspaces must be a workspace id or a glob of [A-Za-z0-9._-*?], 1-128 characters"))
        }
        guard secret.hasPrefix(secretPrefix), let key = Data(base64Encoded: String(secret.dropFirst(secretPrefix.count))),
              secretBytes.contains(key.count) else {
            return .failure(.secret(
                "secret must be \(secretPrefix) and the base64 of \(secretBytes.lowerBound) to \(secretBytes.upperBound) random bytes"))
        }
        return .success(WebhookSpec(url: url, workspaces: pattern, secret: secret))
    }

    /// Why `url` cannot be a hook's target, or nil when it can. Where it points (a private
    /// address) is checked when a delivery connects, not here: a name resolves anew each time.
    static func urlProblem(_ url: String) -> String? {
        guard !url.isEmpty, url.utf8.count <= maxURLBytes else { return "url must be 1 to \(maxURLBytes) bytes" }
        guard url.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F }) else {
            return "url must be printable ASCII without spaces (percent-encode the rest)"
        }
        guard let parts = URLComponents(string: url), let scheme = parts.scheme?.lowercased() else { return "url does not parse" }
        guard scheme == "http" || scheme == "https" else { return "url must be http or https, not \(scheme)" }
        guard let host = parts.host, !host.isEmpty else { return "url has no host" }
        guard parts.user == nil, parts.password == nil else { return "url must not hold a user name or password" }
        guard parts.fragment == nil else { return "url must not have a fragment" }
        return nil
    }

    /// The registration this spec becomes under `id`, registered at `now`.
    package func registration(id: String, at now: Date) -> WebhookRegistration {
        WebhookRegistration(id: id, url: url, workspaces: workspaces.text, secret: secret, createdAt: now)
    }

    package var description: String { "webhook(url: \(url), workspaces: \(workspaces.text))" }
    package var debugDescription: String { description }
    package var customMirror: Mirror { Mirror(self, children: ["url": url, "workspaces": workspaces.text]) }

    /// A hook id as the server makes them: `wh_` and 32 hex digits.
    package static func isValidId(_ id: String) -> Bool {
        id.hasPrefix("wh_") && id.utf8.count == 35 && id.utf8.dropFirst(3).allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
    }
}

/// Why a webhook registration was refused (answered 400 with the message).
package enum WebhookSpecError: Error, Equatable, CustomStringConvertible {
    case url(String), workspaces(String), secret(String)

    package var description: String {
        switch self {
        case .url(let why), .workspaces(let why), .secret(let why): why
        }
    }
}
