import TabsyncCore
import TabsyncProto

/// A client's view of its workspace's presence, rebuilt from one full `Presence` list per
/// connection and the deltas after it (proto/README.md#presence).
///
/// Guarantees: after each `Presence` of a connection applied in order, ``peers`` is the list the
/// server's last flush named, sorted by session id (as a full list is), and ``othersCount`` the
/// sessions it only counted. A delta that comes before the connection's first full list is not
/// applied (a server that follows the protocol never sends one); ``reset()`` starts a connection
/// and keeps the last view until the next full list replaces it.
struct PeerView: Equatable {
    private var bySession: [String: Peer] = [:]
    private(set) var peers: [Peer] = []
    private(set) var othersCount = 0
    /// A full list arrived on the current connection.
    private(set) var hasList = false

    /// A new connection: deltas apply again once its full list came.
    mutating func reset() {
        hasList = false
    }

    /// Applies one `Presence`; false when it was a delta without a full list before it (ignored).
    @discardableResult
    mutating func apply(_ presence: Tabsync_V1_Presence) -> Bool {
        if presence.delta {
            guard hasList else { return false }
            for id in presence.left { bySession[id] = nil }
            for peer in presence.peers { bySession[peer.sessionID] = Peer(peer) }
        } else {
            hasList = true
            bySession = [:]
            bySession.reserveCapacity(presence.peers.count)
            for peer in presence.peers { bySession[peer.sessionID] = Peer(peer) }
        }
        othersCount = Int(presence.othersCount)
        peers = bySession.values.sorted(by: Self.sessionOrder)
        return true
    }

    /// Numeric session ids in numeric order (the server's), any others after them by text.
    static func sessionOrder(_ a: Peer, _ b: Peer) -> Bool {
        switch (UInt64(a.sessionId), UInt64(b.sessionId)) {
        case let (x?, y?): x < y
        case (_?, nil): true
        case (nil, _?): false
        case (nil, nil): a.sessionId < b.sessionId
        }
    }
}

extension Peer {
    init(_ peer: Tabsync_V1_Peer) {
        self.init(sessionId: peer.sessionID, clientId: peer.clientID, name: peer.name, focusTabId: peer.focusTabID)
    }
}
