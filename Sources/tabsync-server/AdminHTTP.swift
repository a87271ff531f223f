import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A small HTTP/1.1 client for `tabsync-server admin`: one request per connection (`Connection:
/// close`), plain HTTP only. The admin token travels in clear on plain HTTP, so it goes only to a
/// loopback address (run the command on the node, or through an SSH tunnel; docs/operating.md,
/// "The admin API").
struct AdminHTTP {
    struct Response {
        var status: Int
        var body: String
    }

    enum Failure: Error, CustomStringConvertible {
        case badURL(String)
        case notLoopback(String)
        case unreachable(String)
        case badResponse(String)

        var description: String {
            switch self {
            case .badURL(let url): "not an http:// URL: \(url)"
            case .notLoopback(let host):
                "\(host) is not a loopback address: the admin token would cross the network in clear. Run the command "
                    + "on the node (or through an SSH tunnel), or use curl with https:// (docs/operating.md)"
            case .unreachable(let why): "cannot reach the server: \(why)"
            case .badResponse(let why): "the server's answer is not HTTP: \(why)"
            }
        }
    }

    let host: String
    let port: Int
    let timeoutSeconds: Int

    init(url: String, timeoutSeconds: Int = 10) throws(Failure) {
        guard let components = URLComponents(string: url), components.scheme == "http", let host = components.host, !host.isEmpty
        else { throw .badURL(url) }
        let loopback = host == "localhost" || host.hasPrefix("127.") || host == "::1" || host == "[::1]"
        guard loopback else { throw .notLoopback(host) }
        self.host = host.trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
        port = components.port ?? 80
        self.timeoutSeconds = timeoutSeconds
    }

    /// Sends one request and reads the whole answer.
    func request(_ method: String, _ path: String, token: String, body: [String: Any]? = nil) throws(Failure) -> Response {
        var payload = Data()
        if let body {
            payload = (try? JSONSerialization.data(withJSONObject: body, options: [.sortedKeys])) ?? Data()
        }
        var head = "\(method) \(path) HTTP/1.1\r\nHost: \(host):\(port)\r\nAuthorization: Bearer \(token)\r\n"
        head += "Connection: close\r\nAccept: application/json\r\nContent-Length: \(payload.count)\r\n"
        if body != nil { head += "Content-Type: application/json\r\n" }
        head += "\r\n"
        let fd = try connect()
        defer { close(fd) }
        let bytes = Array(head.utf8) + Array(payload)
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { throw .unreachable("send: \(String(cString: strerror(errno)))") }
            sent += n
        }
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n == 0 { break }
            guard n > 0 else { throw .unreachable("recv: \(String(cString: strerror(errno)))") }
            received.append(contentsOf: buffer[0..<n])
            if received.count > 64 << 20 { throw .badResponse("over 64 MiB") }
        }
        return try Self.parse(received)
    }

    private func connect() throws(Failure) -> Int32 {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var result: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &result)
        guard status == 0, let first = result else { throw .unreachable("cannot resolve \(host): \(String(cString: gai_strerror(status)))") }
        defer { freeaddrinfo(result) }
        var why = "no address"
        var entry: UnsafeMutablePointer<addrinfo>? = first
        while let info = entry {
            let fd = socket(info.pointee.ai_family, info.pointee.ai_socktype, info.pointee.ai_protocol)
            if fd >= 0 {
                var timeout = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
                setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
                setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
                if Glibc.connect(fd, info.pointee.ai_addr, info.pointee.ai_addrlen) == 0 { return fd }
                why = String(cString: strerror(errno))
                close(fd)
            }
            entry = info.pointee.ai_next
        }
        throw .unreachable("\(host):\(port): \(why)")
    }

    /// Status line, headers (Content-Length or to the end; chunked is not asked for by HTTP/1.1
    /// servers that answer `Connection: close` with a length, as tabsync-server does).
    static func parse(_ bytes: [UInt8]) throws(Failure) -> Response {
        let separator: [UInt8] = [13, 10, 13, 10]
        guard let end = bytes.indices.first(where: { bytes[$0...].starts(with: separator) }) else {
            throw .badResponse("no end of headers")
        }
        let head = String(decoding: bytes[..<end], as: UTF8.self)
        let statusLine = head.split(separator: "\r\n").first.map(String.init) ?? ""
        let parts = statusLine.split(separator: " ")
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/"), let status = Int(parts[1]) else {
            throw .badResponse(String(statusLine.prefix(80)))
        }
        var body = Array(bytes[(end + 4)...])
        for line in head.split(separator: "\r\n").dropFirst() {
            let pair = line.split(separator: ":", maxSplits: 1)
            if pair.count == 2, pair[0].lowercased() == "content-length", let length = Int(pair[1].trimmingCharacters(in: .whitespaces)) {
                body = Array(body.prefix(length))
            }
        }
        return Response(status: status, body: String(decoding: body, as: UTF8.self))
    }
}
