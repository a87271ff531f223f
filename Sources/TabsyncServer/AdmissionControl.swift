import TabsyncServerCore
/// Per peer address bookkeeping at accept: how many connections each address holds, and a token
/// bucket of new connections per second for each. Pure (the caller passes the time); owned by the
/// event loop thread.
///
/// Guarantees, for every address and with limits that are not 0 (0: that limit is off):
/// - it never holds more than `maxConnections` admitted connections (admitted by ``admit(_:now:)``
///   and not yet given back by ``release(_:)``);
/// - over any interval of `t` seconds it is admitted at most `handshakeBurst + handshakesPerSecond × t`
///   times; refused attempts cost nothing, so a flood is refused while the bucket is empty and the
///   address gets its rate back as soon as it slows down;
/// - one address never affects another's counts or bucket;
/// - an address is forgotten once it holds no connection and its bucket is full again
///   (``prune(now:)``), so memory follows the active addresses. With both limits off nothing is
///   recorded at all.
struct AdmissionControl {
    typealias Instant = ContinuousClock.Instant

    let limits: Server.Configuration.PerIPLimits

    private struct Peer {
        var open = 0
        var tokens: Double
        var refilled: Instant
    }

    private var peers: [String: Peer] = [:]

    init(limits: Server.Configuration.PerIPLimits) {
        self.limits = limits
    }

    /// True when some limit applies (otherwise ``admit(_:now:)`` always admits and records nothing).
    var isActive: Bool { limits.maxConnections > 0 || limits.handshakesPerSecond > 0 }

    /// Admits one new connection from `address` (and counts it as open), or says why not.
    mutating func admit(_ address: String, now: Instant) -> ConnectionRefusal? {
        guard isActive else { return nil }
        let burst = Double(max(1, limits.handshakeBurst))
        var peer = peers[address] ?? Peer(tokens: burst, refilled: now)
        refill(&peer, now: now, burst: burst)
        defer { peers[address] = peer }
        if limits.maxConnections > 0 && peer.open >= limits.maxConnections { return .ipConnections }
        if limits.handshakesPerSecond > 0 {
            guard peer.tokens >= 1 else { return .ipHandshakeRate }
            peer.tokens -= 1
        }
        peer.open += 1
        return nil
    }

    /// An admitted connection from `address` closed.
    mutating func release(_ address: String) {
        guard var peer = peers[address], peer.open > 0 else { return }
        peer.open -= 1
        peers[address] = peer
    }

    /// Open connections `address` holds.
    func openConnections(_ address: String) -> Int { peers[address]?.open ?? 0 }

    /// Addresses remembered now.
    var trackedAddresses: Int { peers.count }

    /// Forgets the addresses with no connection and a full bucket.
    mutating func prune(now: Instant) {
        let burst = Double(max(1, limits.handshakeBurst))
        for (address, var peer) in peers where peer.open == 0 {
            refill(&peer, now: now, burst: burst)
            if limits.handshakesPerSecond <= 0 || peer.tokens >= burst { peers[address] = nil }
        }
    }

    private func refill(_ peer: inout Peer, now: Instant, burst: Double) {
        guard limits.handshakesPerSecond > 0, now > peer.refilled else { return }
        let (seconds, attoseconds) = (now - peer.refilled).components
        let elapsed = Double(seconds) + Double(attoseconds) / 1e18
        peer.tokens = min(burst, peer.tokens + elapsed * limits.handshakesPerSecond)
        peer.refilled = now
    }
}
