import Foundation
import TabsyncProto
#if canImport(Glibc)
import Glibc
#endif

/// An HTTP write (`POST /v1/workspaces/{id}/ops` with `Idempotency-Key`, docs/design.md, "HTTP
/// writes") over plain HTTP on the server's port: ops made without holding a session.
///
/// Guarantees: ``write(workspace:ops:key:)`` sends one body under one key however often it tries,
/// so its ops are applied at most once (the server maps the key onto its (client, seq) dedup). It
/// tries again, with the same key and body, only where nothing was refused: after a 503 or a 429
/// (waiting its `Retry-After`, at most ``Options/maxWait``) and after an answer lost on the way (no
/// connection, a connection closed or silent before a whole answer), with a doubling jittered
/// wait, until ``Options/deadline`` has passed; then ``Failure/unreachable(_:)`` or the last
/// ``Failure/refused(status:code:message:)``. Any other refusal ends it at once (422: the key was
/// used with another body, and nothing of this body was applied). Each try runs on a thread of its
/// own, never on the caller's executor. `wss://` servers are refused (``Failure/tlsUnsupported``).
public struct HTTPWriter: Sendable {
    public struct Options: Sendable {
        /// The server, as the sessions' URL (`ws://HOST:PORT[/PREFIX]`).
        public var url: ServerURL
        /// A Bearer token; empty: none.
        public var token: String
        /// How long the write may keep trying.
        public var deadline: Duration
        /// The longest wait between tries.
        public var maxWait: Duration
        /// How long one try may take (connect, send, the whole answer).
        public var timeout: Duration

        public init(url: ServerURL, token: String = "", deadline: Duration = .seconds(60), maxWait: Duration = .seconds(10),
                    timeout: Duration = .seconds(30)) {
            self.url = url
            self.token = token
            self.deadline = deadline
            self.maxWait = maxWait
            self.timeout = timeout
        }
    }

    /// One op's answer, in body order.
    public enum Result: Sendable, Equatable {
        /// Stored at `version`, as `op` (the server's canonical form).
        case applied(version: UInt64, op: Tabsync_V1_Op)
        /// Refused in its place (the wire code and message); the other ops are not affected.
        case refused(code: String, message: String)
    }

    public enum Failure: Error, Sendable, Equatable, CustomStringConvertible {
        /// The server refused the write: the status, the wire code and its message.
        case refused(status: Int, code: String, message: String)
        /// No answer came before the deadline: why, last.
        case unreachable(String)
        case tlsUnsupported

        public var description: String {
            switch self {
            case .refused(let status, let code, let message): "the server refused the write: HTTP \(status) \(code) \(message)"
            case .unreachable(let why): why
            case .tlsUnsupported: "the HTTP writer speaks plain HTTP only: use a ws:// server URL"
            }
        }
    }

    public let options: Options

    public init(_ options: Options) throws(Failure) {
        guard !options.url.usesTLS else { throw .tlsUnsupported }
        self.options = options
    }

    /// Writes `ops` under `key` (1–64 of `A–Z a–z 0–9 - _ . : ~`); the results, one per op.
    public func write(workspace: String, ops: [Tabsync_V1_Op], key: String) async throws(Failure) -> [Result] {
        let body = Self.body(ops)
        let request = request(workspace: workspace, key: key, body: body)
        let until = ContinuousClock.now + options.deadline
        var delay = Duration.milliseconds(100)
        while true {
            let outcome = await onThread { attempt(request) }
            var wait = delay * Double.random(in: 0.5...1)
            let failure: Failure
            switch outcome {
            case .answered(let results):
                return results
            case .refused(let status, let code, let message, let retryAfter):
                failure = .refused(status: status, code: code, message: message)
                guard status == 503 || status == 429 else { throw failure }
                if let retryAfter, retryAfter > wait { wait = retryAfter }
            case .lost(let why):
                failure = .unreachable(why)
            }
            wait = min(wait, options.maxWait)
            guard ContinuousClock.now + wait <= until else { throw failure }
            try? await Task.sleep(for: wait)
            delay = min(delay * 2, options.maxWait)
        }
    }

