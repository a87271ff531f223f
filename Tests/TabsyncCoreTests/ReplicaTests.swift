import Testing
@testable import TabsyncCore

@Suite struct ReplicaTests {
    @Test func pendingOpsShowAtOnceAndLeaveWithTheirApplied() {
        var server = Sequencer(workspace: Workspace(id: "w"), limits: .default)
        var r = Replica(clientId: "me", workspace: Workspace(id: "w"))
        let p = r.submit(.add(tab: Tab(id: "a"), place: .end, activate: true))
        #expect(p.seq == 1 && p.baseVersion == 0)
        #expect(r.optimistic.tabs.map(\.id) == ["a"])
        #expect(r.confirmed.tabs.isEmpty)
        guard case .applied(let ops) = server.submit(clientId: "me", seq: p.seq, baseVersion: p.baseVersion, op: p.op) else {
            Issue.record("not applied"); return
        }
        #expect(r.receive(applied: ops[0]) == .applied)
        #expect(r.pending.isEmpty)
        #expect(r.confirmed == server.workspace)
        #expect(r.optimistic == r.confirmed)
    }

    @Test func othersOpsReplayUnderPendingOnes() {
        var server = Sequencer(workspace: Workspace(id: "w"), limits: .default)
        var r = Replica(clientId: "me", workspace: Workspace(id: "w"))
        r.submit(.add(tab: Tab(id: "mine"), place: .end, activate: false))
        guard case .applied(let theirs) = server.submit(clientId: "other", seq: 1, baseVersion: 0, op: .add(tab: Tab(id: "theirs"), place: .end, activate: false)) else { return }
        #expect(r.receive(applied: theirs[0]) == .applied)
        #expect(r.optimistic.tabs.map(\.id) == ["theirs", "mine"])
        #expect(r.pending.count == 1)
    }

    @Test func aRejectedOpIsDroppedAndTheOptimisticStateSettles() {
        var r = Replica(clientId: "me", workspace: Workspace(id: "w"))
        let p = r.submit(.add(tab: Tab(id: "a"), place: .end, activate: false))
        #expect(r.receive(rejectedSeq: p.seq) == p)
        #expect(r.optimistic.tabs.isEmpty)
        #expect(r.receive(rejectedSeq: 99) == nil)
    }

    @Test func gapsAndStaleOpsAreReported() {
        var r = Replica(clientId: "me", workspace: Workspace(id: "w"))
        let op = AppliedOp(version: 2, op: .setEditable(false), clientId: "x", seq: 1, activeTabId: "")
        #expect(r.receive(applied: op) == .gap(expected: 1, got: 2))
        let first = AppliedOp(version: 1, op: .setEditable(false), clientId: "x", seq: 1, activeTabId: "")
        #expect(r.receive(applied: first) == .applied)
        #expect(r.receive(applied: first) == .stale)
        let bad = AppliedOp(version: 2, op: .remove(tabId: "nope"), clientId: "x", seq: 2, activeTabId: "")
        guard case .diverged = r.receive(applied: bad) else { Issue.record("must diverge"); return }
    }

    @Test func aWelcomeDropsPendingOpsAtOrBelowLastSeqAndSeqsKeepIncreasing() {
        var r = Replica(clientId: "me", workspace: Workspace(id: "w"))
        r.submit(.setEditable(false))
        r.submit(.setEditable(true))
        r.submit(.setEditable(false))
        var snapshot = Workspace(id: "w")
        snapshot.version = 2
        r.reset(to: snapshot, lastSeq: 2)
        #expect(r.pending.map(\.seq) == [3])
        #expect(r.optimistic.editable == false)
        r.reset(to: snapshot, lastSeq: 10)
        #expect(r.pending.isEmpty)
        #expect(r.submit(.setEditable(true)).seq == 11)
    }
}
