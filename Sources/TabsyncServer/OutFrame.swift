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
