import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A minimal RFC 6455 client over a blocking POSIX socket, for tests only: the handshake, masked
/// frames (optionally fragmented), reading frames, and the answer to a refused handshake. It knows
/// nothing of tabsync, so a test written on it talks to the server as a client in another language
/// would. Every read is time-boxed.
final class RawWebSocket {
    enum Failure: Error, CustomStringConvertible {
        case connect(String)
        case timeout(String)
        case closedByPeer
        case protocolViolation(String)

        var description: String {
            switch self {
            case .connect(let why): "connect: \(why)"
            case .timeout(let what): "timed out waiting for \(what)"
            case .closedByPeer: "connection closed by peer"
            case .protocolViolation(let why): "protocol violation: \(why)"
            }
        }
    }

    /// What the server sent.
    enum Message: Equatable {
        case text(String)
        case binary([UInt8])
        case close(code: UInt16, reason: String)
        case ping([UInt8])
        case pong([UInt8])
    }

    /// The result of an upgrade request.
    enum Handshake {
        case upgraded(RawWebSocket, subprotocol: String)
        case refused(status: Int, body: String)
    }

    let fd: Int32
    private var buffer: [UInt8] = []
    private var chunk = [UInt8](repeating: 0, count: 65536)
    /// When true (default), pings are answered with pongs while reading.
    var answersPings = true

    private init(fd: Int32) { self.fd = fd }

    deinit { Glibc.close(fd) }

