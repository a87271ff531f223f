import Crypto
import Foundation
import TabsyncServerCore

/// The Standard Webhooks signature of one delivery (docs/design.md, "Webhooks"): `v1,` and the
/// standard base64 of HMAC-SHA256, keyed with the bytes the secret's base64 after `whsec_` decodes
/// to, over `id.timestamp.body`.
///
/// Guarantees: the same secret, id, timestamp and body give the same value, which a receiver's own
/// implementation of the standard (the Standard Webhooks libraries, Python's `hmac`) computes too;
/// nil only for a secret that is not in the `whsec_` form (``WebhookSpec`` refuses those).
package enum WebhookSignature {
    /// The `webhook-signature` header's value.
    package static func sign(secret: String, id: String, timestamp: Int64, body: [UInt8]) -> String? {
        guard secret.hasPrefix(WebhookSpec.secretPrefix),
              let key = Data(base64Encoded: String(secret.dropFirst(WebhookSpec.secretPrefix.count))) else { return nil }
        var message = Array("\(id).\(timestamp).".utf8)
        message += body
        let mac = HMAC<SHA256>.authenticationCode(for: message, using: SymmetricKey(data: key))
        return "v1," + Data(mac).base64EncodedString()
    }

    /// The `webhook-id` of a version of a workspace: the same on every attempt of it.
    package static func id(workspace: String, version: UInt64) -> String { "\(workspace):\(version)" }
}
