// The socket macros (`MSG_NOSIGNAL`): in a whole-module (release) build their header is first read
// through libwebsockets' module, which then owns them, and a file must import that module to see them.
import CLibwebsockets
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Blocking TCP sockets for the HTTP clients (``HTTPWriter``, and ``FeedSocket`` under ``ChangeFeed``, TLS or not).
///
/// Guarantees: `connect` tries every resolved address of the URL's host in turn and returns a
/// connected descriptor (the caller closes it) with a send timeout of `connectTimeout`, a receive
/// timeout of `receiveTimeout` (so a reading thread wakes up to look at its own state) and
/// `TCP_NODELAY`; `send` writes every byte or says it could not (no SIGPIPE); `read` tells data,
/// the end and a timeout apart.
enum PlainSocket {
    enum Connected {
        case success(Int32)
        case failure(String)
    }

    static func connect(_ url: ServerURL, connectTimeout: Duration, receiveTimeout: Duration) -> Connected {
        let server = "\(url.host):\(url.port)"
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(url.host, String(url.port), &hints, &list)
        guard status == 0, let list else {
            return .failure("cannot resolve \(url.host): \(String(cString: gai_strerror(status)))")
        }
        defer { freeaddrinfo(list) }
        var why = "no address"
        var entry: UnsafeMutablePointer<addrinfo>? = list
        while let address = entry {
            entry = address.pointee.ai_next
            let fd = socket(address.pointee.ai_family, address.pointee.ai_socktype, address.pointee.ai_protocol)
            guard fd >= 0 else { continue }
            var sendTimeout = timeval(connectTimeout)
            setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &sendTimeout, socklen_t(MemoryLayout<Glibc.timeval>.size))
            if Glibc.connect(fd, address.pointee.ai_addr, address.pointee.ai_addrlen) == 0 {
                var receive = timeval(receiveTimeout)
                setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &receive, socklen_t(MemoryLayout<Glibc.timeval>.size))
                var one: Int32 = 1
                setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
                return .success(fd)
            }
            why = String(cString: strerror(errno))
            close(fd)
        }
        return .failure("cannot reach the server at \(server): \(why)")
    }

    static func timeval(_ duration: Duration) -> Glibc.timeval {
        let micros = duration.microseconds
        return Glibc.timeval(tv_sec: Int(micros / 1_000_000), tv_usec: Int(micros % 1_000_000))
    }

    static func send(_ socket: Int32, _ bytes: [UInt8]) -> Bool {
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { Glibc.send(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return false }
            sent += n
        }
        return true
    }

    /// Bytes read (> 0), 0 at the end of the stream (or an error), -1 when nothing came in time.
    static func read(_ socket: Int32, _ buffer: inout [UInt8]) -> Int {
        let n = buffer.withUnsafeMutableBytes { recv(socket, $0.baseAddress, $0.count, 0) }
        if n < 0 { return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? -1 : 0 }
        return n
    }
}
