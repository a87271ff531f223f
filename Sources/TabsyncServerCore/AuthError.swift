import TabsyncCore

/// Why a token, or an op under it, was refused. Each case knows how it reaches the peer: every
/// case but ``notPermitted`` is `Error UNAUTHORIZED` then close 4401 (HTTP 401); ``notPermitted``
/// is `Rejected NOT_PERMITTED` and the session stays.
///
/// Guarantee: no case carries any part of a token or a key, so ``description`` (the wire message
/// and the log line) never shows one. None depends on whether a workspace exists.
public enum AuthError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The server requires a token and the Hello (or the request) carried none.
    case missingToken
    /// The token is not a compact JWS (three base64url parts with a JSON header).
    case malformedToken
    /// The header's `alg` is not the algorithm of a key this server holds (`none` never is).
    case unsupportedAlgorithm
    /// The header's `kid` names no key this server holds (a retired key, or another server's).
    case unknownKey
    /// The signature does not verify with the key(s) the header points at.
    case badSignature
    /// A required claim is missing or invalid: `sub`, `ws`, `role`, `exp`.
    case invalidClaims(String)
    /// `exp` has passed (at the Hello, or during the session).
    case expired
    /// `nbf` is still in the future.
    case notYetValid
    /// The token's `ws` does not name the workspace asked for.
    case wrongWorkspace
    /// An operator revoked the token (by its `jti`, or every token of its `sub` issued before a
    /// time): docs/security.md, "Revocation".
    case revoked
    /// The token's role does not allow this op (e.g. a viewer's Submit, an editor's setEditable).
    case notPermitted(role: AccessRole, op: String)

    /// The wire code this refusal is sent with.
    public var code: ErrorCode {
        switch self {
        case .notPermitted: .notPermitted
        default: .unauthorized
        }
    }

    public var description: String {
        switch self {
        case .missingToken: "a token is required (Hello.token, or Authorization: Bearer)"
        case .malformedToken: "the token is not a signed JWT"
        case .unsupportedAlgorithm: "the token's alg is not one this server accepts"
        case .unknownKey: "the token's kid names no key of this server"
        case .badSignature: "the token's signature does not verify"
        case .invalidClaims(let which): "the token's claims are invalid: \(which)"
        case .expired: "the token has expired"
        case .notYetValid: "the token is not valid yet (nbf)"
        case .wrongWorkspace: "the token does not grant this workspace"
        case .revoked: "the token has been revoked"
        case .notPermitted(let role, let op): "role \(role.rawValue) may not submit \(op)"
        }
    }
}
