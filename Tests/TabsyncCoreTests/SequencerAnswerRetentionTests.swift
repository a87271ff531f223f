import Testing
import TabsyncCore

/// How long the sequencer remembers answers for resubmitted seqs: rejections for at most a log
/// window's worth (`logRetention`), whether or not ops are being applied, so a client that only
/// sends refused ops cannot grow server memory without bound.
@Suite struct SequencerAnswerRetentionTests {
    @Test func rejectionAnswersAreBoundedEvenWhenNothingIsApplied() {
        var s = Sequencer(workspace: Workspace(id: "w"), limits: Limits(logRetention: 10))
        for seq in UInt64(1)...1_000 {
            _ = s.submit(clientId: "c", seq: seq, baseVersion: 0, op: .remove(tabId: "gone"))
        }
        #expect(s.workspace.version == 0)
        // The latest refusals are answered again; the oldest are forgotten (ignored, never reapplied).
        #expect(s.submit(clientId: "c", seq: 1_000, baseVersion: 0, op: .remove(tabId: "gone"))
            == .answeredAgain(.rejected(seq: 1_000, .tabGone("gone"))))
        #expect(s.submit(clientId: "c", seq: 1, baseVersion: 0, op: .remove(tabId: "gone")) == .ignored)
    }

    @Test func rejectionAnswersLastAtLeastALogWindow() {
        var s = Sequencer(workspace: Workspace(id: "w"), limits: Limits(logRetention: 10))
        for seq in UInt64(1)...10 {
            _ = s.submit(clientId: "c", seq: seq, baseVersion: 0, op: .remove(tabId: "gone"))
        }
        for seq in UInt64(1)...10 {
            #expect(s.submit(clientId: "c", seq: seq, baseVersion: 0, op: .remove(tabId: "gone"))
                == .answeredAgain(.rejected(seq: seq, .tabGone("gone"))))
        }
    }
}
