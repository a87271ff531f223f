import CLibwebsockets
import Foundation
import Logging
import TabsyncServerCore

/// Transport security at start and on the loop: the refusal to listen unauthenticated beyond
/// loopback, TLS (1.2 or newer, HTTP/1.1 only) from PEM files and their reload, and the
/// per-address and origin policies the bind implies.
extension Server {
    /// Reads the TLS certificate and key files again and serves them to new connections (the open
    /// ones keep theirs). A pair that cannot be served (unreadable, not PEM, a key that does not
    /// match) is logged and the previous one stays. Any thread; does nothing without TLS.
    public func reloadCertificates() {
        inbox.post(.reloadCertificates)
    }

    /// True for an address in 127.0.0.0/8, `::1`, or `::ffff:127.x.y.z`.
    static func isLoopback(_ address: ResolvedHost) -> Bool {
        if address.isIPv6 {
            var v6 = in6_addr()
            guard inet_pton(AF_INET6, address.address, &v6) == 1 else { return false }
            let bytes = withUnsafeBytes(of: v6) { Array($0) }
            if bytes[0..<15].allSatisfy({ $0 == 0 }) && bytes[15] == 1 { return true }
            let mapped = bytes[0..<10].allSatisfy { $0 == 0 } && bytes[10] == 0xFF && bytes[11] == 0xFF
            return mapped && bytes[12] == 127
        }
        var v4 = in_addr()
        guard inet_pton(AF_INET, address.address, &v4) == 1 else { return false }
        return withUnsafeBytes(of: v4) { $0[0] } == 127
    }

    /// Before binding: no unauthenticated server beyond loopback unless asked, and a TLS pair that
    /// loads (checked here so the error names the file and the reason, never its contents).
    static func checkTransportSecurity(_ configuration: Configuration, address: ResolvedHost) throws(Server.Error) {
        if !configuration.authEnabled && !configuration.insecureNoAuth && !isLoopback(address) {
            throw .unauthenticatedExposure(host: configuration.host)
        }
        switch (configuration.tlsCertificateFile, configuration.tlsKeyFile) {
        case (nil, nil):
            return
        case (let cert?, let key?):
            if let why = certificatePairProblem(cert: cert, key: key) { throw .tlsUnusable(why) }
        default:
            throw .tlsUnusable("a certificate needs its key: give both --tls-cert and --tls-key")
        }
    }

    /// Nil when `cert` (a PEM chain) and `key` (its PEM private key) can be served together;
    /// otherwise which file fails and OpenSSL's reason.
    static func certificatePairProblem(cert: String, key: String) -> String? {
        var buffer = [CChar](repeating: 0, count: 256)
        let result = clws_tls_check_pair(cert, key, &buffer, buffer.count)
        let reason = String(nulTerminated: buffer)
        switch result {
        case 0: return nil
        case 1: return "certificate \(cert): \(reason)"
        case 2: return "private key \(key): \(reason)"
        default: return "private key \(key) does not match certificate \(cert): \(reason)"
        }
    }
}

extension LoopDriver {
    /// The transport part of context creation: TLS fields of `info` from the configuration, and
    /// the admission policies for the bound `address`. Called once, before the context is created.
    func prepareTransportSecurity(_ info: inout lws_context_creation_info, address: Server.ResolvedHost) {
        let loopback = Server.isLoopback(address)
        admission = Admission(configuration: configuration, loopbackBind: loopback)
        if !loopback && !configuration.authEnabled {
            logger.warning("no authentication beyond loopback (insecure-no-auth): anyone who reaches the port can read and rewrite every workspace")
        }
        guard let cert = configuration.tlsCertificateFile, let key = configuration.tlsKeyFile else { return }
        info.options |= clws_option_ssl_global_init()
        info.ssl_cert_filepath = UnsafePointer(cString(cert))
        info.ssl_private_key_filepath = UnsafePointer(cString(key))
        info.ssl_options_set = clws_ssl_options_tls12_minimum()
        // HTTP/1.1 only: every WebSocket handshake then passes the upgrade checks (origin, path,
        // subprotocol); lws keeps this pointer, so it lives as long as the context.
        info.alpn = UnsafePointer(cString("http/1.1"))
    }

    /// `Inbound.reloadCertificates`: checks the files as a pair, then has lws load them into the
    /// vhost's TLS context (new handshakes get them). A bad pair leaves the served one in place.
    func reloadCertificates() {
        guard let context = eventLoop?.context, let cert = configuration.tlsCertificateFile, let key = configuration.tlsKeyFile else {
            logger.notice("certificate reload asked, but the server does not serve TLS")
            return
        }
        if let why = Server.certificatePairProblem(cert: cert, key: key) {
            metrics.certificateReloads[false, default: 0] += 1
            logger.error("certificate reload failed: still serving the previous certificate", metadata: [
                "why": "\(why)",
            ])
            return
        }
        _ = lws_tls_cert_updated(context, cert, key, nil, 0, nil, 0)
        metrics.certificateReloads[true, default: 0] += 1
        logger.info("certificate reloaded", metadata: ["cert": "\(cert)"])
    }
}

extension Server.Configuration {
    /// True for what ``allowedOrigins`` takes: `scheme://host[:port]` (http or https), `null`, or `*`.
    public static func isValidAllowedOrigin(_ entry: String) -> Bool { OriginPolicy.isValidEntry(entry) }
}
