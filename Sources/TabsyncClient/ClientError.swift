import TabsyncCore

/// Why a client call failed. Each case says what went wrong; none of them is sent to the server.
public enum ClientError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The server address is not a `ws://` or `wss://` URL this client can use.
    case invalidURL(String)
    /// libwebsockets could not create its client context (TLS set-up, out of memory, fd limit).
    case loopUnavailable(String)
    /// The client was closed (by `close()` or because its loop shut down); nothing more will happen.
    case closed
    /// A wait ran out of time before its condition held.
    case timedOut(Duration)
    /// The server refused this client for good (an `Error` answer to its `Hello`): it will not retry.
    case refused(ErrorCode, String)
    /// An operator ended the session for good (4408: kicked; 4410: the workspace was deleted): the
    /// client does not reconnect on its own (docs/design.md, "Close codes").
    case ended(code: UInt16, reason: String)
    /// The server could not answer a history query (its `HistoryAnswer.error`): out of the
    /// retention window, no such tab, not permitted. nil code: one this client does not know.
    case queryFailed(ErrorCode?, String)
    /// The connection a history query was sent on ended before its answer came (the client
    /// reconnects on its own; ask again).
    case connectionLost(String)

    public var description: String {
        switch self {
        case .invalidURL(let why): "invalid server URL \(why)"
        case .loopUnavailable(let why): "the client event loop could not start: \(why)"
        case .closed: "the client is closed"
        case .timedOut(let duration): "timed out after \(duration)"
        case .refused(let code, let message): "refused by the server: \(code.wireName) \(message)"
        case .ended(let code, let reason): "the server ended the session (\(code): \(reason)); not reconnecting"
        case .queryFailed(let code, let message): "the server could not answer: \(code?.wireName ?? "UNKNOWN") \(message)"
        case .connectionLost(let why): "the connection ended before the answer came: \(why)"
        }
    }
}
