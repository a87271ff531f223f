import CLibwebsockets

/// One encoded WebSocket message ready to send, shared by every session it goes to.
///
/// The payload sits after `LWS_PRE` bytes of headroom, as `lws_write` needs. The payload never
/// changes after creation; the headroom is scratch space `lws_write` fills with the frame header,
/// which is the same for every receiver (server frames are unmasked and no extension is
/// negotiated), and all writes happen on the one event loop thread, so sharing one buffer among
/// receivers is safe. Created and used on the event loop thread only (not `Sendable`).
final class OutFrame {
    /// Start of the allocation: `LWS_PRE` bytes of headroom, then the payload.
    private let storage: UnsafeMutableRawPointer
    /// Payload length in bytes.
    let count: Int
    /// Binary frame (protobuf) or text frame (JSON).
    let isBinary: Bool

    init(bytes: [UInt8], isBinary: Bool) {
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
    var payload: UnsafeMutablePointer<UInt8> {
        (storage + clws_pre()).assumingMemoryBound(to: UInt8.self)
    }

    /// Bytes this frame costs a send queue: payload plus the headroom.
    var queuedCost: Int { count + clws_pre() }
}

/// A session's outgoing frames, bounded in bytes. FIFO; frames are shared, never copied.
/// Event loop thread only.
struct SendQueue {
    private var frames: [OutFrame] = []
    private var head = 0
    /// Sum of `queuedCost` of the frames still queued.
    private(set) var bytes = 0

    var isEmpty: Bool { head == frames.count }
    /// Frames still queued.
    var count: Int { frames.count - head }

    mutating func append(_ frame: OutFrame) {
        frames.append(frame)
        bytes += frame.queuedCost
    }

    var first: OutFrame? { isEmpty ? nil : frames[head] }

    mutating func removeFirst() {
        bytes -= frames[head].queuedCost
        head += 1
        if head == frames.count {
            frames.removeAll(keepingCapacity: frames.count <= 64)
            head = 0
        } else if head >= 64 && head * 2 >= frames.count {
            frames.removeFirst(head)
            head = 0
        }
    }

    mutating func removeAll() {
        frames.removeAll()
        head = 0
        bytes = 0
    }
}

/// A reusable buffer that packs several queued frames, each with its WebSocket header, into one
/// write. Server frames are unmasked and no extension is negotiated, so a header is the FIN bit
/// and opcode, then the payload length (7 bits, or 126 + 16 bits, or 127 + 64 bits).
/// Event loop thread only.
struct OutBatch {
    /// Bytes of frames one batch holds at most (one TCP send's worth).
    static let capacity = 16 * 1024
    /// `LWS_PRE` bytes of headroom (lws' contract for every write), then the frames.
    private let storage: UnsafeMutableRawPointer
    private(set) var count = 0

    init() {
        storage = .allocate(byteCount: clws_pre() + Self.capacity, alignment: 16)
    }

    /// Frees the buffer (the loop's deinit).
    func deallocate() { storage.deallocate() }

    var payload: UnsafeMutablePointer<UInt8> {
        (storage + clws_pre()).assumingMemoryBound(to: UInt8.self)
    }

    mutating func reset() { count = 0 }

    /// Whether the frame, with its header, fits an empty batch.
    func fits(_ frame: OutFrame) -> Bool { Self.headerSize(frame.count) + frame.count <= Self.capacity }

    /// Appends the frame (header and payload); false, appending nothing, when it does not fit.
    mutating func append(_ frame: OutFrame) -> Bool {
        let header = Self.headerSize(frame.count)
        guard count + header + frame.count <= Self.capacity else { return false }
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

    static func headerSize(_ length: Int) -> Int { length < 126 ? 2 : length <= 0xFFFF ? 4 : 10 }
}
