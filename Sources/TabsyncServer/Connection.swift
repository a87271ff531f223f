import TabsyncCore
import TabsyncLoop
import TabsyncProto
import TabsyncServerCore

/// One WebSocket connection's I/O state: its lws handle, the message being received, the frames
/// queued to it and how its close goes out. Event loop thread only. Every protocol decision about
/// it is ``ServerCore``'s (its ``SessionMachine``); this holds only what the socket needs.
///
/// lws's per-session memory holds only ``id``; this object lives in ``LoopDriver``'s table from
/// `ESTABLISHED` until `CLOSED`.
final class Connection {
    /// Unique for the life of the server process, never 0 (lws zeroes per-session memory).
    let id: Int
    /// The lws connection. Valid until `LWS_CALLBACK_CLOSED` for this connection.
    let wsi: OpaquePointer
    /// The subprotocol picked at the handshake (unused by a diagnostics echo session).
    let format: WireFormat
    /// A diagnostics echo session: its frames go out only from `SERVER_WRITEABLE`.
    let diagnosticsEcho: Bool
    /// Fragments of the message being received.
    var rx: [UInt8] = []
    var queue = SendQueue()
    /// Where the connection is in its life (see ``State``).
    var state = State.open
    /// In the driver's flush list (frames were queued during this loop iteration). Write path
    /// only: independent of ``state`` (a closing connection still writes its queue).
    var flushPending = false
    /// `lws_callback_on_writable` was asked and `SERVER_WRITEABLE` has not come yet. Write path
    /// only, like ``flushPending``.
    var awaitingWritable = false
    /// The core asked for a ping (``ServerCore/Action/ping(_:)``): it goes out from the next
    /// `SERVER_WRITEABLE`, ahead of queued frames.
    var pingPending = false
    /// The connection carries only this session (not a stream muxed on HTTP/2), so several frames
    /// may go out as one raw write (`BatchedWriter`).
    let ownsConnection: Bool
    /// The code and reason the connection ended with (ours, or the peer's), for the close log line.
    var closeCode: UInt16 = 1006
    var closeReason = ""

    /// A connection's life, one state at a time. Later states win over earlier ones: a closing
    /// connection whose peer then closes stays `closing` (its close frame still goes out from
    /// `SERVER_WRITEABLE`), and `gone` is final.
    ///
    ///     open ─┬─ overflowed ─┐
    ///           ├─ backlogged ─┼─▶ closing ─▶ gone
    ///           └─ peerClosed ─┘
    ///
    /// `overflowed` and `backlogged` last only until the core's close, which the same dispatch
    /// carries out (``LoopDriver/dispatch(_:)``).
    enum State: Equatable {
        /// Frames are received and may be queued.
        case open
        /// The message being received went over the size limit: nothing more is received (the
        /// core was told; it closes the session).
        case overflowed
        /// The queue would have passed its bound: the core was told (it closes the session);
        /// nothing more is queued meanwhile.
        case backlogged
        /// The peer sent a close frame (lws answers it): nothing more is sent or received.
        case peerClosed
        /// The session is closing: it closes once its queue is written.
        case closing
        /// `LWS_CALLBACK_CLOSED` came: ``wsi`` is no longer valid.
        case gone
    }

    init(id: Int, wsi: OpaquePointer, format: WireFormat, diagnosticsEcho: Bool) {
        self.id = id
        self.wsi = wsi
        self.format = format
        self.diagnosticsEcho = diagnosticsEcho
        ownsConnection = BatchedWriter.ownsConnection(wsi)
    }

    /// Frames may still be queued to it.
    var isOpen: Bool { state == .open || state == .overflowed }
    /// What the peer sends is still read.
    var isReceiving: Bool { state == .open || state == .backlogged }
    /// Closing or gone: a close goes out no more.
    var isClosingOrGone: Bool { state == .closing || state == .gone }
}
