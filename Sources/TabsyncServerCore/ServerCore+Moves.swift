import TabsyncCore
import TabsyncStore

/// A workspace split across nodes is sent home (docs/design.md, "Several nodes and placement").
///
/// A workspace is split when clients of it are on two nodes: a node came back and the proxy sends
/// new sessions to it again while the old ones stay where they moved, or the proxy's bound on load
/// spilled one over. Correct, only dearer. The node that notices another node's commit to a
/// workspace it holds asks the holder registry whether a node registered as its holder later: that
/// one is where the proxy sends new sessions now, so this node hands the workspace over, closing
/// its sessions with "moved" (4307); they reconnect through the proxy and resume there, and the
/// workspace is unloaded here as soon as it is idle. A node asks at most once a minute per
/// workspace, and after a short random pause (the core's ``ServerCore/Jitter``), so a spill does
/// not flap.
struct MoveState {
    /// When each workspace was last checked for a newer holder.
    var lastCheck: [String: ServerCore.Instant] = [:]
    /// Checks waiting out their random pause, and when each goes.
    var checkAt: [String: ServerCore.Instant] = [:]
    /// Workspaces whose sessions were closed "moved": unloaded as soon as they are idle.
    var handingOver: Set<String> = []

    mutating func forget(_ id: String) {
        lastCheck[id] = nil
        checkAt[id] = nil
        handingOver.remove(id)
    }
}

extension ServerCore {
    /// Another node's ops of `id` were just taken here: the workspace is split. With a holder
    /// registry and sessions here, check (at most once per ``Settings/moveCheckInterval``, after a
    /// random pause of up to ``Settings/holderCheckPause``) whether it should go.
    mutating func sawOtherNodesCommit(_ id: String) {
        guard settings.yieldsSplitWorkspaces, shutdown == .running, let hub = workspaces.hub(id), !hub.members.isEmpty else {
            return
        }
        if let last = workspaces.moves.lastCheck[id], now - last < settings.moveCheckInterval { return }
        workspaces.moves.lastCheck[id] = now
        let pause = jitter.pause(upTo: settings.holderCheckPause)
        if pause > .zero {
            workspaces.moves.checkAt[id] = now + pause
        } else {
            emit(.checkHolders(id))
        }
    }

    /// At a timeout: the checks whose pause is over go, for workspaces still split here with sessions.
    mutating func startDueHolderChecks() {
        guard !workspaces.moves.checkAt.isEmpty else { return }
        for (id, at) in workspaces.moves.checkAt.sorted(by: { $0.key < $1.key }) where at <= now {
            workspaces.moves.checkAt[id] = nil
            guard shutdown == .running, let hub = workspaces.hub(id), !hub.members.isEmpty else { continue }
            emit(.checkHolders(id))
        }
    }

    /// The registry answered: when a newer holder exists, this node's sessions of `id` are closed
    /// "moved" and the workspace is unloaded once idle.
    mutating func holdersChecked(_ id: String, newerHolder: Bool) {
        guard newerHolder, shutdown == .running, let hub = workspaces.hub(id), !hub.members.isEmpty else { return }
        metrics.moves += 1
        workspaces.moves.handingOver.insert(id)
        logger.info("workspace split across nodes; handing it to its newer holder", metadata: [
            "workspace": "\(id)", "sessions": "\(hub.members.count)",
        ])
        for member in hub.members { close(member, .moved) }
        endFeeds(of: id)
    }
}
