import TabsyncCore
import TabsyncStore

/// The op log as the cluster left it in PostgreSQL, read with the store the nodes use, and the
/// checks every cluster test makes against it.
struct ClusterLog {
    let epoch: String
    /// Workspace id → what the store holds (its whole log: the nodes keep up to 100,000 ops).
    let stored: [String: StoredWorkspace]

    init(store url: String, workspaces: [String]) throws {
        let store = try PostgresStore(url: url, options: .init(applicationName: "tabsync-cluster-test"))
        defer { store.close() }
        epoch = store.epoch
        var stored: [String: StoredWorkspace] = [:]
        for id in workspaces {
            stored[id] = try store.load(workspaceId: id)
        }
        self.stored = stored
    }

    func log(_ workspace: String) -> [AppliedOp] { stored[workspace]?.log ?? [] }

    /// The log holds every version from 1 on, once, and replaying it gives the stored state.
    func problemsWithTheLog(of workspace: String) -> [String] {
        guard let stored = stored[workspace] else { return ["\(workspace): not in the store"] }
        var problems: [String] = []
        let log = stored.log
        if log.first?.version != 1 { problems.append("\(workspace): the log starts at \(log.first?.version ?? 0), not 1") }
        for (a, b) in zip(log, log.dropFirst()) where a.version + 1 != b.version {
            problems.append("\(workspace): version \(b.version) follows \(a.version) in the log")
        }
        do throws(OpError) {
            var replay = Workspace(id: workspace, epoch: epoch)
            for applied in log { try replay.apply(applied: applied) }
            if replay != stored.workspace { problems.append("\(workspace): the stored state is not the replay of its log") }
        } catch {
            problems.append("\(workspace): the log does not replay: \(error)")
        }
        return problems
    }

    /// The state a replay of the log gives.
    func replay(_ workspace: String) -> Workspace {
        var replay = Workspace(id: workspace, epoch: epoch)
        for applied in log(workspace) { try? replay.apply(applied: applied) }
        return replay
    }

    /// Every op acknowledged to any client is in its workspace's log exactly once, as acknowledged;
    /// no refused op is in it; and every seq a client used is accounted for: in the log once, or
    /// refused (told to the client, or kept in the store's dedup answers when the client resumed
    /// past it). Nothing acknowledged is lost, nothing is applied twice.
    func problemsWithTheAcks(of clients: [ClusterClient], workspaceOf: (ClusterClient) -> String) -> [String] {
        var problems: [String] = []
        var logged: [String: [UInt64: AppliedOp]] = [:]
        for (workspace, stored) in stored {
            for applied in stored.log where !applied.clientId.isEmpty {
                if let earlier = logged[applied.clientId]?[applied.seq] {
                    problems.append("\(workspace): \(applied.clientId)#\(applied.seq) is in the log twice (v\(earlier.version), v\(applied.version))")
                }
                logged[applied.clientId, default: [:]][applied.seq] = applied
            }
        }
        for client in clients {
            let record = client.snapshot
            let mine = logged[client.clientId] ?? [:]
            let storedRefusals = Set((stored[workspaceOf(client)]?.rejections ?? [])
                .filter { $0.clientId == client.clientId }.map(\.seq))
            for (seq, ack) in record.acks where mine[seq] != ack {
                problems.append("\(client.clientId)#\(seq) acknowledged at v\(ack.version) is not in the log as acknowledged")
            }
            for seq in record.rejections.keys where mine[seq] != nil {
                problems.append("\(client.clientId)#\(seq) was refused but is in the log")
            }
            let used = max(record.submitted.keys.max() ?? 0, record.acks.keys.max() ?? 0, record.rejections.keys.max() ?? 0)
            if used > 0 {
                for seq in 1...used where mine[seq] == nil && record.rejections[seq] == nil && !storedRefusals.contains(seq) {
                    problems.append("\(client.clientId)#\(seq) is neither in the log nor refused: lost")
                }
            }
        }
        return problems
    }

    /// The cluster ordered `workspace` as one server would have: its submitted ops, fed in the
    /// order of the log to one core ``Sequencer`` (the single-node order, where the core's tests
    /// check rules 1-7), give exactly the log, server-made rekeys included. An op the cluster
    /// re-sequenced after another node wrote must come out as it would have on one node.
    func problemsAgainstOneSequencer(_ workspace: String, submitted: [String: [UInt64: Replica.PendingOp]]) -> (problems: [String], unknown: Int) {
        var problems: [String] = []
        var unknown = 0
        let log = self.log(workspace)
        var sequencer = Sequencer(workspace: Workspace(id: workspace, epoch: epoch), limits: Limits(maxOpsPerSecond: 1_000_000))
        var index = 0
        // The op an applied op came from: as submitted when known, else the canonical op itself.
        while index < log.count {
            let entry = log[index]
            guard !entry.clientId.isEmpty else {
                problems.append("\(workspace): a rekey at v\(entry.version) that no op of one sequencer made")
                index += 1
                continue
            }
            let pending = submitted[entry.clientId]?[entry.seq]
            if pending == nil { unknown += 1 }
            let outcome = sequencer.submit(
                clientId: entry.clientId, seq: entry.seq, baseVersion: pending?.baseVersion ?? 0, op: pending?.op ?? entry.op)
            guard case .applied(let ops) = outcome else {
                problems.append("\(workspace): v\(entry.version) (\(entry.clientId)#\(entry.seq)) applied by the cluster, \(outcome) on one sequencer")
                index += 1
                continue
            }
            let expected = Array(log[index..<min(log.count, index + ops.count)])
            if ops != expected {
                problems.append("\(workspace): v\(entry.version) differs from one sequencer: cluster \(expected), one node \(ops)")
            }
            index += max(1, ops.count)
        }
        return (problems, unknown)
    }
}
