import Testing
@testable import TabsyncCore

@Suite struct SequencerTests {
    func add(_ id: String, _ place: Place = .end) -> Operation { .add(tab: Tab(id: id), place: place, activate: false) }

    func appliedOps(_ outcome: Sequencer.Outcome, sourceLocation: SourceLocation = #_sourceLocation) -> [AppliedOp] {
        guard case .applied(let ops) = outcome else {
            Issue.record("expected applied, got \(outcome)", sourceLocation: sourceLocation)
            return []
        }
        return ops
    }

    @Test func appliesInOrderWithContiguousVersions() {
        var s = Sequencer(workspace: Workspace(id: "w"), limits: .default)
        let a = appliedOps(s.submit(clientId: "c1", seq: 1, baseVersion: 0, op: add("a")))
        let b = appliedOps(s.submit(clientId: "c2", seq: 1, baseVersion: 0, op: add("b")))
        #expect(a.map(\.version) == [1])
        #expect(b.map(\.version) == [2])
        #expect(b.first?.clientId == "c2")
        #expect(s.lastSeq(of: "c1") == 1)
        #expect(s.lastSeq(of: "nobody") == 0)
    }

    @Test func aResubmittedSeqIsAnsweredAgainAndNeverAppliedTwice() {
        var s = Sequencer(workspace: Workspace(id: "w"), limits: .default)
        let first = appliedOps(s.submit(clientId: "c1", seq: 1, baseVersion: 0, op: add("a")))
        #expect(s.submit(clientId: "c1", seq: 1, baseVersion: 0, op: add("a")) == .answeredAgain(.applied(first[0])))
        let refused = s.submit(clientId: "c1", seq: 2, baseVersion: 0, op: add("a"))
        #expect(refused == .rejected(.tabExists("a")))
        #expect(s.submit(clientId: "c1", seq: 2, baseVersion: 0, op: add("zz")) == .answeredAgain(.rejected(seq: 2, .tabExists("a"))))
        #expect(s.workspace.version == 1)
        #expect(s.workspace.tabs.count == 1)
    }

    @Test func seqZeroIsRefusedAndConsumesNothing() {
        var s = Sequencer(workspace: Workspace(id: "w"), limits: .default)
        guard case .rejected(let error) = s.submit(clientId: "c1", seq: 0, baseVersion: 0, op: add("a")) else {
            Issue.record("seq 0 must be refused"); return
        }
        #expect(error.code == .invalidArgument)
        #expect(s.lastSeq(of: "c1") == 0)
        #expect(s.workspace.version == 0)
    }

    @Test func aClientRekeyIsRefused() {
        var s = Sequencer(workspace: Workspace(id: "w"), limits: .default)
        guard case .rejected(let error) = s.submit(clientId: "c1", seq: 1, baseVersion: 0, op: .rekey(keys: [])) else {
            Issue.record("client rekey must be refused"); return
        }
        #expect(error.code == .invalidArgument)
        #expect(s.lastSeq(of: "c1") == 1)
    }

    @Test func missedOpsComeFromTheLogUntilItIsTrimmed() {
        var s = Sequencer(workspace: Workspace(id: "w"), limits: Limits(logRetention: 8))
        for i in 1...6 { _ = s.submit(clientId: "c", seq: UInt64(i), baseVersion: 0, op: add("t\(i)")) }
        #expect(s.missed(after: 6) == [])
        #expect(s.missed(after: 3)?.map(\.version) == [4, 5, 6])
        #expect(s.missed(after: 0)?.count == 6)
        for i in 7...40 { _ = s.submit(clientId: "c", seq: UInt64(i), baseVersion: 0, op: add("t\(i)")) }
        #expect(s.missed(after: 3) == nil)
        #expect(s.missed(after: 38)?.map(\.version) == [39, 40])
        #expect(s.log.count <= 10)
        // Answers older than the log are ignored, not applied again.
        #expect(s.submit(clientId: "c", seq: 2, baseVersion: 0, op: add("again")) == .ignored)
        #expect(s.workspace.tab("again") == nil)
    }

    @Test func aKeyOverSixtyFourBytesMakesTheServerRekeyFirst() {
        var s = Sequencer(workspace: Workspace(id: "w"), limits: .default)
        _ = s.submit(clientId: "c", seq: 1, baseVersion: 0, op: add("a"))
        _ = s.submit(clientId: "c", seq: 2, baseVersion: 0, op: add("b"))
        // A valid key of 70 bytes between a0 and a1.
        let longKey = "a0" + String(repeating: "V", count: 68)
        let ops = appliedOps(s.submit(clientId: "c", seq: 3, baseVersion: 0, op: add("x", .key(longKey))))
        #expect(ops.count == 2)
        guard case .rekey = ops[0].op else { Issue.record("a rekey must come first"); return }
        #expect(ops[0].clientId == "" && ops[0].seq == 0)
        #expect(ops.map(\.version) == [3, 4])
        #expect(s.workspace.tabs.map(\.id) == ["a", "x", "b"])
        #expect(s.workspace.tabs.allSatisfy { $0.key.utf8.count <= 8 })
    }

