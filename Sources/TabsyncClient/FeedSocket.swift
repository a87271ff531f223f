import CLibwebsockets
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// One connection of ``ChangeFeed`` to the server: TCP, and for a `wss://` server TLS over it with
/// OpenSSL (which libwebsockets links already), on the reading thread's blocking socket.
///
/// Guarantees: a TLS connection is only handed out after the handshake verified the server, unless
/// ``Trust/insecureSkipVerify``: its chain against ``Trust/caFile`` (a private CA) or the system's
/// trust store, and its name (`SSL_set1_host`: a DNS name or an IP address in the certificate's
/// subjectAltName) against the URL's host, TLS 1.2 or newer; a failure says why (OpenSSL's
/// verification reason), never a secret. ``read(_:)`` returns -1 when nothing came within the
/// socket's 200 ms receive timeout, so the thread sees a cancel; ``shutdownFromAnotherThread()``
/// (the fd's `shutdown`) ends a read in progress. Not thread-safe otherwise: one thread uses it.
final class FeedSocket {
    /// How the server's certificate is checked.
    struct Trust: Sendable, Equatable {
        /// A PEM bundle of the CAs that may sign the server's certificate; nil: the system's.
        var caFile: String?
        /// Accept any certificate (tests only: anyone in the path can pose as the server).
        var insecureSkipVerify = false
    }

    enum Opened {
        case success(FeedSocket)
        case failure(String)
    }

    let fd: Int32
    private let context: OpaquePointer?
    private let ssl: OpaquePointer?

    private init(fd: Int32, context: OpaquePointer?, ssl: OpaquePointer?) {
        self.fd = fd
        self.context = context
        self.ssl = ssl
    }

    deinit {
        if let ssl { SSL_free(ssl) }
        if let context { SSL_CTX_free(context) }
        Glibc.close(fd)
    }

    /// Connects to `url`'s host and port, with TLS when the URL asks for it.
    static func open(_ url: ServerURL, trust: Trust, timeout: Duration) -> Opened {
        let fd: Int32
        switch PlainSocket.connect(url, connectTimeout: timeout, receiveTimeout: .milliseconds(200)) {
        case .success(let socket): fd = socket
        case .failure(let why): return .failure(why)
        }
        guard url.usesTLS else { return .success(FeedSocket(fd: fd, context: nil, ssl: nil)) }
        return handshake(fd, url, trust: trust, timeout: timeout)
    }

    /// Ends a blocking read or write on another thread (the connection then reads as ended).
    func shutdownFromAnotherThread() {
        Glibc.shutdown(fd, Int32(SHUT_RDWR))
    }

    func send(_ bytes: [UInt8]) -> Bool {
        var sent = 0
        while sent < bytes.count {
            let n: Int
            if let ssl {
                ERR_clear_error()
                n = Int(bytes[sent...].withUnsafeBytes { SSL_write(ssl, $0.baseAddress, Int32($0.count)) })
            } else {
                n = bytes[sent...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                if n < 0 && errno == EINTR { continue }
            }
            guard n > 0 else { return false }
            sent += n
        }
        return true
    }

    /// Bytes read (> 0), 0 at the end of the stream (or an error), -1 when nothing came in time.
    func read(_ buffer: inout [UInt8]) -> Int {
        guard let ssl else {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n < 0 { return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? -1 : 0 }
            return n
        }
        ERR_clear_error()
        let n = buffer.withUnsafeMutableBytes { SSL_read(ssl, $0.baseAddress, Int32($0.count)) }
        if n > 0 { return Int(n) }
        // A receive timeout (EAGAIN) leaves OpenSSL wanting to read; a half-read record stays buffered.
        let error = SSL_get_error(ssl, n)
        return error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE ? -1 : 0
    }

    // MARK: TCP

    private static func setReceiveTimeout(_ fd: Int32, _ duration: Duration) {
        var receiveTimeout = PlainSocket.timeval(duration)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &receiveTimeout, socklen_t(MemoryLayout<Glibc.timeval>.size))
    }

    // MARK: TLS

    /// The TLS handshake on a connected `fd` (closed on failure), the server verified per `trust`.
    private static func handshake(_ fd: Int32, _ url: ServerURL, trust: Trust, timeout: Duration) -> Opened {
        ERR_clear_error()
        guard let context = SSL_CTX_new(TLS_client_method()) else {
            Glibc.close(fd)
            return .failure("TLS: OpenSSL could not make a context")
        }
        // The server's own rule (docs/security.md): TLS 1.2 and newer.
        SSL_CTX_ctrl(context, SSL_CTRL_SET_MIN_PROTO_VERSION, Int(TLS1_2_VERSION), nil)
        if trust.insecureSkipVerify {
            SSL_CTX_set_verify(context, SSL_VERIFY_NONE, nil)
        } else {
            SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nil)
            let loaded = trust.caFile.map { SSL_CTX_load_verify_locations(context, $0, nil) }
                ?? SSL_CTX_set_default_verify_paths(context)
            guard loaded == 1 else {
                SSL_CTX_free(context)
                Glibc.close(fd)
                return .failure("TLS: cannot load the CA certificates \(trust.caFile.map { "from \($0)" } ?? "of the system")")
            }
        }
        guard let ssl = SSL_new(context) else {
            SSL_CTX_free(context)
            Glibc.close(fd)
            return .failure("TLS: OpenSSL could not make a connection")
        }
        let socket = FeedSocket(fd: fd, context: context, ssl: ssl)  // frees all three from here on
        SSL_set_fd(ssl, fd)
        if !isAddress(url.host) {
            // SNI: the name, for a server holding several certificates (not sent for an address).
            url.host.withCString { name in
                _ = SSL_ctrl(ssl, SSL_CTRL_SET_TLSEXT_HOSTNAME, Int(TLSEXT_NAMETYPE_host_name), UnsafeMutableRawPointer(mutating: name))
            }
        }
        if !trust.insecureSkipVerify, SSL_set1_host(ssl, url.host) != 1 {
            return .failure("TLS: cannot check the certificate against the host \(url.host)")
        }
        setReceiveTimeout(fd, timeout)
        ERR_clear_error()
        if SSL_connect(ssl) != 1 {
            let verified = SSL_get_verify_result(ssl)
            if verified != X509_V_OK {
                let reason = String(cString: X509_verify_cert_error_string(verified))
                return .failure("TLS: the server's certificate is not trusted: \(reason)")
            }
            let code = ERR_peek_last_error()
            let reason = code == 0 ? nil : ERR_reason_error_string(code).map { String(cString: $0) }
            return .failure("TLS: the handshake with \(url.host):\(url.port) failed: \(reason ?? "the connection ended")")
        }
        setReceiveTimeout(fd, .milliseconds(200))
        return .success(socket)
    }

    /// True for an IPv4 or IPv6 address literal (no SNI for those, RFC 6066).
    private static func isAddress(_ host: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, host, &v4) == 1 || inet_pton(AF_INET6, host, &v6) == 1
    }
}
