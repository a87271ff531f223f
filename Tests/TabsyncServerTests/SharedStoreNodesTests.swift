import Foundation
import TabsyncCore
import TabsyncProto
import TabsyncServer
import TabsyncTestServer
import TabsyncTestSupport
import Testing
@testable import TabsyncStore

/// Two in-process server nodes on one PostgreSQL database (a schema of the test's own), clients on
/// real sockets: commits of one node reach the other's sessions, a node behind catches up and
/// re-sequences what it has not acknowledged, a resubmitted seq is answered from dedup.
@Suite(
    "Several nodes on one PostgreSQL", .serialized,
    .enabled(if: PostgresTestCluster.isEnabled, PostgresTestCluster.skipReason))
struct SharedStoreNodesTests {
    /// Random ops of one client: adds of its own tabs (at the end or an index), moves and removes
    /// of them (a remove may find the tab gone: refused), activates.
    static func op(_ client: String, _ i: Int, _ random: inout SplitMix64) -> TabsyncCore.Operation {
        let earlier = i == 0 ? 0 : Int(random.next() % UInt64(i))
        let index = UInt32(random.next() % 6)
        switch i == 0 ? 0 : random.next() % 5 {
        case 0: return .add(tab: .named("\(client)\(i)"), place: .end, activate: false)
        case 1: return .add(tab: .named("\(client)\(i)"), place: .index(index), activate: true)
        case 2: return .move(tabId: "\(client)\(earlier)", place: .index(index))
        case 3: return .remove(tabId: "\(client)\(earlier)")
        default: return .activate(.tabId("\(client)\(earlier)"))
        }
    }

    /// A split workspace goes home: the node holding it longest hears of the other node's commit,
    /// finds a newer holder in the registry and closes its session 4307 "moved"; the client resumes
    /// on the other node and nothing is lost. Only the newer node's commits notified the older
    /// while both held it; once the older released it, commits notify nobody.
    @Test func aSplitWorkspaceIsHandedToItsNewerHolder() throws {
        let nodes = try SharedStoreNodes([.notifications, .notifications]) { $0.sharedStore?.movesSplitWorkspaces = true }
        let (a, _) = try TestClient.joined(port: nodes[0].port, workspace: "w", clientId: "ca")
        _ = try a.submit(.add(tab: .named("a1"), place: .end, activate: true))
        #expect(try a.nextApplied().version == 1)
        #expect(try metric(nodes[0], "tabsync_store_notifications_sent_total") == 0)  // nobody else held it

        let (b, _) = try TestClient.joined(port: nodes[1].port, workspace: "w", clientId: "cb")
        #expect(try metric(nodes[1], "tabsync_workspace_splits_total") == 1)
        _ = try b.submit(.add(tab: .named("b1"), place: .end, activate: false))
        #expect(try b.nextApplied().version == 2)
        // Node 0 takes node 1's op, asks the registry, and hands the workspace over.
        #expect(try a.nextApplied().version == 2)
        #expect(try a.closeCode(timeout: 10) == 4307)
        #expect(try metric(nodes[0], "tabsync_workspace_moves_total") == 1)
        let released = waitUntil(deadline: .seconds(10)) { ((try? metric(nodes[0], "tabsync_workspaces_loaded")) ?? 1) == 0 }
        #expect(released, "node 0 still holds the workspace it handed over")

        // a resumes on node 1. Once node 0's release reaches the registry (on its store executor,
        // after the unload), node 1's commits notify nobody.
        let (a2, _) = try TestClient.joined(port: nodes[1].port, workspace: "w", clientId: "ca", lastVersion: 2)
        var seq: UInt64 = 2
        var quiet = false
        let deadline = ContinuousClock.now + .seconds(10)
        while !quiet && ContinuousClock.now < deadline {
            let sentBefore = try metric(nodes[1], "tabsync_store_notifications_sent_total") ?? -1
            try a2.submit(.add(tab: .named("a\(seq)"), place: .end, activate: false), seq: seq)
            #expect(try a2.nextApplied().seq == seq)
            seq += 1
            quiet = try metric(nodes[1], "tabsync_store_notifications_sent_total") == sentBefore
        }
        #expect(quiet, "node 1's commits still notify after node 0 released the workspace")
        let stored = try #require(try nodes.reader().load(workspaceId: "w"))
        #expect(stored.workspace.tabs.map(\.id) == ["a1", "b1"] + (2..<seq).map { "a\($0)" })
    }

