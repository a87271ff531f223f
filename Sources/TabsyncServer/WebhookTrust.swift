import CCurl

/// The extra certificate authorities webhook deliveries trust (`--webhook-ca-file`, docs/security.md,
/// "Webhooks"): every certificate of one PEM bundle, read once at start, added to each HTTPS
/// connection's trust store beside the system's CAs. Host names are still verified: a certificate
/// these CAs signed for another name is refused.
///
/// Guarantees: an instance holds at least one certificate; a file that cannot be read, holds a
/// broken PEM block or no certificate is a ``LoadError`` naming the file and OpenSSL's reason, never
/// the file's contents.
///
/// `@unchecked Sendable`: the certificate stack is written once, in ``load(file:)``, and only read
/// after (OpenSSL's reference counts, which adding a certificate to a store takes, are atomic);
/// it is freed when the last reference goes.
final class WebhookTrust: @unchecked Sendable {
    /// A `STACK_OF(X509)` made by `tsc_load_cas`.
    let certificates: UnsafeMutableRawPointer
    /// How many certificates the bundle holds.
    let count: Int
    let file: String

    /// Why a CA bundle cannot be used.
    struct LoadError: Error, Equatable, CustomStringConvertible {
        var file: String
        var reason: String
        var description: String { "webhook CA file \(file): \(reason)" }
    }

    private init(certificates: UnsafeMutableRawPointer, count: Int, file: String) {
        (self.certificates, self.count, self.file) = (certificates, count, file)
    }

    /// Every certificate of the PEM bundle at `file`.
    static func load(file: String) throws(LoadError) -> WebhookTrust {
        var stack: UnsafeMutableRawPointer?
        var error = [CChar](repeating: 0, count: 256)
        let count = tsc_load_cas(file, &stack, &error, error.count)
        guard count > 0, let stack else { throw LoadError(file: file, reason: String(nulTerminated: error)) }
        return WebhookTrust(certificates: stack, count: Int(count), file: file)
    }

    deinit { tsc_free_cas(certificates) }
}