    // MARK: one try

    private enum Outcome: Sendable {
        case answered([Result])
        case refused(status: Int, code: String, message: String, retryAfter: Duration?)
        case lost(String)
    }

    private func onThread(_ work: @escaping @Sendable () -> Outcome) async -> Outcome {
        await withCheckedContinuation { continuation in
            Thread.detachNewThread { continuation.resume(returning: work()) }
        }
    }

    /// One request on a connection of its own (`Connection: close`), read to its whole answer.
    private func attempt(_ request: [UInt8]) -> Outcome {
        let socket: Int32
        switch PlainSocket.connect(options.url, connectTimeout: options.timeout, receiveTimeout: .milliseconds(200)) {
        case .success(let fd): socket = fd
        case .failure(let why): return .lost(why)
        }
        defer { close(socket) }
        guard PlainSocket.send(socket, request) else { return .lost("cannot send the request: \(String(cString: strerror(errno)))") }
        let deadline = ContinuousClock.now + options.timeout
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        var received: [UInt8] = []
        var head: HTTPHead?
        while ContinuousClock.now < deadline {
            if let head, let length = head.contentLength, received.count >= length { break }
            let n = PlainSocket.read(socket, &buffer)
            if n == 0 { break }
            if n < 0 { continue }
            received += buffer[0..<n]
            if head == nil { head = HTTPHead(parsing: &received) }
        }
        guard let head, !head.chunked, received.count >= (head.contentLength ?? received.count), !received.isEmpty else {
            return .lost("the connection ended before a whole answer")
        }
        let object = (try? JSONSerialization.jsonObject(with: Data(received))) as? [String: Any]
        guard head.status == 200 else {
            let error = object?["error"] as? [String: Any]
            let text = String(decoding: received, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            return .refused(status: head.status, code: error?["code"] as? String ?? "", message: error?["message"] as? String ?? text,
                            retryAfter: head.retryAfter)
        }
        guard let results = object?["results"] as? [[String: Any]], let parsed = Self.results(results) else {
            return .refused(status: head.status, code: "", message: "an answer without results", retryAfter: nil)
        }
        return .answered(parsed)
    }

    private static func results(_ items: [[String: Any]]) -> [Result]? {
        var out: [Result] = []
        for item in items {
            if let error = item["error"] as? [String: Any] {
                out.append(.refused(code: error["code"] as? String ?? "", message: error["message"] as? String ?? ""))
            } else if let version = (item["version"] as? String).flatMap(UInt64.init), let op = item["op"],
                      let data = try? JSONSerialization.data(withJSONObject: op), let wire = try? Tabsync_V1_Op(jsonUTF8Data: data) {
                out.append(.applied(version: version, op: wire))
            } else {
                return nil
            }
        }
        return out
    }

    static func body(_ ops: [Tabsync_V1_Op]) -> [UInt8] {
        let items = ops.map { (try? $0.jsonString()) ?? "{}" }
        return Array(("{\"ops\":[" + items.joined(separator: ",") + "]}").utf8)
    }

    private func request(workspace: String, key: String, body: [UInt8]) -> [UInt8] {
        var base = String(options.url.path.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)[0])
        while base.hasSuffix("/") { base.removeLast() }
        let host = options.url.host.contains(":") ? "[\(options.url.host)]" : options.url.host
        var text = "POST \(base)/v1/workspaces/\(ServerURL.escaped(workspace))/ops HTTP/1.1\r\n"
        text += "Host: \(host):\(options.url.port)\r\nContent-Type: application/json\r\nAccept: application/json\r\n"
        text += "Connection: close\r\nIdempotency-Key: \(key)\r\nContent-Length: \(body.count)\r\n"
        if !options.token.isEmpty { text += "Authorization: Bearer \(options.token)\r\n" }
        text += "\r\n"
        return Array(text.utf8) + body
    }
}
