import TabsyncCore
import TabsyncProto
import Testing
@testable import TabsyncServerCore

/// Answers are never lost (docs/design.md, "Submit, seqs and dedup" and "Close codes"): every seq a
/// session consumed is answered before its close, a seq sent again is answered with its stored
/// answer, and one whose answer is gone is answered `ANSWER_GONE`. On the virtual clock.
struct AnswerRuleTests {
    /// Submits and stores at once, as a fast store would: what the session is told, in order.
    static func submitStored(_ h: inout CoreHarness, _ id: ConnectionID, seq: UInt64, _ op: TabsyncCore.Operation) -> [Said] {
        var actions = h.submit(id, seq: seq, op)
        while let batch = actions.commitId {
            let stored = h.handle(.committed(batch: batch, .stored, duration: .zero))
            actions = actions.filter { if case .commit = $0 { false } else { true } } + stored
        }
        return Said.of(actions).filter { $0 != .other }
    }

    /// The case issue 39 saw: under a per-sub rate, a client bulk-removing tabs was closed 1008 and
    /// the `Rejected` of the op that tipped it never went out, so the client took the op as
    /// settled by `Welcome.lastSeq` and its tab came back.
    @Test func theRefusalThatTipsRateAbuseGoesOutBeforeThe1008Close() {
        var h = CoreHarness { $0.limits.maxOpsPerSecond = 2; $0.rateLimitStrikes = 3 }
        h.hello(1, client: "c1")
        h.handle(.loaded(workspaceId: "w", .success(nil)))
        var said: [Said] = []
        var seq: UInt64 = 0
        func closed() -> Bool { said.contains { if case .close = $0 { true } else { false } } }
        while !closed() && seq < 40 {
            for _ in 0..<5 where !closed() {
                seq += 1
                said += Self.submitStored(&h, 1, seq: seq, CoreHarness.add("t\(seq)"))
            }
            h.advance(.seconds(1))
        }
        guard case .close(1, 1008)? = said.last else {
            Issue.record("not closed 1008 last: \(said)")
            return
        }
        let answered = said.compactMap { s -> UInt64? in
            switch s {
            case .applied(let to, _, let seq) where to.contains(1): seq
            case .rejected(1, let seq, _): seq
            default: nil
            }
        }
        #expect(answered == Array(1...seq), "every seq consumed is answered, in order, before the close")
        #expect(said.contains(.rejected(to: 1, seq: seq, code: .rateLimited)))
    }

    /// Any close decided while a batch holding the session's seq is being stored waits for it: the
    /// `Error` goes at once, the answer once stored, then the close.
    @Test func aCloseWaitsForTheAnswerItsBatchOwes() {
        var h = CommitPipelineRuleTests.joined()
        let submitted = h.submit(1, seq: 1, CoreHarness.add("a"))
        let violation = h.send(1, .init(hello: .init(workspace: "w", clientId: "c1")))
        #expect(Said.of(violation) == [.error(to: 1, code: .protocolError)], "no close while seq 1 is unanswered")
        #expect(Said.of(h.submit(1, seq: 2, CoreHarness.add("b"))).isEmpty, "a closing session takes nothing more")
        let stored = h.handle(.committed(batch: submitted.commitId!, .stored, duration: .zero))
        #expect(Said.of(stored) == [.applied(to: [1], version: 1, seq: 1), .close(1, 4400)])
        #expect(h.core.heldCloses.isEmpty)
    }

    /// A failed batch answers `UNAVAILABLE` before the held close.
    @Test func aHeldCloseGoesAfterTheRefusalOfAFailedBatch() {
        var h = CommitPipelineRuleTests.joined()
        let submitted = h.submit(1, seq: 1, CoreHarness.add("a"))
        h.send(1, .init(hello: .init(workspace: "w", clientId: "c1")))
        let failed = h.handle(.committed(batch: submitted.commitId!, .failed(.writeFailed("disk full")), duration: .zero))
        let said = Said.of(failed).filter { if case .load = $0 { false } else { $0 != .other } }
        #expect(said == [.rejected(to: 1, seq: 1, code: .unavailable), .close(1, 4400)])
    }

