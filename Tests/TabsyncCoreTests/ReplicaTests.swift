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

    /// Issue 39: an op is settled only by its own answer. An answer to a later seq settles none
    /// below it (that op was refused, its `Rejected` lost with a connection: taking it for settled
    /// brought back a tab the user closed); it is sent again with its seq for its stored answer.
    @Test func anAnswerToALaterSeqSettlesNothingBelowIt() {
        var server = Sequencer(workspace: Workspace(id: "w"), limits: .default)
        var r = Replica(clientId: "me", workspace: Workspace(id: "w"))
        let skipped = r.submit(.add(tab: Tab(id: "a"), place: .end, activate: false))
        let later = r.submit(.add(tab: Tab(id: "b"), place: .end, activate: false))
        let third = r.submit(.add(tab: Tab(id: "c"), place: .end, activate: false))
        guard case .applied(let ops) = server.submit(clientId: "me", seq: later.seq, baseVersion: 0, op: later.op) else {
            Issue.record("not applied"); return
        }
        #expect(r.receive(applied: ops[0]) == .applied)
        #expect(r.pending == [skipped, third])
        #expect(r.optimistic.tabs.map(\.id) == ["b", "a", "c"])

        // The same through a Rejected, ANSWER_GONE settling only its own seq, and an Applied seen
        // again (stale).
        var refused = Replica(clientId: "me", workspace: Workspace(id: "w"))
        let first = refused.submit(.remove(tabId: "x"))
        let second = refused.submit(.remove(tabId: "y"))
        let kept = refused.submit(.remove(tabId: "z"))
        #expect(refused.receive(rejectedSeq: second.seq) == second)
        #expect(refused.pending == [first, kept])
        #expect(refused.hold(rejectedSeq: 99) == nil && refused.pending == [first, kept])

        var again = Replica(clientId: "me", workspace: Workspace(id: "w"))
        _ = again.receive(applied: ops[0].with(clientId: "someone else"))
        let lower = again.submit(.add(tab: Tab(id: "d"), place: .end, activate: false))
        let other = again.submit(.add(tab: Tab(id: "e"), place: .end, activate: false))
        #expect(again.receive(applied: ops[0].with(clientId: "me", seq: other.seq)) == .stale)
        #expect(again.pending == [lower])
        #expect(again.receive(applied: ops[0].with(clientId: "me", seq: lower.seq)) == .stale)
        #expect(again.pending.isEmpty)
        #expect(again.nextSeq == other.seq + 1)
    }

    /// docs/design.md, 'Transient refusals are retried': an op refused UNAVAILABLE is held, still
    /// shown; released, it goes again under a new seq after every seq handed out, keeps its first
    /// seq and base version, and the server applies it (a new seq is always safe).
    @Test func aHeldOpStaysShownAndGoesAgainUnderANewSeq() {
        var server = Sequencer(workspace: Workspace(id: "w"), limits: .default)
        var r = Replica(clientId: "me", workspace: Workspace(id: "w"))
        let first = r.submit(.add(tab: Tab(id: "a"), place: .end, activate: true))
        let second = r.submit(.add(tab: Tab(id: "b"), place: .end, activate: false))
        // The store failed the batch of both: UNAVAILABLE consumes nothing.
        #expect(r.hold(rejectedSeq: first.seq) == first)
        #expect(r.hold(rejectedSeq: second.seq) == second)
        #expect(r.pending.isEmpty && r.held == [first, second])
        #expect(r.optimistic.tabs.map(\.id) == ["a", "b"], "a held op is rolled back")
        // A later op goes first; an answer to it settles nothing held.
        let third = r.submit(.add(tab: Tab(id: "c"), place: .end, activate: false))
        guard case .applied(let c) = server.submit(clientId: "me", seq: third.seq, baseVersion: 0, op: third.op) else {
            Issue.record("not applied"); return
        }
        #expect(r.receive(applied: c[0]) == .applied)
        #expect(r.held.count == 2, "an answer to a later seq dropped held ops")
        #expect(r.optimistic.tabs.map(\.id) == ["c", "a", "b"])
        let released = r.releaseHeld()
        #expect(released.map(\.seq) == [4, 5])
        #expect(released.map(\.firstSeq) == [first.seq, second.seq])
        #expect(released.map(\.baseVersion) == [0, 0])
        #expect(r.held.isEmpty && r.pending == released)
        for p in released {
            guard case .applied(let ops) = server.submit(clientId: "me", seq: p.seq, baseVersion: p.baseVersion, op: p.op) else {
                Issue.record("a released op was not applied"); return
            }
            #expect(r.receive(applied: ops[0]) == .applied)
        }
        #expect(r.pending.isEmpty)
        #expect(r.confirmed == server.workspace)
        #expect(r.optimistic.tabs.map(\.id) == ["c", "a", "b"])
        #expect(r.releaseHeld().isEmpty)
    }

    /// A Welcome's lastSeq and a snapshot leave held ops alone: nothing of them was consumed.
    @Test func aWelcomeKeepsHeldOps() {
        var r = Replica(clientId: "me", workspace: Workspace(id: "w"))
        let p = r.submit(.add(tab: Tab(id: "a"), place: .end, activate: false))
        r.hold(rejectedSeq: p.seq)
        r.resume(lastSeq: 7)
        r.reset(to: Workspace(id: "w", version: 3, epoch: "e", tabs: [], activeTabId: "", editable: true), lastSeq: 7)
        #expect(r.held == [p])
        #expect(r.optimistic.tabs.map(\.id) == ["a"])
        #expect(r.releaseHeld().map(\.seq) == [8])
        // Holding a seq that is not pending settles nothing.
        var q = Replica(clientId: "me", workspace: Workspace(id: "w"))
        let x = q.submit(.remove(tabId: "x"))
        #expect(q.hold(rejectedSeq: 2) == nil)
        #expect(q.pending == [x] && q.held.isEmpty)
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

    /// Issue 39: `Welcome.lastSeq` settles nothing; pending ops at or below it wait for the
    /// answers their resubmission gets, and new seqs go on after it.
    @Test func aWelcomeKeepsPendingOpsAtOrBelowLastSeqAndSeqsKeepIncreasing() {
        var r = Replica(clientId: "me", workspace: Workspace(id: "w"))
        r.submit(.setEditable(false))
        r.submit(.setEditable(true))
        r.submit(.setEditable(false))
        var snapshot = Workspace(id: "w")
        snapshot.version = 2
        r.reset(to: snapshot, lastSeq: 2)
        #expect(r.pending.map(\.seq) == [1, 2, 3])
        #expect(r.optimistic.editable == false)
        r.reset(to: snapshot, lastSeq: 10)
        r.resume(lastSeq: 10)
        #expect(r.pending.map(\.seq) == [1, 2, 3])
        #expect(r.submit(.setEditable(true)).seq == 11)
        for seq in UInt64(1)...3 { r.receive(rejectedSeq: seq) }
        #expect(r.pending.map(\.seq) == [11])
    }
}

