import Logging
import SwiftProtobuf
import TabsyncCore
import TabsyncProto
import TabsyncStore
import TabsyncTestSupport
@testable import TabsyncClient
@testable import TabsyncServerCore

/// The end of a world: it settles without faults within its budget, then the end state is checked
/// (every acknowledged op stored once, every client converged).
extension SimulatedWorld {
    /// Faults off: every client connects, everything is delivered and stored, time passes; then
    /// the end state is checked against the store.
    mutating func finish() {
        store.faults = false
        for round in 0..<Self.settleRounds where !overBudget {
            var moved = false
            for c in clients.indices where clients[c].link == nil && clients[c].session.phase != .closed {
                connect(c, to: options.split ? c % nodes.count : home)
                moved = true
            }
            // Each round moves what was queued when it began (and, on a link, the answers to it):
            // what that causes waits for the next round, so a world that loops (a commit that
            // keeps coming back behind, two ends that keep answering each other) runs out of
            // rounds, 50 ms of virtual time each, instead of spinning inside one.
            for id in links.keys.sorted() {
                guard let link = links[id] else { continue }
                for _ in 0..<(2 * (link.up.count + link.down.count)) where !overBudget {
                    guard links[id] != nil, !links[id]!.up.isEmpty || !links[id]!.down.isEmpty else { break }
                    // Keepalive traffic (pings, pongs) goes on whatever happens: it moves nothing.
                    if !Self.isKeepalive(links[id]!) { moved = true }
                    if !links[id]!.up.isEmpty { deliverUp(id) }
                    if links[id] != nil && !links[id]!.down.isEmpty { deliverDown(id) }
                }
            }
            for n in nodes.indices {
                for _ in 0..<nodes[n].storeCalls.count where !overBudget {
                    if !Self.isPeriodic(nodes[n].storeCalls[0]) { moved = true }
                    completeStoreCall(n)
                }
            }
            for _ in 0..<feed.count where !overBudget {
                tellFeed()
                moved = true
            }
            if !overBudget && resendUnansweredWrites() { moved = true }
            tick()
            if !moved && round > 40 && settled() { break }
            if round == Self.settleRounds - 1 && !settled() {
                return fail("the world did not settle within \(Self.settleRounds) rounds (\(elapsed) of virtual time); "
                    + "waiting for: \(describeUnsettled())")
            }
        }
        if overBudget || !settled() { return }
        checkEnd()
    }

    func settled() -> Bool {
        clients.allSatisfy { c in
            c.stopped || (c.session.phase == .ready && c.session.state.pending.isEmpty && c.session.state.unsequenced == 0)
        } && links.values.allSatisfy(Self.isKeepalive)
            && nodes.allSatisfy { $0.storeCalls.allSatisfy(Self.isPeriodic) } && writesSettled
    }

    /// Nothing but keepalive traffic (or nothing at all) is in flight on the link: it goes on on the
    /// nodes' clocks whatever happens.
    static func isKeepalive(_ link: Link) -> Bool {
        link.up.allSatisfy(\.isEmpty) && link.down.allSatisfy { $0 == .ping }
    }

    /// Store calls a node makes on its clock whatever happens (heartbeats, polls): a world whose
    /// only calls left are these has settled. What a poll finds goes on in calls that are not.
    static func isPeriodic(_ action: ServerCore.Action) -> Bool {
        switch action {
        case .heartbeat, .pollVersions: true
        default: false
        }
    }

