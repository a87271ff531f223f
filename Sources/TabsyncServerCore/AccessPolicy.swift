import Foundation
import TabsyncCore
import TabsyncProto

/// What a token's `role` claim lets its holder do in the workspaces it names.
///
/// Every role receives everything of its workspace (Welcome, Applied, Presence). `viewer` may
/// submit nothing; `editor` every op but `setEditable`; `admin` every op. Guarantee: ``permits(_:)``
/// is the only place a role becomes a yes or no, and it is checked before an op is sequenced, so
/// a refused op changes nothing and consumes nothing (not even its seq).
public enum AccessRole: String, Sendable, CaseIterable, Codable {
    case viewer, editor, admin

    /// True when this role may submit an op of this kind (an op with no kind set counts as any op:
    /// a viewer is refused it, the others get the usual `INVALID_ARGUMENT`).
    public func permits(_ kind: Tabsync_V1_Op.OneOf_Kind?) -> Bool {
        switch (self, kind) {
        case (.viewer, _): false
        case (.editor, .setEditable?): false
        case (.editor, _), (.admin, _): true
        }
    }
}

/// The `ws` claim: one workspace id, or a glob over ids (`*` any run of characters, `?` one).
///
/// Valid patterns are 1–128 characters of the workspace-id alphabet plus `*` and `?`; a pattern
/// without wildcards matches exactly that id and nothing else.
public struct WorkspacePattern: Sendable, Hashable, CustomStringConvertible {
    public let text: String
    private let scalars: [Unicode.Scalar]

    /// Nil when `text` is not a valid pattern.
    public init?(_ text: String) {
        let scalars = Array(text.unicodeScalars)
        guard (1...128).contains(scalars.count), scalars.allSatisfy(Self.isPatternScalar) else { return nil }
        self.text = text
        self.scalars = scalars
    }

    public var description: String { text }

    /// True when `workspaceId` matches the whole pattern.
    public func matches(_ workspaceId: String) -> Bool {
        let id = Array(workspaceId.unicodeScalars)
        // Iterative glob match with one backtrack point (the last `*`): linear in practice.
        var p = 0, s = 0
        var star: Int?, starMatch = 0
        while s < id.count {
            if p < scalars.count, scalars[p] == "?" || scalars[p] == id[s] {
                p += 1
                s += 1
            } else if p < scalars.count, scalars[p] == "*" {
                star = p
                starMatch = s
                p += 1
            } else if let star {
                p = star + 1
                starMatch += 1
                s = starMatch
            } else {
                return false
            }
        }
        while p < scalars.count, scalars[p] == "*" { p += 1 }
        return p == scalars.count
    }

    private static func isPatternScalar(_ c: Unicode.Scalar) -> Bool {
        ("a"..."z").contains(c) || ("A"..."Z").contains(c) || ("0"..."9").contains(c)
            || c == "." || c == "_" || c == "-" || c == "*" || c == "?"
    }
}

/// A verified token's claims: who (``subject``), where (``workspaces``), what (``role``), until when.
///
/// Made only by ``TokenVerifier`` after the signature, `exp` and `nbf` checked out at one instant;
/// the holder of a grant still checks ``isExpired(at:)`` whenever it acts on it (a grant is never a
/// reason to skip the expiry check).
public struct AccessGrant: Sendable, Equatable {
    /// The `sub` claim: shown in presence instead of the client's self-chosen name.
    public var subject: String
    public var workspaces: WorkspacePattern
    public var role: AccessRole
    /// The `exp` claim.
    public var expiresAt: Date
    /// The `jti` claim, when the token has one.
    public var tokenId: String?
    /// The `iat` claim, when the token has one.
    public var issuedAt: Date?

    public init(
        subject: String, workspaces: WorkspacePattern, role: AccessRole, expiresAt: Date, tokenId: String? = nil,
        issuedAt: Date? = nil
    ) {
        self.subject = subject
        self.workspaces = workspaces
        self.role = role
        self.expiresAt = expiresAt
        self.tokenId = tokenId
        self.issuedAt = issuedAt
    }

    /// True when this grant opens `workspaceId`.
    public func admits(_ workspaceId: String) -> Bool { workspaces.matches(workspaceId) }

    /// True from `exp` on (RFC 7519: the token must not be accepted on or after it).
    public func isExpired(at now: Date) -> Bool { now >= expiresAt }
}