@Suite struct ReplicaRekeyTests {
    @Test func pendingKeysAreTranslatedThroughARekeySoTheOptimisticStateMatchesTheServer() {
        var server = Sequencer(workspace: Workspace(id: "w"), limits: .default)
        var me = Replica(clientId: "me", workspace: Workspace(id: "w"))
        // a, b, m at a0, a1, a0V — everyone sees them.
        for (seq, (id, place)) in [("a", Place.end), ("b", .end), ("m", .key("a0V"))].enumerated() {
            guard case .applied(let ops) = server.submit(clientId: "o", seq: UInt64(seq + 1), baseVersion: 0,
                                                         op: .add(tab: Tab(id: id), place: place, activate: false)) else { return }
            for op in ops { _ = me.receive(applied: op) }
        }
        // I drop x between m and b, computed against version 3.
        let pending = me.submit(.add(tab: Tab(id: "x"), place: .key(PositionKey.between("a0V", "a1")), activate: false))
        // Meanwhile someone's 70-byte key makes the server rekey; those ops reach me first.
        guard case .applied(let theirs) = server.submit(clientId: "o", seq: 4, baseVersion: 0,
            op: .add(tab: Tab(id: "y"), place: .key("a0" + String(repeating: "1", count: 68)), activate: false)) else { return }
        for op in theirs { #expect(me.receive(applied: op) == .applied) }
        #expect(me.rekeys.count == 1)
        // Optimistic: x still between m and b, as the server will place it.
        #expect(me.optimistic.tabs.map(\.id) == ["a", "y", "m", "x", "b"])
        guard case .applied(let mine) = server.submit(clientId: "me", seq: pending.seq, baseVersion: pending.baseVersion, op: pending.op) else { return }
        for op in mine { _ = me.receive(applied: op) }
        #expect(me.confirmed == server.workspace)
        #expect(me.optimistic == server.workspace)
        #expect(me.rekeys.isEmpty)
    }
}

extension AppliedOp {
    /// This op as if another client (and seq) had made it.
    func with(clientId: String, seq: UInt64? = nil) -> AppliedOp {
        AppliedOp(version: version, op: op, clientId: clientId, seq: seq ?? self.seq, activeTabId: activeTabId)
    }
}
