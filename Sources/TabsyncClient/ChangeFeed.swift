import Foundation
import Synchronization
import TabsyncLock
#if canImport(Glibc)
import Glibc
#endif

/// A follower of a workspace's change feed (`GET /v1/workspaces/{id}/events`, docs/design.md,
/// "The change feed") over HTTP on the server's port, or HTTPS for a `wss://` server (``FeedSocket``:
/// the certificate verified against ``Options/caFile`` or the system's CAs), that resumes by itself.
///
/// Guarantees: ``items()`` yields each version once and in order, through any number of cuts: a
/// cut stream (the server stopped, the reader was kicked off as too slow, the network dropped, or
/// nothing — not even a keep-alive comment — came for ``Options/idleTimeout``) is opened again with
/// `Last-Event-ID` = the last whole event's version, and ``FeedCursor`` drops repeats and turns a
/// gap into another reconnect, so no op is skipped or handed on twice. When the server no longer
/// holds the ops after that version it sends a `snapshot`, which is yielded as such (the reader
/// starts again from it). Reconnects wait per ``Options/backoff`` (or the server's `retry:`).
/// The stream ends with ``Failure/refused(status:message:)`` on 400, 401, 403 and 404 (a token or a
/// workspace that will not do: trying again would not help), with ``Failure/unreachable(_:)``
/// when the first connection fails (a certificate that is not trusted included) or, later, when no
/// stream could be opened for ``Options/giveUpAfter`` in a row, and with nothing when ``cancel()``
/// is called.
public final class ChangeFeed: Sendable {
    public struct Options: Sendable {
        /// The server, as the sessions' URL (`ws://HOST:PORT[/PREFIX]`; `wss://`: HTTPS).
        public var url: ServerURL
        public var workspace: String
        /// A Bearer token; empty: none.
        public var token: String
        /// Resume after this version; nil: start with a snapshot.
        public var after: UInt64?
        public var backoff: Backoff
        /// How long reconnects may fail in a row before the feed gives up.
        public var giveUpAfter: Duration
        /// Silence after which a stream is taken for dead (the server writes a comment every 15 s).
        public var idleTimeout: Duration
        /// How long a TCP connect, the TLS handshake and the answer's head may take.
        public var connectTimeout: Duration
        /// `wss://`: a PEM bundle of the CAs that may sign the server's certificate (a private CA);
        /// nil: the system's trust store.
        public var caFile: String?
        /// `wss://`: accept any certificate. For tests only: anyone in the path can pose as the server.
        public var insecureSkipVerify: Bool

        public init(
            url: ServerURL, workspace: String, token: String = "", after: UInt64? = nil,
            backoff: Backoff = Backoff(initial: .milliseconds(100), maximum: .seconds(5)),
            giveUpAfter: Duration = .seconds(60), idleTimeout: Duration = .seconds(45),
            connectTimeout: Duration = .seconds(10), caFile: String? = nil, insecureSkipVerify: Bool = false
        ) {
            self.url = url
            self.workspace = workspace
            self.token = token
            self.after = after
            self.backoff = backoff
            self.giveUpAfter = giveUpAfter
            self.idleTimeout = idleTimeout
            self.connectTimeout = connectTimeout
            self.caFile = caFile
            self.insecureSkipVerify = insecureSkipVerify
        }
    }

    /// Why a feed ended.
    public enum Failure: Error, Sendable, Equatable, CustomStringConvertible {
        /// The server refused the request for good: its status and the text of its answer.
        case refused(status: Int, message: String)
        /// No stream could be opened (first try, or for `giveUpAfter` in a row): why, last.
        case unreachable(String)

        public var description: String {
            switch self {
            case .refused(let status, let message): "the server refused the feed: HTTP \(status) \(message)"
            case .unreachable(let why): why
            }
        }
    }

    private struct Shared {
        var cancelled = false
        var socket: Int32 = -1
        var started = false
        /// Streams opened (answered 200).
        var opened = 0
    }

    public let options: Options
    private let shared = Lock(Shared())

    public init(_ options: Options) {
        self.options = options
    }