    @Test func clientsOnTwoNodesWritingOneWorkspaceSeeContiguousVersionsAndTheLogsState() throws {
        let nodes = try SharedStoreNodes([.notifications, .notifications])
        let (a, _) = try TestClient.joined(port: nodes[0].port, workspace: "w", clientId: "ca")
        let (b, _) = try TestClient.joined(port: nodes[1].port, workspace: "w", clientId: "cb")
        var random = SplitMix64(seed: 13)
        let perClient = 60
        for i in 0..<perClient {
            try a.submit(Self.op("a", i, &random))
            try b.submit(Self.op("b", i, &random))
        }
        var seenA: [AppliedOp] = []
        var seenB: [AppliedOp] = []
        let refusedA = try a.collect(answers: perClient, clientId: "ca", into: &seenA)
        let refusedB = try b.collect(answers: perClient, clientId: "cb", into: &seenB)

        let reader = try nodes.reader()
        let stored = try #require(try reader.load(workspaceId: "w"))
        let version = stored.workspace.version
        try a.collect(through: version, into: &seenA)
        try b.collect(through: version, into: &seenB)

        // Contiguous at both clients, the same stream, and the stored log itself.
        #expect(seenA.map(\.version) == Array(1...version))
        #expect(seenB.map(\.version) == Array(1...version))
        #expect(seenA == seenB)
        let log = try #require(try reader.ops(workspaceId: "w", after: 0, limit: .max))
        #expect(log == seenA)
        // Every seq answered once: applied exactly once or refused, never both.
        for (client, refused) in [("ca", refusedA), ("cb", refusedB)] {
            let appliedSeqs = log.filter { $0.clientId == client }.map(\.seq)
            #expect(Set(appliedSeqs).count == appliedSeqs.count, "\(client): a seq applied twice")
            #expect(Set(appliedSeqs).isDisjoint(with: refused.keys), "\(client): a seq applied and refused")
            #expect(Set(appliedSeqs).union(refused.keys) == Set(1...UInt64(perClient)), "\(client): a seq unanswered")
        }
        // The same final state: the clients' stream, the log replayed, the store, both nodes.
        var replica = Workspace(id: "w", epoch: stored.workspace.epoch)
        for op in seenA { try replica.apply(applied: op) }
        #expect(replica == stored.workspace)
        #expect(try replayedLog(reader, workspace: "w") == stored.workspace)
        for node in 0..<2 {
            let ready = waitUntil(deadline: .seconds(10)) {
                ((try? httpGet(port: nodes[node].port, path: "/v1/workspaces/w").body) ?? "").contains("\"version\":\"\(version)\"")
            }
            #expect(ready, "node \(node) does not serve version \(version)")
        }
        // Both nodes wrote one workspace at once: at least one batch ran into the other's commit.
        let retried = try (metric(nodes[0], "tabsync_commits_retried_total") ?? 0) + (metric(nodes[1], "tabsync_commits_retried_total") ?? 0)
        #expect(retried > 0)
    }

