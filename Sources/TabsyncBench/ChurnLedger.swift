/// The churn bench's own record of every op the server acknowledged, per workspace, and what the
/// workspace must therefore hold. No I/O.
///
/// An op counts as acknowledged once any connection of its workspace received its `Applied` (the
/// server sends one only after the op is stored): its submitter's ack, a broadcast to a peer, one
/// of a resume's `missed`, or the answer to a resubmission.
///
/// Guarantees: every conflict is kept in ``problems`` — one (client, seq) seen at two versions
/// (applied twice), two ops at one version, a workspace whose epoch changed. ``expected(workspace:)``
/// replays the acknowledged ops in version order, so the order in which answers arrived does not
/// matter.
struct ChurnLedger {
    /// One acknowledged client op: who, which seq, at which version, and what it did to which tab.
    struct Entry {
        var client: Int32
        var seq: UInt32
        var version: UInt64
        var kind: ChurnOp.Kind
        var tab: UInt32
        var titleSeq: UInt32
    }

    struct ClientSeq: Hashable {
        var client: Int32
        var seq: UInt32
    }

    struct Workspace {
        var epoch: String?
        var byClientSeq: [ClientSeq: Int] = [:]
        var byVersion: [UInt64: ClientSeq] = [:]
        var entries: [Entry] = []
        /// Versions of server-made ops (rekeys) seen.
        var serverVersions: Set<UInt64> = []
        var highestVersion: UInt64 = 0
    }

    private(set) var workspaces: [Workspace]
    private(set) var problems: [String] = []
    /// Answers that repeated one already recorded (resubmissions, broadcasts to several peers).
    private(set) var repeats = 0

    init(workspaces: Int) {
        self.workspaces = Array(repeating: Workspace(), count: workspaces)
    }

    var acknowledged: Int { workspaces.reduce(0) { $0 + $1.entries.count } }

    mutating func problem(_ text: String) {
        if problems.count < 1000 { problems.append(text) }
    }

    /// A Welcome's epoch for `workspace`: the first one is kept; another one later is a problem.
    mutating func sawEpoch(_ epoch: String, workspace: Int, name: String) {
        if let known = workspaces[workspace].epoch {
            if known != epoch { problem("\(name): epoch changed from \(known) to \(epoch)") }
        } else {
            workspaces[workspace].epoch = epoch
        }
    }

    /// A server-made op (empty client id) at `version`.
    mutating func serverOp(workspace: Int, version: UInt64) {
        workspaces[workspace].serverVersions.insert(version)
        workspaces[workspace].highestVersion = max(workspaces[workspace].highestVersion, version)
    }

    /// An `Applied` of the bench's op `op` (planned by `client` as `seq`) at `version`.
    mutating func applied(workspace index: Int, name: String, client: Int32, seq: UInt32, version: UInt64, op: ChurnOp) {
        let key = ClientSeq(client: client, seq: seq)
        var workspace = workspaces[index]
        defer { workspaces[index] = workspace }
        if let known = workspace.byClientSeq[key] {
            let entry = workspace.entries[known]
            if entry.version != version {
                problem("\(name): c\(client) seq \(seq) applied at version \(entry.version) and again at \(version)")
            }
            repeats += 1
            return
        }
        if let other = workspace.byVersion[version], other != key {
            problem("\(name): version \(version) holds c\(other.client) seq \(other.seq) and c\(client) seq \(seq)")
            return
        }
        workspace.byClientSeq[key] = workspace.entries.count
        workspace.byVersion[version] = key
        workspace.entries.append(Entry(client: client, seq: seq, version: version, kind: op.kind, tab: op.tab, titleSeq: op.titleSeq))
        workspace.highestVersion = max(workspace.highestVersion, version)
    }

    func isAcknowledged(workspace: Int, client: Int32, seq: UInt32) -> Bool {
        workspaces[workspace].byClientSeq[ClientSeq(client: client, seq: seq)] != nil
    }

    /// What `workspace` must hold after every acknowledged op: its version (one per op, the
    /// server's own included) and its tabs, id → title.
    func expected(workspace index: Int) -> (version: UInt64, tabs: [String: String]) {
        let workspace = workspaces[index]
        var tabs: [String: String] = [:]
        for entry in workspace.entries.sorted(by: { $0.version < $1.version }) {
            let id = ChurnOp.tabId(client: entry.client, tab: entry.tab)
            switch entry.kind {
            case .add, .update: tabs[id] = ChurnOp.title(client: entry.client, seq: entry.titleSeq)
            case .remove: tabs[id] = nil
            }
        }
        return (UInt64(workspace.entries.count + workspace.serverVersions.count), tabs)
    }
}

/// One op the churn bench plans: each client adds, renames and removes only tabs of its own
/// (`k<client>-<n>`), titled after the seq that set the title, so the final state follows from the
/// acknowledged ops alone whatever order peers' ops took.
struct ChurnOp {
    enum Kind: UInt8 {
        case add, update, remove
    }

    var kind: Kind
    var tab: UInt32
    /// The seq whose op set the title (add, update); 0 for remove.
    var titleSeq: UInt32

    static func tabId(client: Int32, tab: UInt32) -> String { "k\(client)-\(tab)" }
    static func title(client: Int32, seq: UInt32) -> String { "c\(client) s\(seq)" }
}