    /// A refused op's answer is kept with its seq: the client that sends the seq again on its next
    /// connection gets the same `Rejected`, `RATE_LIMITED` included.
    @Test func aRefusedSeqSentAgainAfterAReconnectGetsTheSameRejected() {
        var h = CoreHarness { $0.limits.maxOpsPerSecond = 1; $0.rateLimitStrikes = 100 }
        h.hello(1, client: "c1")
        h.handle(.loaded(workspaceId: "w", .success(nil)))
        #expect(Self.submitStored(&h, 1, seq: 1, .remove(tabId: "nope")) == [.rejected(to: 1, seq: 1, code: .tabGone)])
        #expect(Self.submitStored(&h, 1, seq: 2, CoreHarness.add("a")) == [.rejected(to: 1, seq: 2, code: .rateLimited)])
        h.handle(.disconnected(1))
        h.advance(.seconds(5))
        h.hello(2, client: "c1")
        h.handle(.loaded(workspaceId: "w", .success(nil)))
        #expect(h.core.liveWorkspace("w")?.version == 0)
        #expect(Self.submitStored(&h, 2, seq: 1, .remove(tabId: "nope")) == [.rejected(to: 2, seq: 1, code: .tabGone)])
        #expect(Self.submitStored(&h, 2, seq: 2, CoreHarness.add("a")) == [.rejected(to: 2, seq: 2, code: .rateLimited)])
        h.advance(.seconds(2))
        #expect(Self.submitStored(&h, 2, seq: 3, CoreHarness.add("a")).first == .applied(to: [2], version: 1, seq: 3))
    }

    /// A seq whose answer left the log is answered `ANSWER_GONE` (not a refusal), in order, and the
    /// session stays open: it used to be closed 1013, and a client that sends unanswered seqs again
    /// after its Welcome would have been closed on every reconnect.
    @Test func aSeqWhoseAnswerIsGoneIsAnsweredAnswerGone() {
        var h = CoreHarness { $0.limits.logRetention = 4 }
        h.hello(1, client: "c1")
        h.hello(2, client: "c2")
        h.handle(.loaded(workspaceId: "w", .success(nil)))
        #expect(Self.submitStored(&h, 1, seq: 1, CoreHarness.add("a")).first == .applied(to: [1, 2], version: 1, seq: 1))
        for seq in UInt64(1)...6 { _ = Self.submitStored(&h, 2, seq: seq, CoreHarness.add("b\(seq)")) }
        h.handle(.disconnected(1))
        h.hello(3, client: "c1")
        h.handle(.loaded(workspaceId: "w", .success(nil)))
        let again = Self.submitStored(&h, 3, seq: 1, CoreHarness.add("a"))
        #expect(again == [.rejected(to: 3, seq: 1, code: .answerGone)])
        #expect(h.core.sessions[3]?.closing == nil)
        #expect(Self.submitStored(&h, 3, seq: 2, CoreHarness.add("c")).first == .applied(to: [2, 3], version: 8, seq: 2))
    }

    /// `Welcome.limits` names the per-user rate for a session that counts against one.
    @Test func theWelcomeNamesThePerUserRate() {
        var h = AdminRuleTests.harness { $0.quotas = .init(maxOpsPerSecondPerSubject: 7) }
        let joined = AdminRuleTests.join(&h, 1, AdminRuleTests.grant("bob"))
        let limits = joined.compactMap { action -> Tabsync_V1_Limits? in
            if case .send(_, let message) = action, case .welcome(let welcome)? = message.message { return welcome.limits }
            return nil
        }
        #expect(limits.map(\.maxOpsPerSecondPerUser) == [7])
        var open = CommitPipelineRuleTests.joined()
        let welcome = open.hello(5, client: "c5").compactMap { action -> Tabsync_V1_Limits? in
            if case .send(_, let message) = action, case .welcome(let welcome)? = message.message { return welcome.limits }
            return nil
        }
        #expect(welcome.map(\.maxOpsPerSecondPerUser) == [0], "no sub, no per-user limit")
    }
}
