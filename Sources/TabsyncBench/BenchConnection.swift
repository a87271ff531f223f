/// One bench connection (one client of one workspace): its state, the log of the ops it sent, and
/// the transport's per-connection state.
///
/// Thread rule: owned by the load generator's thread, like the generator itself.
///
/// Invariant: `sendTimes`, `flags` and `tabs` have one entry per op sent, at index seq − 1 (seqs
/// start at 1 and go up by one per op sent on this connection).
final class BenchConnection {
    enum State {
        /// Not opened yet.
        case idle
        /// The WebSocket handshake is under way.
        case connecting
        /// Handshake done, Hello sent, Welcome not yet received (tabsync subprotocols only).
        case open
        /// Counted as connected: ops may be sent on it.
        case ready
        /// Failed or closed; never reopened.
        case closed
    }

    /// Its index in the generator's connections (its client id is `c<index>`).
    let index: Int
    let workspace: Int
    /// The server it connects to: an index into ``BenchConfiguration/servers``.
    let node: Int
    var state = State.idle
    /// Monotonic nanoseconds when the connect started (connect time is measured from it).
    var connectStart: UInt64 = 0
    /// The last seq used (raised to the server's `lastSeq` by Welcome).
    var seq: UInt64 = 0
    /// Set when the bench closes it (a close is then not a failure or a disconnect).
    var closing = false

    // MARK: ops sent (index seq − 1)

    /// Intended send time of each op (monotonic nanoseconds), which its latencies count from.
    var sendTimes: [UInt64] = []
    /// ``measured``, ``answered``, ``refused`` and the op's ``WorkspaceModel/Kind`` (``kindMask``).
    var flags: [UInt8] = []
    /// The tab each op names, for the workspace model's bookkeeping when it is answered.
    var tabs: [Int32] = []

    /// The op was sent inside the measured window.
    static let measured: UInt8 = 0x80
    /// Its `Applied` or `Rejected` came back to this connection.
    static let answered: UInt8 = 0x40
    /// It was answered with `Rejected`.
    static let refused: UInt8 = 0x20
    static let kindMask: UInt8 = 0x0F

    // MARK: transport (LoadGenerator.swift)

    /// The libwebsockets connection; nil before connecting and once closed.
    var wsi: OpaquePointer?
    /// Frames waiting for a writable callback, from `queueHead` on.
    var queue: [[UInt8]] = []
    var queueHead = 0
    /// The fragments of a message received in pieces, until its last one.
    var receiveBuffer: [UInt8] = []
    /// The close code the server sent, if it closed first.
    var peerCloseCode: UInt16?

    // MARK: presence (--check-presence only)

    /// The session id the server's Welcome gave.
    var sessionId: UInt64 = 0
    /// Session ids this connection's peer view names; nil until its full list came.
    var namedPeers: Set<UInt64>?
    var othersCount = 0

    init(index: Int, workspace: Int, node: Int = 0) {
        self.index = index
        self.workspace = workspace
        self.node = node
    }

    /// True while the transport holds a socket for it.
    var hasSocket: Bool { wsi != nil }

    /// Logs an op about to be sent as seq `seq` (the next one).
    func recordSend(intended: UInt64, flag: UInt8, tab: Int32) {
        sendTimes.append(intended)
        flags.append(flag)
        tabs.append(tab)
    }

    /// Ops sent so far no longer count as measured (a new measured window starts).
    func forgetMeasured() {
        for index in flags.indices { flags[index] &= ~Self.measured }
    }
}
