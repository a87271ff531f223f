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
    /// Set once the message being received went over the size limit (the session is closing).
    var rxOverflow = false
    var queue = SendQueue()
    /// In the driver's flush list (frames were queued during this loop iteration).
    var flushPending = false
    /// `lws_callback_on_writable` was asked and `SERVER_WRITEABLE` has not come yet.
    var awaitingWritable = false
    /// `LWS_CALLBACK_CLOSED` came: ``wsi`` is no longer valid.
    var gone = false
    /// The peer sent a close frame (lws answers it): nothing more is sent or received.
    var peerClosed = false
    /// The queue would have passed its bound: the core was told (it closes the session); nothing
    /// more is queued meanwhile.
    var backlogReported = false
    /// The connection carries only this session (not a stream muxed on HTTP/2), so several frames
    /// may go out as one raw write (`BatchedWriter`).
    let ownsConnection: Bool
    /// The session is closing: it closes once its queue is written.
    var closing = false
    /// The code and reason the connection ended with (ours, or the peer's), for the close log line.
    var closeCode: UInt16 = 1006
    var closeReason = ""

    init(id: Int, wsi: OpaquePointer, format: WireFormat, diagnosticsEcho: Bool) {
        self.id = id
        self.wsi = wsi
        self.format = format
        self.diagnosticsEcho = diagnosticsEcho
        ownsConnection = BatchedWriter.ownsConnection(wsi)
    }

    /// Frames may still be queued to it.
    var isOpen: Bool { !closing && !gone && !peerClosed && !backlogReported }
}