    /// Opens a TCP connection; `receiveBuffer` sets SO_RCVBUF before connecting (slow readers);
    /// `source` binds the local end to that address first (`127.0.0.2`: another peer address).
    static func tcp(port: Int, host: String = "127.0.0.1", receiveBuffer: Int? = nil, source: String? = nil) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure.connect("socket") }
        if let source {
            var local = sockaddr_in()
            local.sin_family = sa_family_t(AF_INET)
            inet_pton(AF_INET, source, &local.sin_addr)
            let bound = withUnsafePointer(to: &local) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            guard bound == 0 else {
                Glibc.close(fd)
                throw Failure.connect("bind \(source): errno \(errno)")
            }
        }
        if var size = receiveBuffer.map(Int32.init) {
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = in_port_t(UInt16(port).bigEndian)
        inet_pton(AF_INET, host, &addr.sin_addr)
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard rc == 0 else {
            Glibc.close(fd)
            throw Failure.connect("errno \(errno)")
        }
        return fd
    }

    /// Sends an upgrade request for `path` offering `subprotocols` (nil: no header at all), from
    /// `source` (a local address) when given, with an `Origin` header when given.
    static func connect(
        port: Int, path: String = "/", subprotocols: [String]?, receiveBuffer: Int? = nil,
        timeout: Double = 5, source: String? = nil, origin: String? = nil
    ) throws -> Handshake {
        let fd = try tcp(port: port, receiveBuffer: receiveBuffer, source: source)
        let socket = RawWebSocket(fd: fd)
        var request = "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nUpgrade: websocket\r\n"
        if let origin { request += "Origin: \(origin)\r\n" }
        request += "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
        if let subprotocols { request += "Sec-WebSocket-Protocol: \(subprotocols.joined(separator: ", "))\r\n" }
        request += "\r\n"
        try socket.writeAll(Array(request.utf8))
        let (status, headers, body) = try socket.readHTTPResponse(timeout: timeout, expectBody: true)
        if status == 101 {
            guard headers["sec-websocket-accept"] == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" else {
                throw Failure.protocolViolation("bad Sec-WebSocket-Accept")
            }
            return .upgraded(socket, subprotocol: headers["sec-websocket-protocol"] ?? "")
        }
        return .refused(status: status, body: body)
    }

    /// Upgrades or throws.
    static func open(
        port: Int, path: String = "/", subprotocol: String, receiveBuffer: Int? = nil, source: String? = nil
    ) throws -> RawWebSocket {
        switch try connect(port: port, path: path, subprotocols: [subprotocol], receiveBuffer: receiveBuffer, source: source) {
        case .upgraded(let socket, _): return socket
        case .refused(let status, let body): throw Failure.connect("refused \(status): \(body)")
        }
    }

    // MARK: sending

    func send(text: String) throws { try sendFrame(opcode: 0x1, payload: Array(text.utf8)) }
    func send(binary: [UInt8]) throws { try sendFrame(opcode: 0x2, payload: binary) }

    /// Sends one message split into frames of at most `fragmentSize` bytes.
    func sendFragmented(opcode: UInt8, payload: [UInt8], fragmentSize: Int) throws {
        var offset = 0
        var first = true
        repeat {
            let end = min(offset + fragmentSize, payload.count)
            try sendFrame(opcode: first ? opcode : 0x0, payload: Array(payload[offset..<end]), fin: end == payload.count)
            first = false
            offset = end
        } while offset < payload.count
    }

    func sendClose(code: UInt16 = 1000) throws {
        try sendFrame(opcode: 0x8, payload: [UInt8(code >> 8), UInt8(code & 0xFF)])
    }

    /// One masked frame.
    func sendFrame(opcode: UInt8, payload: [UInt8], fin: Bool = true) throws {
        try writeAll(Self.maskedFrame(opcode: opcode, payload: payload, fin: fin))
    }

    /// The bytes of one masked frame (to send several in one write).
    static func maskedFrame(opcode: UInt8, payload: [UInt8], fin: Bool = true) -> [UInt8] {
        var frame: [UInt8] = [(fin ? 0x80 : 0) | opcode]
        if payload.count < 126 {
            frame.append(0x80 | UInt8(payload.count))
        } else if payload.count <= 0xFFFF {
            frame.append(0x80 | 126)
            frame += [UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)]
        } else {
            frame.append(0x80 | 127)
            for shift in stride(from: 56, through: 0, by: -8) { frame.append(UInt8((payload.count >> shift) & 0xFF)) }
        }
        let mask: [UInt8] = (0..<4).map { _ in UInt8.random(in: 0...255) }
        frame += mask
        frame.reserveCapacity(frame.count + payload.count)
        for (i, byte) in payload.enumerated() { frame.append(byte ^ mask[i & 3]) }
        return frame
    }

    func writeAll(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL)) }
            if n <= 0 { throw Failure.closedByPeer }
            offset += n
        }
    }

    // MARK: receiving

    /// The next message (data, close, or a ping when not answered automatically), within `timeout` s.
    func receive(timeout: Double = 5) throws -> Message {
        let deadline = Date().addingTimeInterval(timeout)
        var fragments: [UInt8] = []
        var fragmentOpcode: UInt8 = 0
        while true {
            let (fin, opcode, payload) = try readFrame(deadline: deadline)
            switch opcode {
            case 0x0:
                fragments += payload
                if fin { return fragmentOpcode == 0x1 ? .text(String(decoding: fragments, as: UTF8.self)) : .binary(fragments) }
            case 0x1, 0x2:
                if fin { return opcode == 0x1 ? .text(String(decoding: payload, as: UTF8.self)) : .binary(payload) }
                fragmentOpcode = opcode
                fragments = payload
            case 0x8:
                let code = payload.count >= 2 ? UInt16(payload[0]) << 8 | UInt16(payload[1]) : 1005
                return .close(code: code, reason: String(decoding: payload.dropFirst(2), as: UTF8.self))
            case 0x9:
                if answersPings { try sendFrame(opcode: 0xA, payload: payload) } else { return .ping(payload) }
            case 0xA:
                return .pong(payload)
            default:
                throw Failure.protocolViolation("opcode \(opcode)")
            }
        }
    }

    /// Reads messages until a close frame; returns its code (or throws on EOF/timeout).
    func receiveClose(timeout: Double = 5) throws -> (code: UInt16, reason: String, before: [Message]) {
        let deadline = Date().addingTimeInterval(timeout)
        var before: [Message] = []
        while true {
            let message = try receive(timeout: max(0.01, deadline.timeIntervalSinceNow))
            if case .close(let code, let reason) = message { return (code, reason, before) }
            before.append(message)
        }
    }

    /// True when the peer closed the TCP connection within `timeout` s (reading and dropping data).
    func waitForEOF(timeout: Double) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        var chunk = [UInt8](repeating: 0, count: 65536)
        while Date() < deadline {
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ms = Int32(max(1, deadline.timeIntervalSinceNow * 1000))
            guard poll(&pfd, 1, ms) > 0 else { continue }
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { return true }
        }
        return false
    }

    private func readFrame(deadline: Date) throws -> (fin: Bool, opcode: UInt8, payload: [UInt8]) {
        try fill(2, deadline: deadline)
        let fin = buffer[0] & 0x80 != 0
        let opcode = buffer[0] & 0x0F
        let masked = buffer[1] & 0x80 != 0
        var length = Int(buffer[1] & 0x7F)
        var header = 2
        if length == 126 {
            try fill(4, deadline: deadline)
            length = Int(buffer[2]) << 8 | Int(buffer[3])
            header = 4
        } else if length == 127 {
            try fill(10, deadline: deadline)
            length = (2..<10).reduce(0) { $0 << 8 | Int(buffer[$1]) }
            header = 10
        }
        if masked { throw Failure.protocolViolation("server frame is masked") }
        try fill(header + length, deadline: deadline)
        let payload = Array(buffer[header..<(header + length)])
        buffer.removeSubrange(0..<(header + length))
        return (fin, opcode, payload)
    }

    private func fill(_ count: Int, deadline: Date) throws {
        while buffer.count < count {
            let remaining = deadline.timeIntervalSinceNow
            guard remaining > 0 else { throw Failure.timeout("\(count) bytes") }
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&pfd, 1, Int32(max(1, remaining * 1000)))
            if ready == 0 { continue }
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { throw Failure.closedByPeer }
            buffer.append(contentsOf: chunk[0..<n])
        }
    }

    /// Reads an HTTP response: status, lower-cased headers, body (by Content-Length).
    func readHTTPResponse(timeout: Double, expectBody: Bool) throws -> (Int, [String: String], String) {
        let deadline = Date().addingTimeInterval(timeout)
        let separator: [UInt8] = [13, 10, 13, 10]
        var end: Int?
        while end == nil {
            if let range = buffer.firstRange(of: separator) { end = range.lowerBound; break }
            try fill(buffer.count + 1, deadline: deadline)
        }
        let head = String(decoding: buffer[..<end!], as: UTF8.self)
        buffer.removeFirst(end! + 4)
        var lines = head.components(separatedBy: "\r\n")
        let statusLine = lines.removeFirst().split(separator: " ")
        let status = statusLine.count > 1 ? Int(statusLine[1]) ?? 0 : 0
        var headers: [String: String] = [:]
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        var body = ""
        if status != 101, expectBody, let length = headers["content-length"].flatMap(Int.init), length > 0 {
            try fill(length, deadline: deadline)
            body = String(decoding: buffer[..<length], as: UTF8.self)
            buffer.removeFirst(length)
        }
        return (status, headers, body)
    }
}

