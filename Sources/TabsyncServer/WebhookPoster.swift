import CCurl
import Foundation
import TabsyncServerCore

/// One webhook request over libcurl (Sources/CCurl/CCurl.h): a POST with no proxy and no redirect,
/// HTTPS verified (the certificate chains to a system CA or one of ``trust``'s, and names the URL's
/// host), and every resolved address judged by ``WebhookTargetPolicy`` just before it is connected to.
///
/// Guarantees: a refused address is never connected to (the outcome is ``Outcome/refused(_:)``); a
/// certificate that fails verification ends the attempt before the request is sent
/// (``Outcome/failed(_:)`` with libcurl's reason);
/// the call blocks its thread for at most `timeout` plus name resolution, so it runs on the
/// deliverer's thread only, never on the event loop.
struct WebhookPoster: Sendable {
    var allowPrivate: Bool
    /// CAs trusted beside the system's (`--webhook-ca-file`); nil: the system's only.
    var trust: WebhookTrust? = nil
    var timeout: Duration = .seconds(10)

    enum Outcome: Sendable, Equatable {
        /// The receiver answered with this status.
        case answered(Int)
        /// Every address the name resolved to was refused (the reason of the last one).
        case refused(String)
        /// No answer: the connection, TLS or the timeout failed.
        case failed(String)
    }

    func post(url: String, headers: [String: String], body: [UInt8]) -> Outcome {
        let check = WebhookAddressGuard(allowPrivate: allowPrivate)
        let lines = headers.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }
        var status = 0
        var refused: Int32 = 0
        var error = [CChar](repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
        let code = withExtendedLifetime((check, trust)) { () -> Int32 in
            let context = Unmanaged.passUnretained(check).toOpaque()
            let duplicates = lines.map { strdup($0) }
            defer { duplicates.forEach { free($0) } }
            let pointers: [UnsafePointer<CChar>?] = duplicates.map { UnsafePointer($0) }
            return pointers.withUnsafeBufferPointer { headerList in
                body.withUnsafeBytes { bytes in
                    tsc_post(
                        url, headerList.baseAddress, Int32(lines.count), bytes.baseAddress, bytes.count,
                        Int(timeout.components.seconds * 1000), trust?.certificates, webhookAddressCheck, context, &status, &refused, &error)
                }
            }
        }
        if refused != 0 && code != 0 {
            return .refused(check.reason ?? "refused")
        }
        guard code == 0 else {
            let text = String(decoding: error.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            return .failed(text.isEmpty ? "curl error \(code)" : text)
        }
        return .answered(status)
    }
}

/// What the address check saw: the policy, and the reason of the last refusal.
private final class WebhookAddressGuard {
    let allowPrivate: Bool
    var reason: String?
    init(allowPrivate: Bool) { self.allowPrivate = allowPrivate }

    func judge(_ address: [UInt8]) -> Bool {
        guard let why = WebhookTargetPolicy.refusal(address, allowPrivate: allowPrivate) else { return true }
        reason = why
        return false
    }
}

/// The address check libcurl calls before each connect (`context`: the request's guard).
private func webhookAddressCheck(_ bytes: UnsafePointer<UInt8>?, _ length: Int32, _ context: UnsafeMutableRawPointer?) -> Int32 {
    guard let bytes, let context else { return 0 }
    let check = Unmanaged<WebhookAddressGuard>.fromOpaque(context).takeUnretainedValue()
    return check.judge(Array(UnsafeBufferPointer(start: bytes, count: Int(length)))) ? 1 : 0
}
