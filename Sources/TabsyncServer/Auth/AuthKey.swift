import Foundation
import JWTKit

/// One key tokens are checked with: an HS256 secret, or an EdDSA (Ed25519) or ES256 (P-256)
/// public key, named by ``id`` (the `kid` tokens carry to pick it).
///
/// Guarantee: neither ``description`` nor any error of this file shows key material; a secret lives
/// only in this value and the JWT library's key collection.
public struct AuthKey: Sendable, CustomStringConvertible {
    /// The key id: what a token's `kid` header names. From a file, its name without directory and
    /// last extension (`/run/secrets/team-2026.key` → `team-2026`).
    public let id: String
    let material: Material

    enum Material: Sendable {
        case hmac([UInt8])
        case eddsa(EdDSA.PublicKey)
        case es256(ES256PublicKey)
    }

    /// The JWS `alg` tokens signed with this key carry.
    public var algorithm: String {
        switch material {
        case .hmac: "HS256"
        case .eddsa: "EdDSA"
        case .es256: "ES256"
        }
    }

    /// True for a shared secret (it can mint tokens as well as check them).
    public var isSecret: Bool {
        if case .hmac = material { return true }
        return false
    }

    public var description: String { "\(algorithm) key \"\(id)\"" }

    /// Shortest HS256 secret accepted: RFC 7518 §3.2 asks for a key at least as long as the hash.
    public static let minimumSecretBytes = 32

    /// An HS256 secret.
    public init(id: String, secret: [UInt8]) throws(AuthKeyError) {
        guard secret.count >= Self.minimumSecretBytes else { throw .secretTooShort(id: id, bytes: secret.count) }
        self.id = id
        material = .hmac(secret)
    }

    /// A PEM public key: Ed25519 (`EdDSA`) or P-256 (`ES256`).
    public init(id: String, pem: String) throws(AuthKeyError) {
        self.id = id
        if let key = try? EdDSA.PublicKey(pem: pem) {
            material = .eddsa(key)
        } else if let key = try? ES256PublicKey(pem: pem) {
            material = .es256(key)
        } else {
            throw .badPublicKey(id: id)
        }
    }

    /// Reads a key file: a PEM public key when it starts with `-----BEGIN`, else an HS256 secret
    /// (the file's bytes, one trailing newline stripped).
    public static func load(file path: String) throws(AuthKeyError) -> AuthKey {
        guard let data = FileManager.default.contents(atPath: path) else { throw .unreadable(path: path) }
        var bytes = [UInt8](data)
        let id = keyId(forFile: path)
        if bytes.starts(with: Array("-----BEGIN".utf8)) {
            return try AuthKey(id: id, pem: String(decoding: bytes, as: UTF8.self))
        }
        if bytes.last == 0x0A { bytes.removeLast() }
        if bytes.last == 0x0D { bytes.removeLast() }
        guard !bytes.isEmpty else { throw .empty(path: path) }
        return try AuthKey(id: id, secret: bytes)
    }

    /// The key id a file gives: its name without directory and last extension.
    public static func keyId(forFile path: String) -> String {
        let name = (path as NSString).lastPathComponent
        let stem = (name as NSString).deletingPathExtension
        return stem.isEmpty ? name : stem
    }
}

/// Why a key could not be used (at start-up: the server does not start).
public enum AuthKeyError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The file does not exist or cannot be read.
    case unreadable(path: String)
    /// The file is empty (after the trailing newline).
    case empty(path: String)
    /// An HS256 secret shorter than ``AuthKey/minimumSecretBytes``.
    case secretTooShort(id: String, bytes: Int)
    /// A PEM that is neither an Ed25519 nor a P-256 public key.
    case badPublicKey(id: String)
    /// Two keys with the same id (file name): tokens could not tell them apart.
    case duplicateId(String)
    /// No key at all where one is needed.
    case noKey

    public var description: String {
        switch self {
        case .unreadable(let path): "cannot read key file \(path)"
        case .empty(let path): "key file \(path) is empty"
        case .secretTooShort(let id, let bytes):
            "key \"\(id)\": an HS256 secret needs at least \(AuthKey.minimumSecretBytes) bytes (it has \(bytes)); make one with `openssl rand -base64 48`"
        case .badPublicKey(let id): "key \"\(id)\": not an Ed25519 or P-256 public key in PEM"
        case .duplicateId(let id): "two key files named \"\(id)\": give each key file its own name (it is the key's kid)"
        case .noKey: "no key given"
        }
    }
}
