import TabsyncProto

/// Presence: who is in each workspace and what they view, sent coalesced (``PresenceRoster``).
extension ServerCore {
    /// Sends each changed workspace's presence, at most once per ``presenceInterval(_:sessions:)``
    /// per workspace (coalesced: one message for every change in between; the table decides which
    /// are due, ``WorkspaceTable/takePresenceFlushes(at:interval:)``). Per flush at most two
    /// messages are made, each encoded once per subprotocol by the driver: the full list (members
    /// without `presenceDeltas` when the list changed, and members that have not had their first
    /// list) and the delta (every other delta member, when the list changed).
    mutating func flushPresence() {
        let interval = settings.presenceInterval
        let flushes = workspaces.takePresenceFlushes(at: now) { Self.presenceInterval(interval, sessions: $0) }
        for (members, flush) in flushes { sendPresence(flush, members: members) }
    }

    /// `presenceInterval`, times one per started thousand members: a flush reaches every member, so
    /// this bounds the presence messages of one big workspace to about 10,000 per second (at 100 ms).
    static func presenceInterval(_ interval: Duration, sessions: Int) -> Duration {
        interval * max(1, (sessions + 999) / 1000)
    }

    private mutating func sendPresence(_ flush: PresenceRoster.Flush, members: [ConnectionID]) {
        var full: [ConnectionID] = []
        var delta: [ConnectionID] = []
        for id in members {
            guard let hello = sessions[id]?.hello else { continue }
            if flush.awaitingFullList.contains(id) || (!hello.presenceDeltas && flush.changed) {
                full.append(id)
            } else if hello.presenceDeltas && flush.changed {
                delta.append(id)
            }
        }
        if !full.isEmpty {
            var presence = Tabsync_V1_Presence()
            presence.peers = flush.named.compactMap { peer($0) }
            presence.othersCount = UInt32(clamping: flush.othersCount)
            broadcast(Tabsync_V1_ServerMessage(presence: presence), to: full)
        }
        if !delta.isEmpty {
            var presence = Tabsync_V1_Presence()
            presence.delta = true
            presence.peers = flush.upserts.compactMap { peer($0) }
            presence.left = flush.left.map { String($0) }
            presence.othersCount = UInt32(clamping: flush.othersCount)
            broadcast(Tabsync_V1_ServerMessage(presence: presence), to: delta)
        }
    }

    private func peer(_ id: ConnectionID) -> Tabsync_V1_Peer? {
        guard let hello = sessions[id]?.hello else { return nil }
        return Tabsync_V1_Peer(sessionId: String(id), clientId: hello.clientId, name: hello.clientName, focusTabId: hello.focusTabId)
    }
}