    @Test func aKeyComputedBeforeARekeyIsTranslated() {
        var s = Sequencer(workspace: Workspace(id: "w"), limits: .default)
        _ = s.submit(clientId: "c", seq: 1, baseVersion: 0, op: add("a"))
        _ = s.submit(clientId: "c", seq: 2, baseVersion: 0, op: add("b"))
        _ = s.submit(clientId: "c", seq: 3, baseVersion: 0, op: add("m", .key("a0V")))
        #expect(s.workspace.tabs.map(\.key) == ["a0", "a0V", "a1"])
        // Client 2, at version 3, computes a key between m and b.
        let between = PositionKey.between("a0V", "a1")
        // Meanwhile a 70-byte key between a and m forces a rekey: a0, a0V, a1 become a0, a1, a2.
        let outcome = s.submit(clientId: "c", seq: 4, baseVersion: 0, op: add("y", .key("a0" + String(repeating: "1", count: 68))))
        #expect(appliedOps(outcome).count == 2)
        #expect(s.rekeys.count == 1)
        #expect(s.workspace.tabs.map(\.id) == ["a", "y", "m", "b"])
        // Untranslated, client 2's key would now sit between y and m; translated, it stays between m and b.
        _ = s.submit(clientId: "c2", seq: 1, baseVersion: 3, op: add("x", .key(between)))
        #expect(s.workspace.tabs.map(\.id) == ["a", "y", "m", "x", "b"])
        // baseVersion 0 means "current": no translation.
        _ = s.submit(clientId: "c2", seq: 2, baseVersion: 0, op: add("z", .key(between)))
        #expect(s.workspace.tabs.map(\.id) == ["a", "y", "z", "m", "x", "b"])
        #expect(s.workspace.invariantViolations(limits: .default).isEmpty)
    }

    @Test func aKeyOverOneHundredTwentyEightBytesIsRefused() {
        var s = Sequencer(workspace: Workspace(id: "w"), limits: .default)
        let outcome = s.submit(clientId: "c", seq: 1, baseVersion: 0, op: add("x", .key("a0" + String(repeating: "V", count: 127))))
        guard case .rejected(let e) = outcome else { Issue.record("\(outcome)"); return }
        #expect(e.code == .invalidArgument)
    }
}

@Suite struct SequencerRestoreTests {
    @Test func aRestoredSequencerAnswersRefusalsAgainAndTranslatesThroughStoredRekeys() {
        var s = Sequencer(workspace: Workspace(id: "w"), limits: .default)
        _ = s.submit(clientId: "c", seq: 1, baseVersion: 0, op: .add(tab: Tab(id: "a"), place: .end, activate: false))
        _ = s.submit(clientId: "c", seq: 2, baseVersion: 0, op: .add(tab: Tab(id: "b"), place: .end, activate: false))
        _ = s.submit(clientId: "c", seq: 3, baseVersion: 0, op: .add(tab: Tab(id: "m"), place: .key("a0V"), activate: false))
        let between = PositionKey.between("a0V", "a1")
        _ = s.submit(clientId: "c", seq: 4, baseVersion: 0, op: .add(tab: Tab(id: "y"), place: .key("a0" + String(repeating: "1", count: 68)), activate: false))
        _ = s.submit(clientId: "c", seq: 5, baseVersion: 0, op: .remove(tabId: "nope"))
        #expect(s.rejections == [Sequencer.Rejection(clientId: "c", seq: 5, error: .tabGone("nope"))])
        var restored = Sequencer(
            workspace: s.workspace, limits: s.limits, log: s.log, lastSeqs: s.lastSeqs,
            rejections: s.rejections, rekeys: s.rekeys)
        #expect(restored.submit(clientId: "c", seq: 5, baseVersion: 0, op: .remove(tabId: "nope")) == .answeredAgain(.rejected(seq: 5, .tabGone("nope"))))
        _ = restored.submit(clientId: "c2", seq: 1, baseVersion: 3, op: .add(tab: Tab(id: "x"), place: .key(between), activate: false))
        #expect(restored.workspace.tabs.map(\.id) == ["a", "y", "m", "x", "b"])
    }
}

@Suite struct SequencerRefuseTests {
    @Test func aRefusalDecidedByTheServerConsumesTheSeqAndIsAnsweredAgain() {
        var s = Sequencer(workspace: Workspace(id: "w"), limits: .default)
        #expect(s.refuse(clientId: "c", seq: 1, error: .rateLimited("too fast")) == .rejected(.rateLimited("too fast")))
        #expect(s.lastSeq(of: "c") == 1)
        // The same seq sent again is not applied: it gets the first answer.
        #expect(s.submit(clientId: "c", seq: 1, baseVersion: 0, op: .setEditable(false))
            == .answeredAgain(.rejected(seq: 1, .rateLimited("too fast"))))
        #expect(s.workspace.version == 0)
        // An applied seq refused later keeps its first answer too.
        guard case .applied(let ops) = s.submit(clientId: "c", seq: 2, baseVersion: 0, op: .setEditable(false)) else {
            Issue.record("not applied"); return
        }
        #expect(s.refuse(clientId: "c", seq: 2, error: .rateLimited("x")) == .answeredAgain(.applied(ops[0])))
        #expect(s.refuse(clientId: "c", seq: 0, error: .rateLimited("x")) == .rejected(.invalidArgument("seq must be 1 or more")))
        #expect(s.rejections.map(\.seq) == [1])
    }
}
