import Foundation
import Synchronization
import TabsyncLock

#if canImport(Glibc)
import Glibc
#endif

/// A TCP proxy on 127.0.0.1 between a client under test and a real server (PostgreSQL, say), that
/// can cut a connection at a chosen message: how a test makes "the connection broke during COMMIT"
/// happen on purpose, with the real server on the other side.
///
/// Guarantees:
/// - Bytes are forwarded unchanged, in order, both ways, for every accepted connection, until a
///   cut or until either side closes (then both are closed).
/// - An armed cut fires once, on the first client-to-server chunk that contains its pattern (the
///   chunk as one `read` returned it: a short message sent in one write, such as a statement, is
///   one chunk on loopback), or that starts the Nth WebSocket binary frame the client sends after
///   arming (frames are counted from their headers, which masking leaves readable, however the
///   chunks split or join them), then disarms:
///   - ``Cut/beforeForwarding``: the chunk is dropped and both sides are closed (the server never
///     saw it);
///   - ``Cut/afterAnswer``: the chunk is forwarded, the proxy waits for the server's first answer
///     to it, drops that answer and closes both sides (the server did it; the client never hears).
/// - While ``refusing`` is set, new connections are accepted and closed at once.
/// - ``close()`` stops listening and closes every connection; the proxy's threads hold it until
///   then, so a test closes it (`defer { proxy.close() }`).
package final class TCPFaultProxy: @unchecked Sendable {
    package enum Cut: Sendable {
        case beforeForwarding
        case afterAnswer
    }

    /// The port the proxy listens on (127.0.0.1).
    package let port: Int
    private let targetHost: String
    private let targetPort: Int
    private let listener: Int32
    private struct State {
        var armed: (trigger: Trigger, cut: Cut)?
        var refusing = false
        var cuts = 0
        var sockets: Set<Int32> = []
        var closed = false
    }
    private let state = Lock(State())
    private enum Trigger {
        case pattern([UInt8])
        /// Binary frames still to start before the cut; the chunk starting the last one is cut.
        case binaryFrames(Int)
    }

    /// Listens on an ephemeral port of 127.0.0.1 and forwards to `host`:`port`.
    package init(toHost host: String, port: Int) throws {
        targetHost = host
        targetPort = port
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw ProxyError("socket: \(String(cString: strerror(errno)))") }
        var address = Self.loopback(port: 0)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(fd, 16) == 0 else {
            Glibc.close(fd)
            throw ProxyError("bind/listen: \(String(cString: strerror(errno)))")
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        listener = fd
        self.port = Int(UInt16(bigEndian: address.sin_port))
        let thread = Thread { self.acceptLoop() }
        thread.start()
    }

    /// The same proxy for a `postgres://user@host:port/db` URL; ``url(_:)`` gives the URL through it.
    package convenience init(forURL url: String) throws {
        guard let components = URLComponents(string: url), let host = components.host, let port = components.port else {
            throw ProxyError("no host and port in \(url)")
        }
        try self.init(toHost: host, port: port)
    }

    /// `url` with its host and port replaced by the proxy's.
    package func url(_ url: String) -> String {
        guard var components = URLComponents(string: url) else { return url }
        components.host = "127.0.0.1"
        components.port = port
        return components.string ?? url
    }

    /// Cuts the next connection whose client sends a chunk containing `pattern`.
    package func arm(on pattern: String, _ cut: Cut) {
        arm(onBytes: Array(pattern.utf8), cut)
    }

    /// Cuts the next connection whose client sends a chunk containing these bytes.
    package func arm(onBytes pattern: [UInt8], _ cut: Cut) {
        state.withLock { $0.armed = (.pattern(pattern), cut) }
    }

    /// Cuts the connection whose client starts its `count`th WebSocket binary frame from now (a
    /// client's payloads are masked, and one `read` may hold several frames or part of one: the
    /// frames are told by their headers). Meant for a proxy with one client connection.
    package func arm(onBinaryFrame count: Int, _ cut: Cut) {
        precondition(count >= 1)
        state.withLock { $0.armed = (.binaryFrames(count), cut) }
    }

    /// While true, new connections are closed as soon as they are accepted.
    package var refusing: Bool {
        get { state.withLock { $0.refusing } }
        set { state.withLock { $0.refusing = newValue } }
    }

    /// Cuts made so far.
    package var cuts: Int { state.withLock { $0.cuts } }

    /// Stops listening and closes every connection. Idempotent.
    package func close() {
        let sockets = state.withLock { state -> Set<Int32> in
            guard !state.closed else { return [] }
            state.closed = true
            return state.sockets
        }
        shutdown(listener, Int32(SHUT_RDWR))
        for fd in sockets { shutdown(fd, Int32(SHUT_RDWR)) }
    }

    private func acceptLoop() {
        while true {
            let client = accept(listener, nil, nil)
            if client < 0 {
                if errno == EINTR { continue }
                break
            }
            let refuse = state.withLock { $0.refusing || $0.closed }
            guard !refuse, let server = connectToTarget() else {
                Glibc.close(client)
                continue
            }
            let registered = state.withLock { state -> Bool in
                guard !state.closed else { return false }
                state.sockets.formUnion([client, server])
                return true
            }
            guard registered else {
                Glibc.close(client)
                Glibc.close(server)
                continue
            }
            let pair = Pair(client: client, server: server)
            Thread { self.forwardClientToServer(pair) }.start()
            Thread { self.forwardServerToClient(pair) }.start()
        }
        Glibc.close(listener)
    }

    /// One proxied connection; its cut state is shared by its two forwarding threads.
    private final class Pair: @unchecked Sendable {
        let client: Int32
        let server: Int32
        /// Set by the client-to-server thread when it forwarded the armed chunk: the next answer is dropped.
        let dropNextAnswer = Atomic<Bool>(false)
        let ended = Atomic<Bool>(false)
        /// The client's WebSocket frames, read by the client-to-server thread only.
        var frames = WebSocketFrameReader()
        init(client: Int32, server: Int32) {
            self.client = client
            self.server = server
        }
    }

    private func forwardClientToServer(_ pair: Pair) {
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let n = read(pair.client, &buffer, buffer.count)
            guard n > 0 else { break }
            let chunk = Array(buffer[0..<n])
            let binaryFrames = pair.frames.binaryFramesStarted(in: chunk)
            let cut = state.withLock { state -> Cut? in
                guard let armed = state.armed else { return nil }
                switch armed.trigger {
                case .pattern(let pattern):
                    guard Self.contains(chunk, pattern) else { return nil }
                case .binaryFrames(let count):
                    guard binaryFrames >= count else {
                        state.armed = (.binaryFrames(count - binaryFrames), armed.cut)
                        return nil
                    }
                }
                state.armed = nil
                state.cuts += 1
                return armed.cut
            }
            if cut == .beforeForwarding { break }
            if cut == .afterAnswer { pair.dropNextAnswer.store(true, ordering: .sequentiallyConsistent) }
            guard Self.writeAll(pair.server, chunk) else { break }
            if cut == .afterAnswer { return }  // the other thread ends the pair at the answer
        }
        end(pair)
    }

    private func forwardServerToClient(_ pair: Pair) {
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let n = read(pair.server, &buffer, buffer.count)
            guard n > 0 else { break }
            if pair.dropNextAnswer.load(ordering: .sequentiallyConsistent) { break }
            guard Self.writeAll(pair.client, Array(buffer[0..<n])) else { break }
        }
        end(pair)
    }

    private func end(_ pair: Pair) {
        guard !pair.ended.exchange(true, ordering: .sequentiallyConsistent) else { return }
        state.withLock { $0.sockets.subtract([pair.client, pair.server]) }
        shutdown(pair.client, Int32(SHUT_RDWR))
        shutdown(pair.server, Int32(SHUT_RDWR))
        Glibc.close(pair.client)
        Glibc.close(pair.server)
    }

    private func connectToTarget() -> Int32? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return nil }
        var address = Self.loopback(port: targetPort)
        if targetHost != "127.0.0.1" && targetHost != "localhost" {
            guard inet_pton(AF_INET, targetHost, &address.sin_addr) == 1 else {
                Glibc.close(fd)
                return nil
            }
        }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            Glibc.close(fd)
            return nil
        }
        return fd
    }

    private static func loopback(port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = in_addr_t(UInt32(0x7F00_0001).bigEndian)
        return address
    }

    private static func writeAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return false }
            offset += n
        }
        return true
    }

    private static func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard !needle.isEmpty, haystack.count >= needle.count else { return false }
        for start in 0...(haystack.count - needle.count) where haystack[start] == needle[0] {
            if haystack[start..<(start + needle.count)].elementsEqual(needle) { return true }
        }
        return false
    }

    package struct ProxyError: Error, CustomStringConvertible {
        package var description: String
        init(_ description: String) { self.description = description }
    }
}

