/// How one connection (or one attempt to make it) ended.
public struct ConnectionEnding: Sendable, Equatable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        /// The connection never opened: refused, unreachable, TLS or handshake failure.
        case failedToConnect
        /// The server sent a close frame (its code and reason are in `code` and `reason`).
        case closedByServer
        /// This side closed it: `close()`, `reconnect()`, a resync, or the loop shutting down.
        case closedLocally
        /// The socket went away without a close handshake (reset, killed, timed out).
        case lost
    }

    public var kind: Kind
    /// The WebSocket close code when one was exchanged.
    public var code: UInt16?
    public var reason: String

    public init(kind: Kind, code: UInt16? = nil, reason: String = "") {
        self.kind = kind
        self.code = code
        self.reason = reason
    }

    public var description: String {
        var text = "\(kind)"
        if let code { text += " \(code)" }
        if !reason.isEmpty { text += " (\(reason))" }
        return text
    }
}
