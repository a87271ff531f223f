import TabsyncCore

/// One churn client: a stable client id (`c<index>`) in one workspace that lives through many
/// connections. It keeps what a resuming client keeps — the last version and epoch it saw, its
/// seqs, the ops not yet answered (sent again, same seq, after each Welcome) — and its own tabs.
///
/// Thread rule: owned by the churn generator's thread.
///
/// Invariants: `pending` holds every op sent and not yet answered (by `Applied` or `Rejected`),
/// keyed by seq; `live` holds its tabs whose add was acknowledged and whose remove was not planned.
final class ChurnClient {
    enum State {
        /// No socket; reconnects at `reconnectAt`.
        case waiting
        /// The WebSocket handshake is under way.
        case connecting
        /// Hello sent, no Welcome yet.
        case open
        /// Welcome received: ops may be sent.
        case ready
    }

    struct Pending {
        var frame: [UInt8]
        var op: ChurnOp
    }

    let index: Int
    let workspace: Int
    let id: Int32
    var state = State.waiting
    /// Bumped on every connect: callbacks of an earlier socket are told apart by it.
    var generation: UInt32 = 0
    var wsi: OpaquePointer?

    // MARK: resume

    var lastVersion: UInt64 = 0
    var epoch = ""
    var seq: UInt32 = 0
    var pending: [UInt32: Pending] = [:]

    // MARK: its tabs

    var live: [UInt32] = []
    var pendingAdds = 0
    var nextTab: UInt32 = 1

    // MARK: timing (monotonic nanoseconds)

    var reconnectAt: UInt64 = 0
    var backoffSeconds = 0.0
    /// When this life drops its socket (0: not planned).
    var dropAt: UInt64 = 0
    var stallAt: UInt64 = 0
    var stallUntil: UInt64 = 0
    var stalled = false
    /// Set for the final check: the next Hello asks for a snapshot (lastVersion 0).
    var verifying = false
    var verified = false

    // MARK: transport

    var queue: [[UInt8]] = []
    var queueHead = 0
    var receiveBuffer: [UInt8] = []
    var peerCloseCode: UInt16?

    init(index: Int, workspace: Int) {
        self.index = index
        self.workspace = workspace
        self.id = Int32(index)
    }

    var clientId: String { "c\(index)" }

    /// Plans its next op: keeps between 2 and 5 tabs of its own, else adds, renames or removes.
    func plan(random: inout SplitMix64) -> ChurnOp {
        seq += 1
        let count = live.count + pendingAdds
        var roll = random.next() % 10
        if count < 2 || live.isEmpty { roll = 0 } else if count >= 5 { roll = 9 }
        switch roll {
        case 0...2:
            let tab = nextTab
            nextTab += 1
            pendingAdds += 1
            return ChurnOp(kind: .add, tab: tab, titleSeq: seq)
        case 3...7:
            let tab = live[Int(random.next() % UInt64(live.count))]
            return ChurnOp(kind: .update, tab: tab, titleSeq: seq)
        default:
            let at = Int(random.next() % UInt64(live.count))
            let tab = live.remove(at: at)
            return ChurnOp(kind: .remove, tab: tab, titleSeq: 0)
        }
    }

    /// The answer to its op `seq` came (applied or not): it is no longer pending.
    func answered(seq: UInt32, applied: Bool) {
        guard let done = pending.removeValue(forKey: seq) else { return }
        if done.op.kind == .add {
            pendingAdds -= 1
            if applied { live.append(done.op.tab) }
        }
    }

    /// Forgets the transport state of a socket that is gone.
    func resetTransport() {
        wsi = nil
        queue.removeAll()
        queueHead = 0
        receiveBuffer = []
        peerCloseCode = nil
        stalled = false
        dropAt = 0
        stallAt = 0
    }
}