    @Test func aSeqResubmittedToTheOtherNodeIsAnsweredFromDedupNotAppliedTwice() throws {
        // Node 1 hears nothing: the resubmission meets it behind, and its batch finds out.
        let nodes = try SharedStoreNodes([.notifications, .deaf])
        let (watcher, _) = try TestClient.joined(port: nodes[1].port, workspace: "w", clientId: "watch")
        let (first, welcome) = try TestClient.joined(port: nodes[0].port, workspace: "w", clientId: "c1")
        let add = TabsyncCore.Operation.add(tab: .named("t1"), place: .end, activate: true)
        let move = TabsyncCore.Operation.move(tabId: "t9", place: .index(0))
        try first.submit(add, seq: 1)
        let applied = try first.nextApplied()
        try first.submit(move, seq: 2)
        #expect(try first.nextRejected().code == .tabGone)
        // Then t9 appears: sequenced anew, seq 2 would now apply; answered from dedup, it is refused.
        let (other, _) = try TestClient.joined(port: nodes[0].port, workspace: "w", clientId: "other")
        try other.submit(.add(tab: .named("t9"), place: .end, activate: false))
        var stream: [AppliedOp] = [applied]
        try first.collect(through: 2, into: &stream)

        // The client comes back on node 1 (as after losing node 0) and sends both seqs again.
        let (again, _) = try TestClient.joined(
            port: nodes[1].port, workspace: "w", clientId: "c1", lastVersion: applied.version, epoch: welcome.epoch)
        try again.submit(add, seq: 1)
        try again.submit(move, seq: 2)
        var answers: [Tabsync_V1_ServerMessage.OneOf_Message] = []
        var seen: [AppliedOp] = []
        while !answers.contains(where: { if case .rejected = $0 { true } else { false } }) {
            let message = try again.receive(timeout: 10)
            if case .applied(let a) = message { seen.append(try AppliedOp(a)) }
            answers.append(message)
        }
        // Node 0's ops arrive as broadcasts (node 1 caught up); seq 1 is answered with its Applied
        // again, seq 2 refused again as it was; nothing new was applied.
        #expect(seen.filter { $0.clientId == "c1" } == [applied, applied])
        #expect(seen.filter { $0.clientId == "other" } == [stream[1]])
        let refusals: [Tabsync_V1_ErrorCode] = answers.compactMap { message -> Tabsync_V1_ErrorCode? in
            if case .rejected(let r) = message { return r.code }
            return nil
        }
        #expect(refusals == [.tabGone])
        let reader = try nodes.reader()
        #expect(try reader.ops(workspaceId: "w", after: 0, limit: .max) == stream)

        // The next seq is new: version 3, seen contiguous by the watcher on node 1.
        try again.submit(.add(tab: .named("t2"), place: .end, activate: false), seq: 3)
        let next = try again.next { message -> AppliedOp? in
            if case .applied(let a) = message, let op = try? AppliedOp(a), op.seq == 3, op.clientId == "c1" { return op }
            return nil
        }
        #expect(next.version == 3)
        var watched: [AppliedOp] = []
        try watcher.collect(through: 3, into: &watched)
        #expect(watched.map(\.version) == [1, 2, 3])
    }

    @Test func aCommitOnOneNodeReachesTheOtherNodesSessionsByNotification() throws {
        let nodes = try SharedStoreNodes([.notifications, .notifications])
        #expect(waitUntil(deadline: .seconds(10)) { (try? metric(nodes[1], "tabsync_store_listening")) == 1 })
        let (reader, _) = try TestClient.joined(port: nodes[1].port, workspace: "w", clientId: "reader")
        let (writer, _) = try TestClient.joined(port: nodes[0].port, workspace: "w", clientId: "writer")
        try writer.submit(.add(tab: .named("t1"), place: .end, activate: true))
        let mine = try writer.nextApplied()
        let theirs = try reader.nextApplied(timeout: 10)
        #expect(theirs == mine)
        #expect(try metric(nodes[1], "tabsync_store_notifications_total") ?? 0 >= 1)
        // The op rode in the notification: node 1 took it without reading the store.
        #expect(try metric(nodes[1], "tabsync_store_notifications_taken_total") == 1)
        #expect(try metric(nodes[1], "tabsync_catchup_reads_total") == 0)
        #expect(try metric(nodes[1], "tabsync_ops_caught_up_total") == 1)
    }