    /// The end: every acknowledged op is in the log exactly once; per-client seq order holds;
    /// versions have no gaps; every client holds the store's workspace. The store's log keeps only
    /// its window (`logRetention`), so the whole history is read from the batches it accepted
    /// (``RuleOracle``), and the log must be their tail.
    mutating func checkEnd() {
        for n in nodes.indices {
            // What a node unloaded it released: its registrations are what it holds in memory.
            let registered = holders.registrations(of: nodes[n].name)
            let inMemory = nodes[n].core.workspaces.ids
            for id in registered.sorted() where !inMemory.contains(id) {
                fail("node \(n) (\(nodes[n].name)) is still registered as a holder of \(id), which it unloaded")
            }
        }
        let stored = try? store.base.load(workspaceId: workspace)
        let log = stored?.log ?? []
        let final = stored?.workspace ?? Workspace(id: workspace, epoch: store.epoch)
        let first = log.first?.version ?? final.version + 1
        for (i, op) in log.enumerated() where op.version != first + UInt64(i) {
            return fail("log version \(op.version) at position \(i + 1) after v\(first): a gap or a version written twice")
        }
        if log.count < min(options.logRetention, Int(final.version)) || (log.last?.version ?? 0) != final.version {
            fail("log holds v\(first)...v\(log.last?.version ?? 0) for version \(final.version) (retention \(options.logRetention))")
        }
        if oracle.current != final {
            fail("the store holds v\(final.version) \(final.tabs.map(\.id)), its accepted batches make "
                + "v\(oracle.current.version) \(oracle.current.tabs.map(\.id))")
        }
        if log != Array(oracle.log.suffix(log.count)) { fail("the store's log is not the tail of the ops its batches brought") }
        checkWrites()
        for (c, client) in clients.enumerated() {
            for (seq, version) in client.acked.sorted(by: { $0.key < $1.key })
            where client.ackedEpoch[seq] == final.epoch && oracle.appliedAt[RuleOracle.ClientSeq(client: "c\(c)", seq: seq)] != version {
                fail("c\(c) seq \(seq) acknowledged at v\(version) is not stored there")
            }
            let confirmed = client.session.state.confirmed
            if !client.stopped && confirmed != final {
                fail("c\(c) holds v\(confirmed.version) \(confirmed.tabs.map(\.id)), the store v\(final.version) \(final.tabs.map(\.id))")
            }
        }
    }

    /// What keeps the world from settling: clients not ready or with ops pending, frames still in
    /// flight, store calls not answered, commits not yet told to the other nodes.
    func describeUnsettled() -> String {
        var parts = clients.enumerated().compactMap { c, client -> String? in
            let pending = client.session.state.pending.map(\.seq)
            guard client.session.phase != .ready || !pending.isEmpty || client.session.state.unsequenced > 0 else { return nil }
            return "c\(c) \(client.session.phase) pending \(pending)"
        }
        for id in links.keys.sorted() where !links[id]!.up.isEmpty || !links[id]!.down.isEmpty {
            let link = links[id]!
            parts.append("link \(id) (c\(link.client), node \(link.node)) \(link.up.count) up \(link.down.count) down")
        }
        for n in nodes.indices {
            for (id, session) in nodes[n].core.sessions.sorted(by: { $0.key < $1.key })
            where session.historyHold || !session.deferred.isEmpty {
                parts.append("node \(n) session \(id) \(session.historyHold ? "waits for a history read" : "") "
                    + "\(session.deferred.count) messages deferred")
            }
        }
        for n in nodes.indices where !nodes[n].storeCalls.isEmpty {
            parts.append("node \(n) \(nodes[n].storeCalls.count) store calls (first \(Self.name(nodes[n].storeCalls[0])))")
        }
        if !feed.isEmpty { parts.append("\(feed.count) commits not yet told") }
        for write in httpWrites where !write.answered || write.pending != nil {
            parts.append("write \(write.key) \(write.pending.map { "in flight at node \($0.node)" } ?? "unanswered") after \(write.sends) sends")
        }
        if stats.behind > 0 { parts.append("(\(stats.behind) batches came back behind so far)") }
        return parts.isEmpty ? "nothing (settled)" : parts.joined(separator: ", ")
    }

    static func name(_ action: ServerCore.Action) -> String {
        switch action {
        case .commit(let id, let batch): "commit \(id) of \(batch.records.count) records"
        case .load(let id): "load \(id)"
        case .hold(let id): "hold \(id)"
        case .checkHolders(let id): "check holders of \(id)"
        case .heartbeat: "heartbeat"
        case .readChanges(let versions): "read changes after \(versions)"
        case .pollVersions: "poll"
        default: "\(action)".prefix(60).description
        }
    }
}
