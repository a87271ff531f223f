import CLibwebsockets

/// A reusable buffer that packs several frames, each with its WebSocket header, into one write
/// (``BatchedWriter`` sends it raw). Server frames only: unmasked, no extension (no RSV bits), so a
/// header is the FIN bit and opcode, then the payload length (7 bits, or 126 + 16 bits, or
/// 127 + 64 bits, network order), RFC 6455 §5.2.
///
/// Guarantees: it holds only whole frames, at most ``capacity`` bytes of them; ``append(_:)``
/// either adds a whole frame or nothing. Owns its memory: ``deallocate()`` once. Event loop thread only.
public struct OutBatch {
    /// Bytes of frames one batch holds by default (one TCP send's worth).
    public static let defaultCapacity = 16 * 1024

    /// Bytes of frames this batch holds at most.
    public let capacity: Int
    /// `LWS_PRE` bytes of headroom (lws' contract for every write), then the frames.
    @usableFromInline let storage: UnsafeMutableRawPointer
    /// Bytes of frames held.
    public private(set) var count = 0

    public init(capacity: Int = OutBatch.defaultCapacity) {
        self.capacity = capacity
        storage = .allocate(byteCount: clws_pre() + capacity, alignment: 16)
    }

    /// Frees the buffer.
    public func deallocate() { storage.deallocate() }

    /// The frames' start, with `LWS_PRE` writable bytes before it.
    @inlinable
    public var payload: UnsafeMutablePointer<UInt8> {
        (storage + clws_pre()).assumingMemoryBound(to: UInt8.self)
    }

    public mutating func reset() { count = 0 }

    /// Whether the frame, with its header, fits an empty batch.
    public func fits(_ frame: OutFrame) -> Bool { Self.headerSize(frame.count) + frame.count <= capacity }

    /// Appends the frame (header and payload); false, appending nothing, when it does not fit.
    public mutating func append(_ frame: OutFrame) -> Bool {
        let header = Self.headerSize(frame.count)
        guard count + header + frame.count <= capacity else { return false }
        let out = payload + count
        out[0] = 0x80 | (frame.isBinary ? 0x2 : 0x1)
        switch header {
        case 2:
            out[1] = UInt8(frame.count)
        case 4:
            out[1] = 126
            out[2] = UInt8(frame.count >> 8)
            out[3] = UInt8(frame.count & 0xFF)
        default:
            out[1] = 127
            for i in 0..<8 { out[2 + i] = UInt8((UInt64(frame.count) >> (8 * (7 - UInt64(i)))) & 0xFF) }
        }
        (out + header).update(from: frame.payload, count: frame.count)
        count += header + frame.count
        return true
    }

    /// The header length for a payload of `length` bytes: 2, 4 or 10.
    public static func headerSize(_ length: Int) -> Int { length < 126 ? 2 : length <= 0xFFFF ? 4 : 10 }
}
