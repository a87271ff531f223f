import Foundation
import JWTKit

/// Makes access tokens with an HS256 secret (`tabsync-server token`, tests): header
/// `{"alg":"HS256","typ":"JWT","kid":<key id>}`, claims as ``AccessClaims``. Any JWT library given
/// the same secret and claims makes tokens the server accepts just as well.
public struct TokenMinter: Sendable {
    public let key: AuthKey

    /// - Throws: ``AuthKeyError/badPublicKey(id:)`` when `key` is a public key (it cannot sign).
    public init(key: AuthKey) throws(AuthKeyError) {
        guard key.isSecret else { throw .badPublicKey(id: key.id) }
        self.key = key
    }

    /// A signed token carrying `claims`.
    public func mint(_ claims: AccessClaims) async throws -> String {
        let collection = await TokenVerifier.makeCollection([key])
        return try await collection.sign(claims, kid: JWKIdentifier(string: key.id))
    }
}