/// One HTTP/1.1 GET over a fresh connection (from the local address `source` when given, with
/// `Authorization: Bearer` when `bearer` is given): status and body.
func httpGet(
    port: Int, path: String, timeout: Double = 5, source: String? = nil, bearer: String? = nil
) throws -> (status: Int, body: String) {
    let fd = try RawWebSocket.tcp(port: port, source: source)
    defer { close(fd) }
    let auth = bearer.map { "Authorization: Bearer \($0)\r\n" } ?? ""
    let request = Array("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n\(auth)Connection: close\r\n\r\n".utf8)
    _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    var data: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65536)
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
        var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&pfd, 1, 100) > 0 else { continue }
        let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if n <= 0 { break }
        data += chunk[0..<n]
        if let sep = data.firstRange(of: [13, 10, 13, 10]) {
            let head = String(decoding: data[..<sep.lowerBound], as: UTF8.self).lowercased()
            if let line = head.components(separatedBy: "\r\n").first(where: { $0.hasPrefix("content-length:") }),
               let length = Int(line.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)),
               data.count >= sep.upperBound + length {
                break
            }
        }
    }
    guard let sep = data.firstRange(of: [13, 10, 13, 10]) else { throw RawWebSocket.Failure.timeout("HTTP response") }
    let head = String(decoding: data[..<sep.lowerBound], as: UTF8.self)
    let status = Int(head.split(separator: " ").dropFirst().first ?? "") ?? 0
    return (status, String(decoding: data[sep.upperBound...], as: UTF8.self))
}
