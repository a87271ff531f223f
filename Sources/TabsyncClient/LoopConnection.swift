import CLibwebsockets
import Foundation

/// One logical connection on the loop: the socket of the current attempt, its buffers and its
/// retry state. Loop thread only (owned by `LoopCore`).
///
/// Invariants: `wsi` is set only in `.connecting` (once lws names it) and `.open`; `queue`
/// holds at most one frame past `maxQueuedBytes`; `attemptTag` changes with every attempt, so
/// callbacks and timers of an earlier attempt are recognised and ignored.
final class LoopConnection {
    enum Phase {
        case connecting
        case open
        /// Waiting for the retry timer.
        case waiting
    }

    let id: UInt64
    let owner: any LoopConnectionOwner
    let url: ServerURL
    let subprotocol: String
    let binary: Bool
    let backoff: Backoff
    let allowSelfSigned: Bool
    var phase: Phase = .waiting
    var wsi: OpaquePointer?
    /// Failed attempts since the last connection that got a message through.
    var attempt = 0
    /// Connections in a row the server refused before a `Welcome` (``LoopNext/retryAfterRefusal``).
    var refusedInARow = 0
    /// Distinguishes the current attempt (it is in the wsi's opaque user data and in timers).
    var attemptTag: UInt16 = 0
    var receivedSomething = false
    /// Counted in the loop's connects in flight.
    var holdsConnectSlot = false
    var receiveBuffer: [UInt8] = []
    var queue: [[UInt8]] = []
    var queueHead = 0
    var queuedBytes = 0
    /// A close this side asked for, sent at the next writeable callback.
    var closeRequest: (code: UInt16, reason: String)?
    /// Closing for good: no retry whatever the owner would say.
    var closingForGood = false
    var peerClose: (code: UInt16, reason: String)?

    /// C strings lws reads while connecting, alive as long as the connection.
    private var cStrings: [UnsafeMutablePointer<CChar>] = []
    private(set) var cAddress: UnsafeMutablePointer<CChar>?
    private(set) var cPath: UnsafeMutablePointer<CChar>?
    private(set) var cHost: UnsafeMutablePointer<CChar>?
    private(set) var cProtocol: UnsafeMutablePointer<CChar>?

    init(id: UInt64, owner: any LoopConnectionOwner, url: ServerURL, subprotocol: String, backoff: Backoff,
         allowSelfSigned: Bool) {
        self.id = id
        self.owner = owner
        self.url = url
        self.subprotocol = subprotocol
        self.binary = !subprotocol.hasSuffix(".json")
        self.backoff = backoff
        self.allowSelfSigned = allowSelfSigned
        let defaultPort = url.usesTLS ? 443 : 80
        let bracketed = url.host.contains(":") ? "[\(url.host)]" : url.host
        cAddress = keep(url.host)
        cPath = keep(url.path)
        cHost = keep(url.port == defaultPort ? bracketed : "\(bracketed):\(url.port)")
        cProtocol = keep(subprotocol)
    }

    private func keep(_ text: String) -> UnsafeMutablePointer<CChar>? {
        guard let copy = strdup(text) else { return nil }
        cStrings.append(copy)
        return copy
    }

    func releaseStrings() {
        cStrings.forEach { free($0) }
        cStrings = []
    }

    /// The opaque user data given to lws for the current attempt: id and attempt tag, never 0.
    var opaqueTag: UnsafeMutableRawPointer? {
        UnsafeMutableRawPointer(bitPattern: UInt(truncatingIfNeeded: id) << 16 | UInt(attemptTag))
    }

    static func decode(opaque: UnsafeMutableRawPointer?) -> (id: UInt64, tag: UInt16)? {
        guard let opaque else { return nil }
        let bits = UInt(bitPattern: opaque)
        return (UInt64(bits >> 16), UInt16(truncatingIfNeeded: bits))
    }

    var hasQueued: Bool { queueHead < queue.count }

    func enqueue(_ frame: [UInt8]) {
        queue.append(frame)
        queuedBytes += frame.count
    }

    func dequeue() {
        queuedBytes -= queue[queueHead].count
        queue[queueHead] = []
        queueHead += 1
        if queueHead == queue.count {
            queue.removeAll(keepingCapacity: queue.count <= 16)
            queueHead = 0
        } else if queueHead >= 64 && queueHead * 2 >= queue.count {
            queue.removeFirst(queueHead)
            queueHead = 0
        }
    }

    /// Forgets everything of the current socket.
    func resetSocketState() {
        wsi = nil
        receiveBuffer = []
        queue = []
        queueHead = 0
        queuedBytes = 0
        closeRequest = nil
        peerClose = nil
        receivedSomething = false
    }
}

/// A binary min-heap of retry deadlines. Entries of connections that moved on are skipped when
/// they come due (their tag no longer matches).
struct TimerHeap {
    struct Entry {
        var deadline: ContinuousClock.Instant
        var id: UInt64
        var tag: UInt16
        /// A retry of the owner's held ops (``LoopConnectionOwner/loopRetryDue()``), not a connect.
        var retry = false
    }

    private var entries: [Entry] = []

    var first: Entry? { entries.first }
    var isEmpty: Bool { entries.isEmpty }

    mutating func push(_ entry: Entry) {
        entries.append(entry)
        var child = entries.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard entries[child].deadline < entries[parent].deadline else { break }
            entries.swapAt(child, parent)
            child = parent
        }
    }

    mutating func pop() -> Entry? {
        guard !entries.isEmpty else { return nil }
        entries.swapAt(0, entries.count - 1)
        let top = entries.removeLast()
        var parent = 0
        while true {
            let left = 2 * parent + 1
            let right = left + 1
            var smallest = parent
            if left < entries.count && entries[left].deadline < entries[smallest].deadline { smallest = left }
            if right < entries.count && entries[right].deadline < entries[smallest].deadline { smallest = right }
            if smallest == parent { break }
            entries.swapAt(parent, smallest)
            parent = smallest
        }
        return top
    }
}
