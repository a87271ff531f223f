/// One connection's outgoing frames, bounded in bytes by its owner. FIFO; frames are shared, never
/// copied. Event loop thread only.
///
/// Guarantees: ``bytes`` is the sum of ``OutFrame/queuedCost`` of the frames still queued; taking
/// from the head is O(1) amortised and the storage is reused (no allocation in steady state).
public struct SendQueue {
    @usableFromInline var frames: [OutFrame] = []
    @usableFromInline var head = 0
    @usableFromInline var queuedBytes = 0

    /// Sum of `queuedCost` of the frames still queued.
    @inlinable public var bytes: Int { queuedBytes }

    public init() {}

    @inlinable public var isEmpty: Bool { head == frames.count }
    /// Frames still queued.
    @inlinable public var count: Int { frames.count - head }

    @inlinable
    public mutating func append(_ frame: OutFrame) {
        frames.append(frame)
        queuedBytes += frame.queuedCost
    }

    @inlinable public var first: OutFrame? { isEmpty ? nil : frames[head] }

    @inlinable
    public mutating func removeFirst() {
        queuedBytes -= frames[head].queuedCost
        head += 1
        if head == frames.count {
            frames.removeAll(keepingCapacity: frames.count <= 64)
            head = 0
        } else if head >= 64 && head * 2 >= frames.count {
            frames.removeFirst(head)
            head = 0
        }
    }

    public mutating func removeAll() {
        frames.removeAll()
        head = 0
        queuedBytes = 0
    }
}
