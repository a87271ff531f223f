import Testing
import TabsyncCore

/// `Sequencer.adopt`: a sequencer that takes another writer's applied ops and refusals (a node
/// catching up on a shared store) ends where that writer is: same workspace, the same answers to
/// resubmitted seqs, and keys computed before an adopted rekey translated through it.
@Suite struct SequencerAdoptTests {
    /// Writer A's history: adds, a refusal, and a server-made rekey (a key over 64 bytes).
    static func history() -> (writer: Sequencer, applied: [AppliedOp], refused: [Sequencer.Rejection]) {
        var a = Sequencer(workspace: Workspace(id: "w", epoch: "e"), limits: .default)
        var applied: [AppliedOp] = []
        var refused: [Sequencer.Rejection] = []
        func take(_ outcome: Sequencer.Outcome, _ client: String, _ seq: UInt64) {
            switch outcome {
            case .applied(let ops): applied += ops
            case .rejected(let error): refused.append(.init(clientId: client, seq: seq, error: error))
            default: Issue.record("unexpected \(outcome)")
            }
        }
        take(a.submit(clientId: "c1", seq: 1, baseVersion: 0, op: .add(tab: Tab(id: "t1"), place: .end, activate: true)), "c1", 1)
        take(a.submit(clientId: "c1", seq: 2, baseVersion: 0, op: .add(tab: Tab(id: "t2"), place: .end, activate: false)), "c1", 2)
        take(a.submit(clientId: "c1", seq: 3, baseVersion: 0, op: .add(tab: Tab(id: "t3"), place: .index(0), activate: false)), "c1", 3)
        take(a.submit(clientId: "c2", seq: 1, baseVersion: 0, op: .remove(tabId: "nope")), "c2", 1)
        let long = "a0" + String(repeating: "V", count: 70)
        take(a.submit(clientId: "c2", seq: 2, baseVersion: 3, op: .add(tab: Tab(id: "X"), place: .key(long), activate: false)), "c2", 2)
        return (a, applied, refused)
    }

    @Test func adoptingAnotherWritersOpsAndRefusalsEndsWhereItIs() throws {
        let (a, applied, refused) = Self.history()
        #expect(applied.contains { if case .rekey = $0.op { true } else { false } })
        var b = Sequencer(workspace: Workspace(id: "w", epoch: "e"), limits: .default)
        for op in applied { try b.adopt(op) }
        for rejection in refused { b.adopt(rejection) }
        #expect(b.workspace == a.workspace)
        #expect(b.lastSeq(of: "c1") == 3 && b.lastSeq(of: "c2") == 2)
        #expect(b.rekeys == a.rekeys)
        #expect(b.missed(after: 0) == applied)
        // Resubmissions are answered as A would, never applied again.
        var a2 = a
        for (client, seq, op) in [("c1", UInt64(2), Operation.add(tab: Tab(id: "t2"), place: .end, activate: false)),
                                  ("c2", 1, .remove(tabId: "nope"))] {
            let fromB = b.submit(clientId: client, seq: seq, baseVersion: 0, op: op)
            #expect(fromB == a2.submit(clientId: client, seq: seq, baseVersion: 0, op: op))
            guard case .answeredAgain = fromB else { Issue.record("\(client) \(seq): \(fromB)"); continue }
        }
        // A key computed at version 3 (between t1 and t2, before the rekey) is translated alike.
        let late = Operation.add(tab: Tab(id: "Y"), place: .key("a0V"), activate: false)
        #expect(b.submit(clientId: "c3", seq: 1, baseVersion: 3, op: late) == a2.submit(clientId: "c3", seq: 1, baseVersion: 3, op: late))
        #expect(b.workspace == a2.workspace)
    }

    @Test func anOpThatDoesNotFollowIsRefusedAndChangesNothing() throws {
        let (_, applied, _) = Self.history()
        var b = Sequencer(workspace: Workspace(id: "w", epoch: "e"), limits: .default)
        #expect(throws: OpError.self) { try b.adopt(applied[1]) }
        #expect(b.workspace.version == 0 && b.log.isEmpty && b.lastSeq(of: "c1") == 0)
    }
}