    /// Streams opened so far (1 + the resumes).
    public var streamsOpened: Int { shared.withLock { $0.opened } }

    /// The feed's items; reading starts on the first call (one call per feed). Ending the
    /// iteration (or its task) cancels the feed.
    public func items() -> AsyncThrowingStream<FeedItem, any Error> {
        let (stream, continuation) = AsyncThrowingStream.makeStream(of: FeedItem.self, throwing: (any Error).self)
        let first = shared.withLock { shared -> Bool in
            defer { shared.started = true }
            return !shared.started
        }
        guard first else {
            continuation.finish()
            return stream
        }
        continuation.onTermination = { [weak self] _ in self?.cancel() }
        let thread = Thread { [self] in
            // A TLS write to a connection the server closed must fail with EPIPE, not kill the
            // process (OpenSSL writes without MSG_NOSIGNAL): SIGPIPE stays blocked on this thread.
            var pipe = sigset_t()
            sigemptyset(&pipe)
            sigaddset(&pipe, SIGPIPE)
            pthread_sigmask(SIG_BLOCK, &pipe, nil)
            do throws(Failure) {
                try run { continuation.yield($0) }
                continuation.finish()
            } catch {
                continuation.finish(throwing: error)
            }
        }
        thread.name = "tabsync-feed"
        thread.start()
        return stream
    }

    /// Stops reading: the open stream is closed and ``items()`` ends without an error.
    public func cancel() {
        shared.withLock { shared in
            shared.cancelled = true
            if shared.socket >= 0 { Glibc.shutdown(shared.socket, Int32(SHUT_RDWR)) }
        }
    }

    private var cancelled: Bool { shared.withLock { $0.cancelled } }

    // MARK: the reading thread

    /// How one attempt ended.
    private enum Ending {
        /// The stream was open (200) and then ended or was cut: resume at once.
        case cut
        /// No stream: try again after a delay (the server's `Retry-After` when it gave one).
        case failed(String, retryAfter: Duration?)
    }

    private func run(_ yield: (FeedItem) -> Void) throws(Failure) {
        var cursor = FeedCursor(after: options.after)
        var parser = EventStreamParser()
        var attempt = 0
        var failingSince: ContinuousClock.Instant?
        while !cancelled {
            let ending = try follow(&cursor, &parser, yield)
            if cancelled { return }
            switch ending {
            case .cut:
                attempt = 0
                failingSince = nil
                // The server's `retry:` when it gave one; at once otherwise.
                if let retry = parser.retry { pause(retry) }
            case .failed(let why, let retryAfter):
                let now = ContinuousClock.now
                if shared.withLock({ $0.opened }) == 0 {
                    throw .unreachable(why)  // as the other commands: the first attempt must work
                }
                let since = failingSince ?? now
                failingSince = since
                if now - since >= options.giveUpAfter {
                    throw .unreachable("\(why); no feed for \(options.giveUpAfter)")
                }
                attempt += 1
                pause(retryAfter ?? options.backoff.delay(attempt: attempt))
            }
        }
    }

    /// Sleeps `duration` in short steps, returning early when cancelled.
    private func pause(_ duration: Duration) {
        let end = ContinuousClock.now + duration
        while !cancelled, ContinuousClock.now < end {
            Thread.sleep(forTimeInterval: min(0.05, (end - ContinuousClock.now).seconds))
        }
    }