/// Finds where a WebSocket client's frames start in a byte stream read in arbitrary chunks, after
/// the HTTP upgrade request (RFC 6455 section 5.2: the header's lengths are not masked, only the
/// payload is).
struct WebSocketFrameReader {
    /// The upgrade request's last bytes read, until its blank line ends it.
    private var requestTail: [UInt8] = []
    private var upgraded = false
    private var header: [UInt8] = []
    private var payloadLeft: UInt64 = 0

    /// The binary frames (opcode 2) whose header ends in `chunk`, the stream's next bytes.
    mutating func binaryFramesStarted(in chunk: [UInt8]) -> Int {
        var started = 0
        var index = 0
        while index < chunk.count {
            if !upgraded {
                requestTail = Array((requestTail + [chunk[index]]).suffix(4))
                upgraded = requestTail == Array("\r\n\r\n".utf8)
                index += 1
                continue
            }
            if payloadLeft > 0 {
                let skipped = Int(min(payloadLeft, UInt64(chunk.count - index)))
                payloadLeft -= UInt64(skipped)
                index += skipped
                continue
            }
            header.append(chunk[index])
            index += 1
            guard header.count >= 2 else { continue }
            let shortLength = header[1] & 0x7F
            let lengthBytes = shortLength == 126 ? 2 : shortLength == 127 ? 8 : 0
            let maskBytes = header[1] & 0x80 != 0 ? 4 : 0
            guard header.count == 2 + lengthBytes + maskBytes else { continue }
            payloadLeft = lengthBytes == 0
                ? UInt64(shortLength) : header[2..<(2 + lengthBytes)].reduce(0) { $0 << 8 | UInt64($1) }
            if header[0] & 0x0F == 2 { started += 1 }
            header.removeAll(keepingCapacity: true)
        }
        return started
    }
}
