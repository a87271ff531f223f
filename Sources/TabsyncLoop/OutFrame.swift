import CLibwebsockets

/// One encoded WebSocket message ready to send from a server, shared by every connection it goes to.
///
/// The payload sits after `LWS_PRE` bytes of headroom, as `lws_write` needs. The payload never
/// changes after creation; the headroom is scratch space `lws_write` fills with the frame header,
/// which is the same for every receiver (server frames are unmasked and no extension is
/// negotiated), and all writes happen on the one event loop thread, so sharing one buffer among
/// receivers is safe. Never hand it to a client connection: lws masks a client's payload in place
/// (``ScratchWriter`` copies instead). Created and used on the event loop thread only (not `Sendable`).
public final class OutFrame {
    /// Start of the allocation: `LWS_PRE` bytes of headroom, then the payload.
    @usableFromInline let storage: UnsafeMutableRawPointer
    /// Payload length in bytes.
    public let count: Int
    /// Binary frame (protobuf) or text frame (JSON).
    public let isBinary: Bool

    public init(bytes: [UInt8], isBinary: Bool) {
        let pre = clws_pre()
        let storage = UnsafeMutableRawPointer.allocate(byteCount: pre + max(bytes.count, 1), alignment: 16)
        bytes.withUnsafeBytes { raw in
            if let base = raw.baseAddress, raw.count > 0 {
                (storage + pre).copyMemory(from: base, byteCount: raw.count)
            }
        }
        self.storage = storage
        count = bytes.count
        self.isBinary = isBinary
    }

    deinit { storage.deallocate() }

    /// The payload start, with `LWS_PRE` writable bytes before it.
    @inlinable
    public var payload: UnsafeMutablePointer<UInt8> {
        (storage + clws_pre()).assumingMemoryBound(to: UInt8.self)
    }

    /// Bytes this frame costs a send queue: payload plus the headroom.
    @inlinable
    public var queuedCost: Int { count + clws_pre() }
}
