import TabsyncCore
import TabsyncProto
import Testing
@testable import TabsyncServerCore

/// The per-connection rules (``SessionMachine``) and the stop, without sockets.
struct SessionRuleTests {
    @Test func aMessageBeforeHelloIsAProtocolViolationClosed4400() {
        var h = CoreHarness()
        h.handle(.connected(1, format: .proto, echo: false))
        let actions = h.submit(1, seq: 1, CoreHarness.add("a"))
        #expect(Said.of(actions) == [.error(to: 1, code: .protocolError), .close(1, 4400)])
    }

    @Test func aSecondHelloIsAProtocolViolation() {
        var h = CoreHarness()
        h.hello(1, client: "c1")
        let actions = h.send(1, .init(hello: .init(workspace: "w", clientId: "c1")))
        #expect(Said.of(actions) == [.error(to: 1, code: .protocolError), .close(1, 4400)])
    }

    @Test func anInvalidHelloIsRefusedInvalidArgument() {
        var h = CoreHarness()
        let actions = h.hello(1, client: "bad client id")
        #expect(Said.of(actions) == [.error(to: 1, code: .invalidArgument), .close(1, 4400)])
    }

    @Test func messagesBeforeTheWelcomeWaitAndAreHandledAfterItInOrder() {
        var h = CoreHarness()
        h.hello(1, client: "c1")
        h.submit(1, seq: 1, CoreHarness.add("a"))
        h.submit(1, seq: 2, CoreHarness.add("b"))
        let loaded = h.handle(.loaded(workspaceId: "w", .success(nil)))
        // The first starts a batch at once; the second waits for it.
        #expect(Said.of(loaded) == [.welcome(to: 1, snapshotVersion: 0, missed: 0), .commit(1, records: 1)])
    }

    @Test func tooManyMessagesBeforeTheWelcomeIsAProtocolViolation() {
        var h = CoreHarness()
        h.hello(1, client: "c1")
        for seq in 1...UInt64(SessionMachine.maxDeferredMessages) { h.submit(1, seq: seq, CoreHarness.add("t\(seq)")) }
        let actions = h.submit(1, seq: 5_000, CoreHarness.add("x"))
        #expect(Said.of(actions) == [.error(to: 1, code: .protocolError), .close(1, 4400)])
    }

    @Test func noHelloWithinTheTimeoutIsRefused() {
        var h = CoreHarness()
        h.handle(.connected(1, format: .proto, echo: false))
        #expect(h.core.nextDeadline == h.now + h.core.settings.helloTimeout)
        h.advance(h.core.settings.helloTimeout - .milliseconds(1))
        #expect(Said.of(h.handle(.timeout)).isEmpty)  // early: nothing is due yet
        h.advance(.milliseconds(1))
        #expect(Said.of(h.handle(.timeout)) == [.error(to: 1, code: .protocolError), .close(1, 4400)])
        #expect(h.core.nextDeadline == nil)
    }

    @Test func aHelloInTimeClearsItsDeadline() {
        var h = CoreHarness()
        h.hello(1, client: "c1")
        h.handle(.loaded(workspaceId: "w", .success(nil)))
        #expect(h.core.nextDeadline == h.now)  // its first presence list is due
        h.handle(.timeout)
        #expect(h.core.nextDeadline == nil)  // an idle core sleeps: nothing of its own is due
        h.advance(h.core.settings.helloTimeout)
        #expect(Said.of(h.handle(.timeout)).isEmpty)
    }

    @Test func aFrameOfTheOtherEncodingIsClosed1007() {
        var h = CoreHarness()
        h.handle(.connected(1, format: .proto, echo: false))
        #expect(Said.of(h.handle(.frame(1, Array("{}".utf8), binary: false))) == [.close(1, 1007)])
    }

    @Test func sustainedRateLimitedOpsClose1008() {
        var h = CoreHarness { $0.limits.maxOpsPerSecond = 2; $0.rateLimitStrikes = 3 }
        h.hello(1, client: "c1")
        h.handle(.loaded(workspaceId: "w", .success(nil)))
        var closes: [UInt16] = []
        var seq: UInt64 = 0
        for _ in 0..<4 {
            for _ in 0..<5 {
                seq += 1
                var actions = h.submit(1, seq: seq, CoreHarness.add("t\(seq)"))
                if let batch = actions.commitId { actions += h.handle(.committed(batch: batch, .stored, duration: .zero)) }
                for case .close(_, let reason, _) in actions { closes.append(reason.code) }
            }
            h.advance(.seconds(1))
        }
        #expect(closes == [1008])
    }

    @Test func aSlowReaderIsClosed1013AndLeavesItsWorkspaceAtOnce() {
        var h = CoreHarness()
        h.hello(1, client: "c1")
        h.hello(2, client: "c2")
        h.handle(.loaded(workspaceId: "w", .success(nil)))
        #expect(h.core.workspaces.hub("w")?.members.sorted() == [1, 2])
        #expect(Said.of(h.handle(.backlogExceeded(2))) == [.close(2, 1013)])
        #expect(h.core.workspaces.hub("w")?.members == [1])
        #expect(h.core.metrics.slowConsumerCloses == 1)
    }

    /// The root of issue 21's restart defect: while stopping, the server refused a Submit
    /// `UNAVAILABLE` without consuming its seq, and the client, taking the refusal as final,
    /// dropped an op the user made (the writer then never reached its 200 tabs). A stopping server
    /// now leaves such a Submit unanswered: the client sends it again to the next server.
    @Test func aSubmitWhileStoppingIsNeitherAppliedNorRefused() {
        var h = CommitPipelineRuleTests.joined()
        h.submit(1, seq: 1, CoreHarness.add("a"))  // batch 1 in flight: the stop waits for it
        #expect(h.handle(.shutdown).isEmpty)
        #expect(Said.of(h.submit(1, seq: 2, CoreHarness.add("b"))).isEmpty)
        let stored = h.handle(.committed(batch: 1, .stored, duration: .zero))
        #expect(Said.of(stored) == [.applied(to: [1], version: 1, seq: 1), .close(1, 1001)])
        #expect(h.core.workspaces.hub("w")?.live.lastSeq(of: "c1") == 1)
        #expect(Said.of(h.handle(.disconnected(1))) == [.other])  // .stop
    }

    @Test func theStopClosesEverySessionAtItsDeadlineEvenWithACommitStuck() {
        var h = CommitPipelineRuleTests.joined()
        h.submit(1, seq: 1, CoreHarness.add("a"))
        h.handle(.shutdown)
        h.advance(h.core.settings.shutdownTimeout * 0.75)
        #expect(Said.of(h.handle(.timeout)) == [.close(1, 1001)])
        h.advance(h.core.settings.shutdownTimeout * 0.2)
        let last = h.handle(.timeout)
        #expect(last.contains { if case .stop = $0 { true } else { false } })
    }
}