    /// One connection: the request, the head, then events until the stream ends.
    private func follow(
        _ cursor: inout FeedCursor, _ parser: inout EventStreamParser, _ yield: (FeedItem) -> Void
    ) throws(Failure) -> Ending {
        let socket: FeedSocket
        switch FeedSocket.open(options.url, trust: trust, timeout: options.connectTimeout) {
        case .success(let opened): socket = opened
        case .failure(let why): return .failed(why, retryAfter: nil)
        }
        let registered = shared.withLock { shared -> Bool in
            guard !shared.cancelled else { return false }
            shared.socket = socket.fd
            return true
        }
        defer {
            // Unregistered before the socket closes its fd (which another socket may then reuse).
            shared.withLock { $0.socket = -1 }
            withExtendedLifetime(socket) {}
        }
        guard registered else { return .cut }
        guard socket.send(request(after: cursor.version)) else {
            return .failed("cannot send the request: \(String(cString: strerror(errno)))", retryAfter: nil)
        }
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        var received: [UInt8] = []
        let headDeadline = ContinuousClock.now + options.connectTimeout
        var head: HTTPHead?
        while head == nil {
            guard ContinuousClock.now < headDeadline else { return .failed("no answer from the server", retryAfter: nil) }
            let n = socket.read(&buffer)
            if n == 0 { return .failed("the server closed the connection before answering", retryAfter: nil) }
            if n < 0 { continue }
            received += buffer[0..<n]
            guard received.count <= 64 * 1024 else { return .failed("an answer head over 64 KiB", retryAfter: nil) }
            head = HTTPHead(parsing: &received)
        }
        guard let head else { return .cut }
        guard head.status == 200 else {
            let message = readMessage(socket, head, received, &buffer)
            if [400, 401, 403, 404].contains(head.status) { throw .refused(status: head.status, message: message) }
            return .failed("HTTP \(head.status) \(message)", retryAfter: head.retryAfter)
        }
        shared.withLock { $0.opened += 1 }
        parser.reset()
        var chunked = head.chunked ? ChunkedDecoder() : nil
        var lastHeard = ContinuousClock.now
        var body = received
        while !cancelled {
            if !body.isEmpty {
                if chunked != nil {
                    guard let decoded = try? chunked!.feed(body) else { return .cut }
                    body = decoded
                }
                for event in parser.feed(body) {
                    do throws(FeedCursor.Violation) {
                        if let item = try cursor.accept(event) { yield(item) }
                    } catch {
                        return .cut  // a gap (or a bad id): resume from the last good version
                    }
                }
                if chunked?.finished == true { return .cut }
            }
            let n = socket.read(&buffer)
            if n == 0 { return .cut }
            if n < 0 {
                if ContinuousClock.now - lastHeard > options.idleTimeout { return .cut }
                body = []
                continue
            }
            lastHeard = ContinuousClock.now
            body = Array(buffer[0..<n])
        }
        return .cut
    }

    /// The request: the feed's path under the URL's prefix, the token, `Last-Event-ID`.
    private func request(after version: UInt64?) -> [UInt8] {
        var base = String(options.url.path.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)[0])
        while base.hasSuffix("/") { base.removeLast() }
        let host = options.url.host.contains(":") ? "[\(options.url.host)]" : options.url.host
        var text = "GET \(base)/v1/workspaces/\(ServerURL.escaped(options.workspace))/events HTTP/1.1\r\n"
        text += "Host: \(host):\(options.url.port)\r\nAccept: text/event-stream\r\nCache-Control: no-store\r\n"
        if !options.token.isEmpty { text += "Authorization: Bearer \(options.token)\r\n" }
        if let version { text += "Last-Event-ID: \(version)\r\n" }
        text += "\r\n"
        return Array(text.utf8)
    }

    /// The text of a refusal's body (its first line, at most 200 characters), read for up to a second.
    private func readMessage(_ socket: FeedSocket, _ head: HTTPHead, _ received: [UInt8], _ buffer: inout [UInt8]) -> String {
        var body = received
        let wanted = min(head.contentLength ?? 4096, 4096)
        let deadline = ContinuousClock.now + .seconds(1)
        while body.count < wanted, ContinuousClock.now < deadline {
            let n = socket.read(&buffer)
            if n == 0 { break }
            if n > 0 { body += buffer[0..<n] }
        }
        let text = String(decoding: body.prefix(wanted), as: UTF8.self)
        let line = text.split(whereSeparator: \.isNewline).first.map(String.init) ?? ""
        return String(line.trimmingCharacters(in: .whitespaces).prefix(200))
    }

    private var trust: FeedSocket.Trust {
        FeedSocket.Trust(caFile: options.caFile, insecureSkipVerify: options.insecureSkipVerify)
    }
}
