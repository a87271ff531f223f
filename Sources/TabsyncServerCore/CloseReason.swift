import Logging
import TabsyncCore

/// Every reason the server closes a WebSocket session: its close code, the reason text sent in
/// the close frame, the level its log line is written at, and whether the frames queued before it
/// go out first. The one place a close code is chosen (docs/design.md, "Close codes").
///
/// Guarantees: the code and text of a reason never depend on anything but the case and its
/// payload; the text is at most 120 bytes of UTF-8 (cut on a scalar boundary), so it always fits a
/// close frame (123 bytes); no case carries a token or any other secret.
package enum CloseReason: Equatable, Sendable {
    /// The server is stopping (1001); the client reconnects to another node or once it is back.
    case shuttingDown
    /// A frame that does not decode as a `ClientMessage` in the session's subprotocol (1007).
    case undecodableFrame
    /// A binary frame on the JSON subprotocol, or a text frame on the protobuf one (1007).
    case wrongFrameType(binary: Bool, subprotocol: String)
    /// A client message over `maxFrameBytes` (1009).
    case messageTooBig(limit: Int)
    /// Ops refused `RATE_LIMITED` for `rateLimitStrikes` seconds in a row (1008).
    case rateLimitAbuse
    /// The session's send queue went over `maxSendQueueBytes` (1013); it resumes.
    case slowReader
    /// The store could not read the workspace, or a `Welcome` could not be made durable (1013).
    case storeUnavailable
    /// A commit lost its answer and its outcome is unknown (1013): the client resumes and learns
    /// what became of its seqs from `Welcome.lastSeq` and the missed ops.
    case commitOutcomeUnknown
    /// The workspace fell behind the store and cannot catch up op by op (1013): resume.
    case behindStore
    /// A read back found another history in the store (1013): resume, or take a snapshot.
    case storeChanged
    /// A protocol violation or a refused Hello, after `Error{code}` (4400).
    case protocolViolation(ErrorCode)
    /// The session upgraded on `/v1/workspaces/{path}/ws` and its `Hello` names another workspace
    /// (4400, after `Error{PROTOCOL_ERROR}`): a client bug, never retried unchanged
    /// (docs/design.md, "Close codes").
    case workspaceNotInPath(path: String, hello: String)
    /// A missing, invalid or expired token, or one for another workspace (4401); `code` is the
    /// error the `Error` message carried.
    case unauthorized(ErrorCode)
    /// The workspace is split across nodes and another node holds it more recently (where the
    /// proxy now sends its new sessions): this node hands it over (4307, "moved"). The client
    /// reconnects at once through the proxy and resumes by `lastVersion` + epoch.
    case moved
    /// An operator closed the session (the admin API's kick, 4408): the client does not reconnect
    /// on its own.
    case kicked
    /// An operator deleted the workspace (4410): the client does not reconnect on its own.
    case workspaceDeleted
    /// A quota of the operator's (connections per sub or per workspace) refused the session
    /// (4429, after `Error LIMIT_EXCEEDED`): the client retries with back-off.
    case overQuota
    /// A write to the socket failed: the connection is dropped (1006 is never sent on the wire;
    /// it only names the ending in the log).
    case writeFailed
    /// Nothing (no frame, no pong) came from the peer for the idle timeout: the connection is
    /// dropped without a close frame (a silent peer is most likely gone; 1006 names the ending in
    /// the log only, like ``writeFailed``).
    case idleTimeout

    /// The WebSocket close code.
    package var code: UInt16 {
        switch self {
        case .shuttingDown: 1001
        case .undecodableFrame, .wrongFrameType: 1007
        case .rateLimitAbuse: 1008
        case .messageTooBig: 1009
        case .slowReader, .storeUnavailable, .commitOutcomeUnknown, .behindStore, .storeChanged: 1013
        case .protocolViolation, .workspaceNotInPath: 4400
        case .unauthorized: 4401
        case .moved: 4307
        case .kicked: 4408
        case .workspaceDeleted: 4410
        case .overQuota: 4429
        case .writeFailed, .idleTimeout: 1006
        }
    }

    /// The reason text of the close frame.
    package var text: String {
        let text: String =
            switch self {
            case .shuttingDown: "server shutting down"
            case .undecodableFrame: "undecodable frame"
            case .wrongFrameType(let binary, let subprotocol): "\(binary ? "binary" : "text") frame on \(subprotocol)"
            case .messageTooBig(let limit): "message over \(limit) bytes"
            case .rateLimitAbuse: "sustained op rate over the limit"
            case .slowReader: "reading too slowly"
            case .storeUnavailable: "store unavailable"
            case .commitOutcomeUnknown: "store commit outcome unknown: resume"
            case .behindStore: "behind the store: resume"
            case .storeChanged: "the store changed: resume"
            case .protocolViolation(let code), .unauthorized(let code): code.wireName
            case .workspaceNotInPath: "\(ErrorCode.protocolError.wireName): Hello workspace differs from the URL path"
            case .moved: "moved: reconnect"
            case .kicked: "closed by an operator"
            case .workspaceDeleted: "the workspace was deleted"
            case .overQuota: "over a quota: \(ErrorCode.limitExceeded.wireName)"
            case .writeFailed: "write failed"
            case .idleTimeout: "idle timeout"
            }
        return Self.cut(text, to: 120)
    }

    /// The level of the close's log line: what an operator should notice is a warning.
    package var logLevel: Logger.Level {
        switch self {
        case .shuttingDown, .protocolViolation, .workspaceNotInPath, .unauthorized, .undecodableFrame, .wrongFrameType: .info
        case .messageTooBig, .writeFailed, .idleTimeout, .moved, .overQuota: .info
        case .kicked, .workspaceDeleted: .notice
        case .rateLimitAbuse, .slowReader, .behindStore, .storeChanged: .warning
        case .storeUnavailable, .commitOutcomeUnknown: .warning
        }
    }

    /// True when the driver logs each close of this reason: all but a graceful stop's 1001, which
    /// closes every session at once (the stop itself is logged).
    package var isLoggedEachTime: Bool { self != .shuttingDown }

    /// True when the frames queued before the close go out first (an `Error` before 4400, acks
    /// before 1001); false when they are dropped (a reader that cannot keep up, a broken frame).
    package var flushesQueue: Bool {
        switch self {
        case .messageTooBig, .undecodableFrame, .wrongFrameType, .slowReader, .writeFailed, .idleTimeout: false
        default: true
        }
    }

    /// True when the close waits for the answers the commit pipeline owes the session (the server
    /// sends a pending `Rejected` before any close: docs/design.md, "Close codes"). Not a close
    /// that drops the queue (nothing more can reach that client), nor a stop (it closes once the
    /// pipeline is idle, or at its deadline when nothing more can be answered), nor a deleted
    /// workspace (its sessions leave it at once and stop for good: their answers name nothing), nor
    /// a token that expired or was revoked (nothing more of the workspace goes to it; the client
    /// sends its seqs again once it has a valid token).
    package var waitsForAnswers: Bool {
        switch self {
        case .shuttingDown, .workspaceDeleted, .unauthorized: false
        default: flushesQueue
        }
    }

    /// At most `limit` bytes of `text`, cut on a scalar boundary.
    static func cut(_ text: String, to limit: Int) -> String {
        guard text.utf8.count > limit else { return text }
        var out = ""
        var bytes = 0
        for scalar in text.unicodeScalars {
            let size = String(scalar).utf8.count
            if bytes + size > limit { break }
            bytes += size
            out.unicodeScalars.append(scalar)
        }
        return out
    }
}