    /// A batch too big for its notification's payload announces its version only: the other node
    /// reads the ops, and its sessions get them in order all the same. Six 3 KB ops sent at once
    /// usually share batches (two of them no longer fit); a node slow enough to commit each alone
    /// (seen under ThreadSanitizer) sends each in its notification, which must then be taken.
    @Test func aBatchTooBigForItsNotificationIsReadByTheOtherNode() throws {
        let nodes = try SharedStoreNodes([.notifications, .notifications])
        #expect(waitUntil(deadline: .seconds(10)) { (try? metric(nodes[1], "tabsync_store_listening")) == 1 })
        let (reader, _) = try TestClient.joined(port: nodes[1].port, workspace: "w", clientId: "reader")
        let (writer, _) = try TestClient.joined(port: nodes[0].port, workspace: "w", clientId: "writer")
        let url = "https://example.com/" + String(repeating: "u", count: 3_000)
        // Sent together, so they share a batch (6 × 3 KB: over the 8,000-byte payload).
        for i in 1...6 { try writer.submit(.add(tab: Tab(id: "t\(i)", url: url), place: .end, activate: false)) }
        var mine: [AppliedOp] = []
        try writer.collect(through: 6, into: &mine)
        var theirs: [AppliedOp] = []
        try reader.collect(through: 6, into: &theirs)
        #expect(theirs == mine)
        let batches = try #require(try metric(nodes[0], "tabsync_commit_batch_ops_count"))
        let reads = try metric(nodes[1], "tabsync_catchup_reads_total") ?? 0
        let taken = try metric(nodes[1], "tabsync_store_notifications_taken_total") ?? 0
        if batches < 6 {
            #expect(reads >= 1, "\(batches) batches for 6 ops: one held two or more, too big to ride along")
        } else {
            #expect(taken == 6 && reads == 0, "each op alone fits in its notification")
        }
        #expect(try metric(nodes[1], "tabsync_ops_caught_up_total") == 6)
    }

    @Test func thePollAloneDeliversAnotherNodesCommit() throws {
        let nodes = try SharedStoreNodes([.notifications, .pollOnly])
        let (reader, _) = try TestClient.joined(port: nodes[1].port, workspace: "w", clientId: "reader")
        let (writer, _) = try TestClient.joined(port: nodes[0].port, workspace: "w", clientId: "writer")
        for i in 1...3 { try writer.submit(.add(tab: .named("t\(i)"), place: .end, activate: i == 1)) }
        var mine: [AppliedOp] = []
        try writer.collect(through: 3, into: &mine)
        var theirs: [AppliedOp] = []
        try reader.collect(through: 3, into: &theirs, timeout: 10)
        #expect(theirs == mine)
        #expect(try metric(nodes[1], "tabsync_store_notifications_total") == 0)
        #expect(try metric(nodes[1], "tabsync_catchup_reads_total") ?? 0 >= 1)
    }

