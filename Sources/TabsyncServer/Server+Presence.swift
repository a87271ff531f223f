import TabsyncProto

extension Server.Loop {
    /// Notes that a workspace's peer list changed (a session joined, left or moved its focus); the
    /// next tick past the interval broadcasts it.
    func markPresenceDirty(_ hub: WorkspaceHub) {
        hub.presenceDirty = true
        presenceDirty.insert(hub.id)
    }

    /// Broadcasts the peer list of each workspace whose presence changed, at most once per
    /// `presenceInterval` per workspace (coalesced: one list for every change in between).
    func flushPresence(now: ContinuousClock.Instant) {
        guard !presenceDirty.isEmpty else { return }
        for id in presenceDirty {
            guard let hub = workspaces[id]?.hub, hub.presenceDirty else {
                presenceDirty.remove(id)
                continue
            }
            if let last = hub.lastPresenceAt, now - last < configuration.presenceInterval { continue }
            presenceDirty.remove(id)
            hub.presenceDirty = false
            hub.lastPresenceAt = now
            var peers: [Tabsync_V1_Peer] = []
            for id in hub.sessions.keys.sorted() {
                guard let session = hub.sessions[id], let hello = session.hello else { continue }
                peers.append(Tabsync_V1_Peer(
                    sessionId: String(id), clientId: hello.clientId, name: hello.clientName,
                    focusTabId: hello.focusTabId))
            }
            broadcast(Tabsync_V1_ServerMessage(peers: peers), to: hub)
        }
    }
}
