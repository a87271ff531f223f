import Foundation
import JWTKit
import TabsyncCore

/// Checks access tokens: signed JWTs whose claims are `sub`, `ws`, `role`, `exp` (required) and
/// `nbf` (optional), against the server's keys. The signature is checked by `vapor/jwt-kit`
/// (swift-crypto underneath); this type adds the header rules (`alg` must be a held key's, `kid`
/// must name a held key) and the claim rules.
///
/// Guarantees: every call verifies from scratch at the instant it is given (nothing is cached, so
/// an expired or retired-key token never passes on an earlier success); a token without `kid` is
/// tried against every held key of its `alg`, one with a `kid` only against that key; errors carry
/// no part of the token. ``verify(_:now:)`` is `async` (jwt-kit's key collection is an actor): the
/// event loop thread, which must not await, uses ``verify(_:now:then:)`` instead, which runs the
/// check on the verifier's own thread (``VerifierThread``) and calls back from there.
public final class TokenVerifier: Sendable {
    public let keys: [AuthKey]
    private let collection: Task<JWTKeyCollection, Never>
    /// Where checks started by ``verify(_:now:then:)`` run.
    private let thread: VerifierThread

    /// - Throws: ``AuthKeyError/noKey`` for no key, ``AuthKeyError/duplicateId(_:)`` for two keys
    ///   with one id.
    public init(keys: [AuthKey]) throws(AuthKeyError) {
        guard !keys.isEmpty else { throw .noKey }
        var seen = Set<String>()
        for key in keys where !seen.insert(key.id).inserted { throw .duplicateId(key.id) }
        self.keys = keys
        let thread = VerifierThread()
        self.thread = thread
        collection = Task(executorPreference: thread) { await Self.makeCollection(keys) }
    }

    deinit { thread.stop() }

    /// Checks `token` on the verifier's own thread and hands the result to `then` there (for the
    /// event loop, which must not await: `then` posts it to the loop's inbox).
    public func verify(
        _ token: String, now: Date, then: @escaping @Sendable (Result<AccessGrant, AuthError>) -> Void
    ) {
        Task(executorPreference: thread) { then(await self.verify(token, now: now)) }
    }

    /// A jwt-kit key collection holding `keys`, each under its id (the first is the default).
    static func makeCollection(_ keys: [AuthKey]) async -> JWTKeyCollection {
        let collection = JWTKeyCollection()
        for key in keys {
            let kid = JWKIdentifier(string: key.id)
            switch key.material {
            case .hmac(let secret):
                await collection.add(hmac: HMACKey(from: secret), digestAlgorithm: .sha256, kid: kid)
            case .eddsa(let publicKey):
                await collection.add(eddsa: publicKey, kid: kid)
            case .es256(let publicKey):
                await collection.add(ecdsa: publicKey, kid: kid)
            }
        }
        return collection
    }

    /// The token's grant, or why it is refused. `now` is the instant `exp` and `nbf` are read against.
    public func verify(_ token: String, now: Date = Date()) async -> Result<AccessGrant, AuthError> {
        guard !token.isEmpty else { return .failure(.missingToken) }
        guard token.utf8.count <= 8192, let header = Self.header(of: token) else { return .failure(.malformedToken) }
        // `alg` must be a held key's (this refuses `none`); a `kid` must name a held key of that alg.
        let candidates = keys.filter { $0.algorithm == header.alg }
        if let kid = header.kid {
            guard let key = keys.first(where: { $0.id == kid }) else { return .failure(.unknownKey) }
            guard key.algorithm == header.alg else { return .failure(.unsupportedAlgorithm) }
        } else if candidates.isEmpty {
            return .failure(.unsupportedAlgorithm)
        }
        let claims: AccessClaims
        do {
            claims = try await collection.value.verify(token, as: AccessClaims.self, iteratingKeys: header.kid == nil)
        } catch let error as JWTError where error.errorType == .signatureVerificationFailed {
            return .failure(.badSignature)
        } catch let error as JWTError where error.errorType == .malformedToken {
            // The signature checked out (jwt-kit verifies it before decoding the claims).
            return .failure(.invalidClaims("sub, ws, role and exp are required; exp and nbf are integer seconds"))
        } catch {
            return .failure(.malformedToken)
        }
        return claims.grant(now: now)
    }

    /// The fields of a JOSE header this verifier reads.
    struct Header: Decodable {
        var alg: String
        var kid: String?
    }

    /// The decoded header of a compact JWS (three dot-separated parts), nil when it is not one.
    static func header(of token: String) -> Header? {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let json = base64URLDecode(parts[0]) else { return nil }
        return try? JSONDecoder().decode(Header.self, from: json)
    }

    /// Base64url without padding (RFC 7515 §2) to bytes.
    static func base64URLDecode(_ text: Substring) -> Data? {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.count % 4 != 0 { base64 += "=" }
        return Data(base64Encoded: base64)
    }
}

/// The claims of a tabsync access token, as a JWT payload. `role` and `ws` decode as plain strings
/// so that an unknown role is an invalid claim (not an undecodable token).
public struct AccessClaims: JWTPayload {
    public var sub: SubjectClaim
    public var ws: String
    public var role: String
    public var exp: ExpirationClaim
    public var nbf: NotBeforeClaim?
    /// The token's own id: what revokes this one token (docs/security.md, "Revocation").
    public var jti: IDClaim?
    /// When it was issued: what revokes every token of a `sub` issued before a time.
    public var iat: IssuedAtClaim?

    public init(
        subject: String, workspaces: String, role: AccessRole, expiresAt: Date, notBefore: Date? = nil,
        tokenId: String? = nil, issuedAt: Date? = nil
    ) {
        sub = SubjectClaim(value: subject)
        ws = workspaces
        self.role = role.rawValue
        exp = ExpirationClaim(value: expiresAt)
        nbf = notBefore.map { NotBeforeClaim(value: $0) }
        jti = tokenId.map { IDClaim(value: $0) }
        iat = issuedAt.map { IssuedAtClaim(value: $0) }
    }

    /// The longest `jti` accepted.
    public static let maxTokenIdLength = 128

    /// Claims are checked by ``grant(now:)`` with an explicit instant, not here.
    public func verify(using algorithm: some JWTAlgorithm) async throws {}

    /// The grant these claims give at `now`, or why they give none.
    func grant(now: Date) -> Result<AccessGrant, AuthError> {
        let subject = sub.value
        guard (1...Validation.maxClientNameLength).contains(subject.unicodeScalars.count), Validation.isCleanText(subject) else {
            return .failure(.invalidClaims("sub must be 1-\(Validation.maxClientNameLength) chars without control characters"))
        }
        guard let pattern = WorkspacePattern(ws) else {
            return .failure(.invalidClaims("ws must be a workspace id or a glob of [A-Za-z0-9._-*?]"))
        }
        guard let role = AccessRole(rawValue: role) else {
            return .failure(.invalidClaims("role must be viewer, editor or admin"))
        }
        if let jti, !(1...Self.maxTokenIdLength).contains(jti.value.unicodeScalars.count) || !Validation.isCleanText(jti.value) {
            return .failure(.invalidClaims("jti must be 1-\(Self.maxTokenIdLength) chars without control characters"))
        }
        if let nbf, now < nbf.value { return .failure(.notYetValid) }
        let grant = AccessGrant(
            subject: subject, workspaces: pattern, role: role, expiresAt: exp.value, tokenId: jti?.value,
            issuedAt: iat?.value)
        if grant.isExpired(at: now) { return .failure(.expired) }
        return .success(grant)
    }
}
