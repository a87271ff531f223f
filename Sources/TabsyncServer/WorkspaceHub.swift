import TabsyncCore
import TabsyncLoop
import TabsyncProto

/// A workspace in memory: its sequencer, its durable state and its sessions. Event loop thread only.
///
/// `live` runs ahead of the store: it includes ops whose commit has not returned yet. Nothing of
/// `live` reaches anyone before it is durable: `Applied`, `Rejected` and `Welcome` are effects of
/// the commit pipeline (CommitPipeline.swift), released in order once every record before them is
/// stored. After a failed commit the hub is read back from the store (``Server/Loop/WorkspaceEntry``
/// `.reloading`, Server+WorkspaceLoading.swift), which is the stored state by definition; its
/// sessions stay.
final class WorkspaceHub {
    let id: String
    /// Includes ops applied but not yet durable.
    var live: Sequencer
    /// The workspace as of its last successful commit (what HTTP shows).
    var durable: Workspace
    /// A shared store only (nil otherwise): the sequencer as stored, this node's commits and other
    /// nodes' alike; its workspace is `durable`. Live starts again from it when this node finds
    /// itself behind (re-sequencing, CommitPipeline.swift), and its version is the base version of
    /// this workspace's next batch.
    var stored: Sequencer?
    /// Sessions whose `Welcome` went out, by id: they receive every broadcast from then on. Held
    /// here (not looked up in the loop's table per delivery); removed when the session leaves.
    var sessions: [Int: Session] = [:]
    /// Sessions whose `Welcome` waits in the commit pipeline; removed when it goes out, is refused
    /// or the session leaves. The hub is not idle while one is waiting.
    var welcoming: Set<Int> = []
    /// Who presence names and what changed since its last flush (Server+Presence.swift); holds
    /// exactly the ids of `sessions`.
    var presence: PresenceRoster
    var lastPresenceAt: ContinuousClock.Instant?

    /// `shared`: the store has other writers (keep ``stored``).
    init(id: String, sequencer: Sequencer, maxPresencePeers: Int, shared: Bool = false) {
        self.id = id
        presence = PresenceRoster(cap: maxPresencePeers)
        live = sequencer
        durable = sequencer.workspace
        stored = shared ? sequencer : nil
    }

    /// Takes the state the store holds as both the live and the durable state (after a failed
    /// commit `live` was ahead of the store).
    func restore(_ sequencer: Sequencer) {
        live = sequencer
        durable = sequencer.workspace
        if stored != nil { stored = sequencer }
    }
}

extension Server.Loop {
    /// Sends one message to every joined session of a workspace, encoded once per subprotocol:
    /// every session of a format gets the same shared frame.
    func broadcast(_ message: Tabsync_V1_ServerMessage, to hub: WorkspaceHub) {
        var proto: OutFrame?
        var json: OutFrame?
        func frame(_ format: WireFormat, _ cached: inout OutFrame?) -> OutFrame {
            if let cached { return cached }
            let made = OutFrame(bytes: format.encode(message), isBinary: !format.usesTextFrames)
            cached = made
            return made
        }
        for session in hub.sessions.values {
            switch session.format {
            case .proto: send(frame(.proto, &proto), to: session)
            case .json: send(frame(.json, &json), to: session)
            }
        }
    }
}