    /// Node 1 is behind (it hears nothing): its client's ops were sequenced against an old state,
    /// and are sequenced again against the state node 0 stored.
    @Test func opsSequencedOnAStaleNodeAreSequencedAgainAgainstTheStoredState() throws {
        let nodes = try SharedStoreNodes([.notifications, .deaf])
        let (seeder, _) = try TestClient.joined(port: nodes[0].port, workspace: "w", clientId: "seeder")
        for i in 1...3 { try seeder.submit(.add(tab: .named("t\(i)"), place: .end, activate: i == 1)) }
        var seeded: [AppliedOp] = []
        try seeder.collect(through: 3, into: &seeded)  // keys a0 a1 a2
        let (late, welcome) = try TestClient.joined(port: nodes[1].port, workspace: "w", clientId: "late")
        #expect(welcome.snapshot.version == 3)

        // Node 0: X dropped between t1 and t2, then t2 removed.
        try seeder.submit(.add(tab: .named("X"), place: .key("a0V"), activate: false))
        try seeder.submit(.remove(tabId: "t2"))
        try seeder.collect(through: 5, into: &seeded)

        // Node 1 (still at version 3): Y into the same gap, and a move of t2.
        let ySeq = try late.submit(.add(tab: .named("Y"), place: .key("a0V"), activate: false), baseVersion: 3)
        let moveSeq = try late.submit(.move(tabId: "t2", place: .end), baseVersion: 3)
        var seen: [AppliedOp] = []
        let refused = try late.collect(answers: 2, clientId: "late", into: &seen, timeout: 15)

        // Node 0's ops first (broadcast once caught up), then Y, placed after X (rule 1); the move
        // finds t2 removed (rule 4).
        #expect(seen.map(\.version) == [4, 5, 6])
        #expect(Array(seen.prefix(2)) == Array(seeded.suffix(2)))
        let y = try #require(seen.last)
        #expect(y.seq == ySeq)
        guard case .add(let tab, _, _) = y.op else { Issue.record("Y is not an add: \(y.op)"); return }
        #expect(tab.key != "a0V")
        #expect(PositionKey.less("a0V", tab.key) && PositionKey.less(tab.key, "a2"))
        #expect(refused[moveSeq]?.code == .tabGone)
        let stored = try #require(try nodes.reader().load(workspaceId: "w"))
        #expect(stored.workspace.tabs.map(\.id) == ["t1", "X", "Y", "t3"])
        #expect(try metric(nodes[1], "tabsync_commits_retried_total") ?? 0 >= 1)
    }

    /// Rule 7 across nodes: node 0 rekeys; a key node 1's client computed before that rekey is
    /// translated through it once node 1 has caught up, not read against the new keys.
    @Test func aKeyComputedBeforeAnotherNodesRekeyIsTranslatedThroughIt() throws {
        let nodes = try SharedStoreNodes([.notifications, .deaf])
        let (seeder, _) = try TestClient.joined(port: nodes[0].port, workspace: "w", clientId: "seeder")
        // [t3 t1 t2] at keys Zz a0 a1: a rekey gives them a0 a1 a2, so an untranslated key reads wrong.
        try seeder.submit(.add(tab: .named("t1"), place: .end, activate: true))
        try seeder.submit(.add(tab: .named("t2"), place: .end, activate: false))
        try seeder.submit(.add(tab: .named("t3"), place: .index(0), activate: false))
        var seeded: [AppliedOp] = []
        try seeder.collect(through: 3, into: &seeded)
        let (late, _) = try TestClient.joined(port: nodes[1].port, workspace: "w", clientId: "late")

        // A key over 64 bytes between t1 and t2: node 0 rekeys first (version 4), then adds X (5).
        let longKey = "a0" + String(repeating: "V", count: 70)
        try seeder.submit(.add(tab: .named("X"), place: .key(longKey), activate: false))
        try seeder.collect(through: 5, into: &seeded)
        guard case .rekey = seeded[3].op else { Issue.record("no rekey at version 4: \(seeded[3].op)"); return }

        // Node 1's client computed a key between t1 and t2 at version 3.
        let ySeq = try late.submit(.add(tab: .named("Y"), place: .key("a0V"), activate: false), baseVersion: 3)
        var seen: [AppliedOp] = []
        _ = try late.collect(answers: 1, clientId: "late", into: &seen, timeout: 15)
        #expect(seen.map(\.version) == [4, 5, 6])
        #expect(seen.last?.seq == ySeq)
        let stored = try #require(try nodes.reader().load(workspaceId: "w"))
        // Translated, Y stays between t1 and t2 (after X, rule 1); read against the new keys it
        // would land between t3 and t1.
        #expect(stored.workspace.tabs.map(\.id) == ["t3", "t1", "X", "Y", "t2"])
    }
}
