import TabsyncLoop
import TabsyncProto

extension Server.Loop {
    /// Notes that a workspace's presence changed (the hub's ``PresenceRoster`` holds what); the
    /// next tick past the interval sends it.
    func markPresenceDirty(_ hub: WorkspaceHub) {
        presenceDirty.insert(hub.id)
    }

    /// Sends each changed workspace's presence, at most once per `presenceInterval` per workspace
    /// (longer past 1,000 sessions: ``presenceInterval(sessions:)``; coalesced: one message for
    /// every change in between). Per flush, at most three messages
    /// are made, each encoded once per subprotocol and shared by every receiver: the full list
    /// (sessions without `presenceDeltas` when the list changed, and sessions that have not had
    /// their first list), the delta (every other delta session, when the list changed), nothing
    /// for anyone else.
    func flushPresence(now: ContinuousClock.Instant) {
        guard !presenceDirty.isEmpty else { return }
        for id in presenceDirty {
            guard let hub = workspaces[id]?.hub, hub.presence.hasChanges else {
                presenceDirty.remove(id)
                continue
            }
            if let last = hub.lastPresenceAt, now - last < presenceInterval(sessions: hub.sessions.count) { continue }
            presenceDirty.remove(id)
            hub.lastPresenceAt = now
            sendPresence(hub.presence.takeFlush(), of: hub)
        }
    }

    /// `presenceInterval`, times one per started thousand sessions of the workspace: a flush
    /// reaches every session (at least its count changed while clients join), so this bounds the
    /// presence messages one big workspace makes to about 10,000 per second (at 100 ms).
    func presenceInterval(sessions: Int) -> Duration {
        configuration.presenceInterval * max(1, (sessions + 999) / 1000)
    }

    private func sendPresence(_ flush: PresenceRoster.Flush, of hub: WorkspaceHub) {
        var full = LazyFrames { [unowned self] in
            var presence = Tabsync_V1_Presence()
            presence.peers = flush.named.compactMap { self.peer($0, of: hub) }
            presence.othersCount = UInt32(clamping: flush.othersCount)
            return Tabsync_V1_ServerMessage(presence: presence)
        }
        var delta = LazyFrames { [unowned self] in
            var presence = Tabsync_V1_Presence()
            presence.delta = true
            presence.peers = flush.upserts.compactMap { self.peer($0, of: hub) }
            presence.left = flush.left.map { String($0) }
            presence.othersCount = UInt32(clamping: flush.othersCount)
            return Tabsync_V1_ServerMessage(presence: presence)
        }
        for session in hub.sessions.values {
            guard let hello = session.hello else { continue }
            if !hello.presenceDeltas {
                if flush.changed || flush.awaitingFullList.contains(session.id) {
                    send(full.frame(session.format), to: session)
                }
            } else if flush.awaitingFullList.contains(session.id) {
                send(full.frame(session.format), to: session)
            } else if flush.changed {
                send(delta.frame(session.format), to: session)
            }
        }
    }

    private func peer(_ id: Int, of hub: WorkspaceHub) -> Tabsync_V1_Peer? {
        guard let hello = hub.sessions[id]?.hello else { return nil }
        return Tabsync_V1_Peer(
            sessionId: String(id), clientId: hello.clientId, name: hello.clientName, focusTabId: hello.focusTabId)
    }
}

/// One message's frames, made on first use and once per subprotocol.
private struct LazyFrames {
    let make: () -> Tabsync_V1_ServerMessage
    private var message: Tabsync_V1_ServerMessage?
    private var proto: OutFrame?
    private var json: OutFrame?

    init(_ make: @escaping () -> Tabsync_V1_ServerMessage) {
        self.make = make
    }

    mutating func frame(_ format: WireFormat) -> OutFrame {
        switch format {
        case .proto:
            if let proto { return proto }
        case .json:
            if let json { return json }
        }
        let message = self.message ?? make()
        self.message = message
        let frame = OutFrame(bytes: format.encode(message), isBinary: !format.usesTextFrames)
        switch format {
        case .proto: proto = frame
        case .json: json = frame
        }
        return frame
    }
}
