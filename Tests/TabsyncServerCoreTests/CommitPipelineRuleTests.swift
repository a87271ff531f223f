import TabsyncCore
import TabsyncProto
import TabsyncStore
import Testing
@testable import TabsyncServerCore

/// The commit pipeline's rules through the core, without sockets or a store: the test answers the
/// store's calls, so each rule's moment (in flight, failed, behind) is exact.
struct CommitPipelineRuleTests {
    /// Session 1 of client c1 joined to an empty workspace "w" (its load answered, its Welcome out).
    static func joined() -> CoreHarness {
        var h = CoreHarness()
        h.hello(1, client: "c1")
        h.handle(.loaded(workspaceId: "w", .success(nil)))
        return h
    }

    @Test func anAppliedOpGoesOutOnlyOnceItsBatchIsStored() {
        var h = Self.joined()
        let submitted = h.submit(1, seq: 1, CoreHarness.add("a"))
        #expect(Said.of(submitted) == [.commit(1, records: 1)])
        let stored = h.handle(.committed(batch: 1, .stored, duration: .zero))
        #expect(Said.of(stored) == [.applied(to: [1], version: 1, seq: 1)])
    }

    /// The defect issue 21 names: releasing a Welcome ran its session's deferred messages at once,
    /// and a deferred resubmission answered from dedup released every pending effect, ahead of the
    /// rest of the finished batch. Effects must go out in pipeline order.
    @Test func effectsGoOutInPipelineOrderEvenWhenAWelcomeReleasesDeferredMessages() {
        var h = Self.joined()
        #expect(h.submit(1, seq: 1, CoreHarness.add("a")).commitId == 1)
        // Session 2, the same client on a new connection, joins while batch 1 is in flight, and
        // resubmits seq 1 before its Welcome (deferred).
        h.hello(2, client: "c1")
        h.submit(2, seq: 1, CoreHarness.add("a"))
        // Session 1 goes on: seq 2 waits behind the Welcome.
        h.submit(1, seq: 2, CoreHarness.add("b"))
        // Batch 1 stored: v1 out; batch 2 (Welcome of 2, seq 2) goes to the store.
        let first = h.handle(.committed(batch: 1, .stored, duration: .zero))
        #expect(Said.of(first) == [.applied(to: [1], version: 1, seq: 1), .commit(2, records: 1)])
        // Session 3 joins while batch 2 is in flight: its Welcome is made from the live state (v2).
        h.hello(3, client: "c3")
        let second = h.handle(.committed(batch: 2, .stored, duration: .zero))
        #expect(Said.of(second) == [
            .welcome(to: 2, snapshotVersion: 1, missed: 0),
            // Not to session 3: its Welcome holds v2.
            .applied(to: [1, 2], version: 2, seq: 2),
            .welcome(to: 3, snapshotVersion: 2, missed: 0),
            // Session 2's deferred resubmission, answered from dedup after everything queued before it.
            .applied(to: [2], version: 1, seq: 1),
        ])
    }

    @Test func aFailedCommitRefusesItsOpsUnavailableAndReadsTheWorkspaceBack() {
        var h = Self.joined()
        h.submit(1, seq: 1, CoreHarness.add("a"))
        h.hello(2, client: "c2")  // its Welcome waits behind seq 1
        h.submit(1, seq: 2, CoreHarness.add("b"))
        let failed = h.handle(.committed(batch: 1, .failed(.writeFailed("disk full")), duration: .zero))
        #expect(Said.of(failed) == [
            .load("w"),
            .rejected(to: 1, seq: 1, code: .unavailable),
            .error(to: 2, code: .unavailable), .close(2, 1013),
            .rejected(to: 1, seq: 2, code: .unavailable),
        ])
        // While reading back, a Submit is refused UNAVAILABLE at once; nothing goes to the store.
        #expect(Said.of(h.submit(1, seq: 3, CoreHarness.add("c"))) == [.rejected(to: 1, seq: 3, code: .unavailable)])
        // Read back (nothing was stored): seq 1 can be sent again and is applied as version 1.
        h.handle(.loaded(workspaceId: "w", .success(nil)))
        #expect(h.submit(1, seq: 4, CoreHarness.add("a")).commitId == 2)
        #expect(Said.of(h.handle(.committed(batch: 2, .stored, duration: .zero))) == [.applied(to: [1], version: 1, seq: 4)])
    }

    @Test func aCommitWhoseOutcomeIsUnknownClosesItsSubmittersToResume() {
        var h = Self.joined()
        h.submit(1, seq: 1, CoreHarness.add("a"))
        let unknown = h.handle(.committed(batch: 1, .failed(.outcomeUnknown("connection lost at COMMIT")), duration: .zero))
        #expect(Said.of(unknown) == [.load("w"), .close(1, 1013)])
        #expect(h.core.metrics.commitsOutcomeUnknown == 1)
    }

    /// Several nodes: the store refuses a batch whole when another node stored the workspace first.
    /// The other node's op is broadcast, and this node's op is sequenced again after it.
    @Test func aBatchBehindTheStoreIsResequencedAfterTheOtherNodesOps() throws {
        var h = CoreHarness { $0.sharedStorePollInterval = .zero }
        h.hello(1, client: "c1")
        h.handle(.loaded(workspaceId: "w", .success(nil)))
        // Same key as the other node's tab: rule 1 gives ours a fresh key after it on re-sequencing.
        let sent = h.submit(1, seq: 1, .add(tab: Tab(id: "mine"), place: .end, activate: false))
        guard case .commit(_, let batch)? = sent.first(where: { if case .commit = $0 { true } else { false } }) else {
            Issue.record("no commit")
            return
        }
        #expect(batch.baseVersions == ["w": 0])
        // Another node stored "theirs" at version 1.
        var other = Sequencer(workspace: Workspace(id: "w", epoch: "e1"), limits: .default)
        guard case .applied(let theirs) = other.submit(
            clientId: "c9", seq: 1, baseVersion: 0, op: .add(tab: Tab(id: "theirs"), place: .end, activate: false))
        else { Issue.record("the other node's op was refused"); return }
        let read = CatchUpRead.caughtUp(.init(from: 0, ops: theirs, dedup: DedupState(
            version: 1, lastSeqs: ["c9": 1], rejections: [], rekeys: [])))
        let behind = h.handle(.committed(batch: 1, .behind(["w": read]), duration: .zero))
        #expect(Said.of(behind) == [.applied(to: [1], version: 1, seq: 1), .commit(2, records: 1)])
        guard case .commit(_, let again)? = behind.last else { return }
        #expect(again.baseVersions == ["w": 1])
        #expect(h.core.metrics.commitsRetried == 1)
        let stored = h.handle(.committed(batch: 2, .stored, duration: .zero))
        #expect(Said.of(stored) == [.applied(to: [1], version: 2, seq: 1)])
        #expect(h.core.workspaces.hub("w")?.durable.tabs.map(\.id) == ["theirs", "mine"])
    }
}
