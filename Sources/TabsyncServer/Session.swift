import TabsyncCore
import TabsyncLoop
import TabsyncProto

/// One WebSocket connection's state. Event loop thread only.
///
/// lws's per-session memory holds only ``id``; this object lives in ``Server/Loop``'s table from
/// `ESTABLISHED` until `CLOSED`.
final class Session {
    /// Unique for the life of the server process, never 0 (lws zeroes per-session memory).
    let id: Int
    /// The lws connection. Valid until `LWS_CALLBACK_CLOSED` for this session.
    let wsi: OpaquePointer
    /// The subprotocol picked at the handshake (unused by a diagnostics echo session).
    let format: WireFormat
    /// A diagnostics echo session (`tabsync.echo`, Server+DiagnosticsEcho.swift): it never says
    /// Hello nor joins a workspace; each message it sends is sent back.
    let diagnosticsEcho: Bool
    let openedAt: ContinuousClock.Instant

    var phase: Phase = .awaitingHello
    /// Fragments of the message being received.
    var rx: [UInt8] = []
    /// Set once the message being received went over the size limit (the session is closing).
    var rxOverflow = false
    var queue = SendQueue()
    /// In the loop's flush list (frames were queued during this loop iteration).
    var flushPending = false
    /// `lws_callback_on_writable` was asked and `SERVER_WRITEABLE` has not come yet.
    var awaitingWritable = false
    /// `LWS_CALLBACK_CLOSED` came: ``wsi`` is no longer valid.
    var gone = false
    /// The peer sent a close frame (lws answers it): nothing more is sent or received.
    var peerClosed = false
    /// The connection carries only this session (not a stream muxed on HTTP/2), so several frames
    /// may go out as one raw write (`BatchedWriter`).
    let ownsConnection: Bool
    /// Messages that arrived while the workspace was loading, handled after `Welcome`.
    var deferred: [Tabsync_V1_ClientMessage] = []
    /// When set, the session closes with this code once its queue is written.
    var closing: Close?
    /// The code and reason the connection ended with (ours, or the peer's), for the close log line.
    var closeCode: UInt16 = 1006
    var closeReason = ""

    /// The op token bucket: `tokens` refill at `maxOpsPerSecond`, up to that many.
    var tokens: Double
    var tokensAt: ContinuousClock.Instant
    /// Consecutive seconds in which an op was refused `RATE_LIMITED`, and the last such second.
    var rateStrikes = 0
    var lastStrikeSecond: Int64 = -1
    /// What the session's token grants (nil when the server runs without access control). Its
    /// expiry is checked again at every Submit and when the session's timer fires.
    var access: AccessGrant?

    enum Phase {
        case awaitingHello
        /// Hello well-formed; its token is being checked (access control on). Nothing of the
        /// workspace is known to the session, nor the session to the workspace.
        case authenticating(Hello)
        /// Hello accepted; waiting for the workspace to load from the store.
        case loading(Hello)
        case joined(Hello)
    }

    /// What a session said in its `Hello`, checked.
    struct Hello {
        var workspaceId: String
        var clientId: String
        var clientName: String
        var lastVersion: UInt64
        var epoch: String
        var focusTabId = ""
        /// The full peer list once, then only changes (`Hello.presenceDeltas`).
        var presenceDeltas = false
    }

    struct Close {
        var code: UInt16
        var reason: String
    }

    init(
        id: Int, wsi: OpaquePointer, format: WireFormat, opsPerSecond: Int, now: ContinuousClock.Instant,
        diagnosticsEcho: Bool = false
    ) {
        self.id = id
        self.wsi = wsi
        self.format = format
        self.diagnosticsEcho = diagnosticsEcho
        self.openedAt = now
        ownsConnection = BatchedWriter.ownsConnection(wsi)
        tokens = Double(opsPerSecond)
        tokensAt = now
    }

    var hello: Hello? {
        switch phase {
        case .awaitingHello, .authenticating: nil
        case .loading(let hello), .joined(let hello): hello
        }
    }

    var workspaceId: String? { hello?.workspaceId }

    /// Takes one op token; false when the bucket is empty (refilled at `rate` per second).
    func takeToken(rate: Int, now: ContinuousClock.Instant) -> Bool {
        let elapsed = Double((now - tokensAt).microseconds) / 1_000_000
        tokens = min(Double(rate), tokens + elapsed * Double(rate))
        tokensAt = now
        guard tokens >= 1 else { return false }
        tokens -= 1
        return true
    }
}
