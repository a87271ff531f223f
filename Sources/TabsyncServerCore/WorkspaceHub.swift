import TabsyncCore

/// A workspace in memory: its sequencer, its durable state, its members and its presence. A value
/// owned by ``ServerCore``'s ``WorkspaceTable``, changed only through ``WorkspaceTable/withHub(_:_:)``.
///
/// `live` runs ahead of the store: it includes ops whose commit has not returned yet. Nothing of
/// `live` reaches anyone before it is durable: `Applied`, `Rejected` and `Welcome` are effects of
/// the commit pipeline (``CommitPipeline``), released in order once every record before them is
/// stored. After a failed commit the hub is read back from the store (``WorkspaceTable/Entry/reloading(_:waiters:)``),
/// which is the stored state by definition; its members stay.
///
/// Guarantees: ``members`` holds each session at most once, exactly the sessions whose `Welcome`
/// went out and that have not left; ``presence`` names exactly those; ``welcoming`` holds the
/// sessions whose `Welcome` waits in the pipeline.
struct WorkspaceHub {
    let id: String
    /// Includes ops applied but not yet durable.
    var live: Sequencer
    /// The workspace as of its last successful commit (what HTTP shows).
    var durable: Workspace
    /// A shared store only (nil otherwise): the sequencer as stored, this node's commits and other
    /// nodes' alike; its workspace is `durable`. Live starts again from it when this node finds
    /// itself behind (re-sequencing), and its version is the base version of the next batch.
    var stored: Sequencer?
    /// Sessions whose `Welcome` went out: every broadcast goes to them (an array, so a broadcast
    /// action shares it without a copy until it changes).
    private(set) var members: [ConnectionID] = []
    private var memberIndex: [ConnectionID: Int] = [:]
    /// Sessions whose `Welcome` waits in the commit pipeline. The hub is not idle while one waits.
    var welcoming: Set<ConnectionID> = []
    /// Who presence names and what changed since its last flush.
    var presence: PresenceRoster
    var lastPresenceAt: ServerCore.Instant?

    /// `shared`: the store has other writers (keep ``stored``).
    init(id: String, sequencer: Sequencer, maxPresencePeers: Int, shared: Bool) {
        self.id = id
        presence = PresenceRoster(cap: maxPresencePeers)
        live = sequencer
        durable = sequencer.workspace
        stored = shared ? sequencer : nil
    }

    /// Takes the state the store holds as both the live and the durable state.
    mutating func restore(_ sequencer: Sequencer) {
        live = sequencer
        durable = sequencer.workspace
        if stored != nil { stored = sequencer }
    }

    /// The session's `Welcome` is out: it receives broadcasts and presence names it.
    mutating func admit(_ id: ConnectionID) {
        guard memberIndex[id] == nil else { return }
        memberIndex[id] = members.count
        members.append(id)
        presence.join(id)
    }

    /// The session left: no more broadcasts; presence drops it. False when it was no member.
    @discardableResult
    mutating func dismiss(_ id: ConnectionID) -> Bool {
        guard let index = memberIndex.removeValue(forKey: id) else { return false }
        let last = members.removeLast()
        if index < members.count {
            members[index] = last
            memberIndex[last] = index
        }
        presence.leave(id)
        return true
    }
}
