import TabsyncCore
import TabsyncProto
import TabsyncStore
import Testing
@testable import TabsyncServerCore

/// A ``CoreHarness`` with a ``MemoryStore`` behind it: the test stores what the core asks to
/// commit and answers its reads from what is stored, so a workspace read back or loaded after a
/// restart is what a store would give.
struct StoredCore {
    var h: CoreHarness
    let store: MemoryStore

    init(_ configure: (inout ServerCore.Settings) -> Void = { _ in }) {
        let store = MemoryStore()
        self.store = store
        h = CoreHarness {
            $0.storeEpoch = store.epoch
            configure(&$0)
        }
    }

    var epoch: String { store.epoch }

    /// The batch among `actions`, if any.
    static func batch(_ actions: [ServerCore.Action]) -> (UInt64, CommitBatch)? {
        for case .commit(let id, let batch) in actions { return (id, batch) }
        return nil
    }

    /// Answers the commit among `actions`: stored (or, `answer` given, stored when `stored` and
    /// answered `answer`), then any commit that answer starts, until none is left; every action.
    @discardableResult
    mutating func commit(
        _ actions: [ServerCore.Action], stored: Bool = true, answer: ServerCore.CommitResult = .stored
    ) throws -> [ServerCore.Action] {
        guard let (id, batch) = Self.batch(actions) else { return [] }
        if stored { try store.commit(batch) }
        let next = h.handle(.committed(batch: id, answer, duration: .zero))
        guard case .stored = answer else { return next }
        return next + (try commit(next))
    }

    /// Answers the read of `workspaceId` from the store.
    @discardableResult
    mutating func load(_ workspaceId: String = "w") throws -> [ServerCore.Action] {
        h.handle(.loaded(workspaceId: workspaceId, .success(try store.load(workspaceId: workspaceId))))
    }

    /// Session `id` of `client` joined to "w" (resuming from `lastVersion` in `epoch` when given);
    /// its Welcome.
    mutating func join(_ id: ConnectionID, client: String, lastVersion: UInt64 = 0, epoch: String = "") throws
        -> Tabsync_V1_Welcome
    {
        var actions = h.hello(id, client: client, lastVersion: lastVersion, epoch: epoch)
        if actions.contains(where: { if case .load = $0 { true } else { false } }) { actions += try load() }
        actions += try commit(actions)
        return try #require(Self.welcome(actions, to: id))
    }

    static func welcome(_ actions: [ServerCore.Action], to id: ConnectionID) -> Tabsync_V1_Welcome? {
        for case .send(id, let message) in actions { if case .welcome(let w)? = message.message { return w } }
        return nil
    }

    /// Submits adds of `tabs` from session `id` (seqs from `firstSeq`), each stored before the next.
    mutating func add(_ id: ConnectionID, _ tabs: [String], firstSeq: UInt64 = 1) throws {
        for (i, tab) in tabs.enumerated() {
            let stored = try commit(h.submit(id, seq: firstSeq + UInt64(i), CoreHarness.add(tab)))
            #expect(Said.of(stored).contains { if case .applied(_, _, firstSeq + UInt64(i)) = $0 { true } else { false } })
        }
    }
}

/// Resume and dedup through the core: what a `Welcome` gives a session that names its last version
/// and epoch, and what a resubmitted seq is answered, on a store's state (a restart or a read back
/// included). The sockets' side is `ServerRestartTests` (a killed server's client resumes).
struct ResumeRuleTests {
    @Test func aResubmittedSeqIsAnsweredAgainAndNeverAppliedTwice() throws {
        var s = StoredCore()
        _ = try s.join(1, client: "a")
        let first = try s.commit(s.h.submit(1, seq: 1, .add(tab: Tab(id: "x"), place: .end, activate: true)))
        #expect(Said.of(first) == [.applied(to: [1], version: 1, seq: 1)])
        // Answered from dedup: nothing goes to the store, nothing to anyone else.
        let again = s.h.submit(1, seq: 1, .add(tab: Tab(id: "x"), place: .end, activate: true))
        #expect(Said.of(again) == [.applied(to: [1], version: 1, seq: 1)])
        let refused = try s.commit(s.h.submit(1, seq: 2, .remove(tabId: "nope")))
        #expect(Said.of(refused).filter { $0 != .other } == [.rejected(to: 1, seq: 2, code: .tabGone)])
        #expect(Said.of(s.h.submit(1, seq: 2, .remove(tabId: "nope"))) == [.rejected(to: 1, seq: 2, code: .tabGone)])
        // A new connection of the same client learns its last seq and resumes by version.
        let welcome = try s.join(2, client: "a", lastVersion: 1, epoch: s.epoch)
        #expect(welcome.lastSeq == 2 && welcome.recovered && welcome.missed.isEmpty)
        #expect(s.h.core.workspaces.hub("w")?.durable.version == 1)
        #expect(try s.store.load(workspaceId: "w")?.workspace.version == 1)
    }

    @Test func aResumeGetsTheMissedOpsWithinMaxResumeOpsElseASnapshot() throws {
        var s = StoredCore { $0.limits.maxResumeOps = 3 }
        _ = try s.join(1, client: "w")
        try s.add(1, ["t1", "t2"])
        let resumed = try s.join(2, client: "r", lastVersion: 1, epoch: s.epoch)
        #expect(resumed.recovered)
        #expect(resumed.missed.map(\.version) == [2])
        try s.add(1, ["t3", "t4", "t5", "t6"], firstSeq: 3)
        // Five missed, more than maxResumeOps: a snapshot.
        let tooFar = try s.join(3, client: "r", lastVersion: 1, epoch: s.epoch)
        #expect(!tooFar.recovered && tooFar.missed.isEmpty)
        #expect(tooFar.snapshot.version == 6)
        let atTheLimit = try s.join(4, client: "r", lastVersion: 3, epoch: s.epoch)
        #expect(atTheLimit.recovered && atTheLimit.missed.map(\.version) == [4, 5, 6])
        // Another history (epoch): a snapshot, however close the version.
        let otherEpoch = try s.join(5, client: "r", lastVersion: 5, epoch: "zzz")
        #expect(!otherEpoch.recovered)
        #expect(otherEpoch.snapshot.tabs.count == 6)
    }

    /// After a restart the workspace is loaded from a store that keeps only the last ops
    /// (`--log-retention`): a resume from before them gets a snapshot, one within them the ops.
    @Test func aResumeFromBeforeTheRetainedLogGetsASnapshot() throws {
        var writer = Sequencer(workspace: Workspace(id: "w", epoch: "e1"), limits: .default)
        for i in 1...40 {
            _ = writer.submit(clientId: "w", seq: UInt64(i), baseVersion: 0, op: CoreHarness.add("t\(i)"))
        }
        let retained = Array(writer.log.suffix(10))
        #expect(retained.first?.version == 31)
        let stored = StoredWorkspace(workspace: writer.workspace, lastSeqs: ["w": 40], log: retained)
        var h = CoreHarness()  // a restarted server: epoch "e1" is the store's
        h.hello(1, client: "r", lastVersion: 2, epoch: "e1")
        let stale = try #require(StoredCore.welcome(h.handle(.loaded(workspaceId: "w", .success(stored))), to: 1))
        #expect(!stale.recovered && stale.missed.isEmpty)
        #expect(stale.snapshot.version == 40)
        #expect(stale.snapshot.tabs.map(\.id) == (1...40).map { "t\($0)" })
        let recent = try #require(StoredCore.welcome(h.hello(2, client: "r2", lastVersion: 35, epoch: "e1"), to: 2))
        #expect(recent.recovered)
        #expect(recent.missed.map(\.version) == [36, 37, 38, 39, 40])
    }

    /// What the store keeps is what the core asks: each batch carries the log retention
    /// (`--log-retention`, resolved in `ServerSettingsTests`; the stores compact to it in theirs).
    @Test func everyBatchCarriesTheLogRetention() throws {
        var h = CoreHarness { $0.limits.logRetention = 10 }
        h.hello(1, client: "c1")
        h.handle(.loaded(workspaceId: "w", .success(nil)))
        let (_, batch) = try #require(StoredCore.batch(h.submit(1, seq: 1, CoreHarness.add("a"))))
        #expect(batch.logRetention == 10)
    }

    /// A restarted server knows each client's seqs from the store: an op applied before the
    /// restart and one refused are answered again as before, a new one goes on at the next version.
    @Test func afterARestartResubmissionsAreAnsweredFromTheStoredDedup() throws {
        var before = StoredCore()
        _ = try before.join(1, client: "w")
        try before.add(1, ["t1", "t2", "t3"])
        let moved = try before.commit(before.h.submit(1, seq: 4, .move(tabId: "t1", place: .index(2))))
        #expect(Said.of(moved) == [.applied(to: [1], version: 4, seq: 4)])
        try before.commit(before.h.submit(1, seq: 5, .remove(tabId: "ghost")))

        // A new core on the same store: the restart.
        var after = CoreHarness { [epoch = before.epoch] in $0.storeEpoch = epoch }
        let loaded = try #require(try before.store.load(workspaceId: "w"))
        after.hello(1, client: "r", lastVersion: 3, epoch: before.epoch)
        let reader = try #require(StoredCore.welcome(after.handle(.loaded(workspaceId: "w", .success(loaded))), to: 1))
        #expect(reader.recovered && reader.epoch == before.epoch)
        #expect(reader.missed.map(\.version) == [4])
        let writer = try #require(StoredCore.welcome(after.hello(2, client: "w"), to: 2))
        #expect(writer.lastSeq == 5)
        #expect(writer.snapshot.version == 4 && writer.snapshot.tabs.map(\.id) == ["t2", "t3", "t1"])
        #expect(Said.of(after.submit(2, seq: 4, .move(tabId: "t1", place: .index(2)))) == [.applied(to: [2], version: 4, seq: 4)])
        #expect(Said.of(after.submit(2, seq: 5, .remove(tabId: "ghost"))) == [.rejected(to: 2, seq: 5, code: .tabGone)])
        let next = after.submit(2, seq: 6, .remove(tabId: "t2"))
        #expect(next.commitId != nil)
        #expect(Said.of(after.handle(.committed(batch: next.commitId ?? 0, .stored, duration: .zero)))
            == [.applied(to: [1, 2], version: 5, seq: 6)])
    }
}

/// What sessions are told when a commit fails and the workspace is read back from the store, which
/// may hold more than they saw: this node's batch whose `COMMIT` lost its answer but took effect,
/// or another node's ops stored meanwhile. The sockets' side is `ServerReadBackTests`.
struct ReadBackRuleTests {
    /// Session 1 ("seeder", seqs 1-3 stored: v3) and session 2 ("watcher") joined to "w".
    static func seeded() throws -> StoredCore {
        var s = StoredCore()
        _ = try s.join(1, client: "seeder")
        try s.add(1, ["t1", "t2", "t3"])
        let welcome = try s.join(2, client: "watcher")
        #expect(welcome.snapshot.version == 3)
        return s
    }

    @Test func aBatchWhoseAnswerWasLostButStoredReachesEveryoneAndTheSubmitterResumesToIt() throws {
        var s = try Self.seeded()
        let lost = try s.commit(
            s.h.submit(1, seq: 4, CoreHarness.add("t4")), stored: true, answer: .failed(.outcomeUnknown("lost")))
        // Neither applied nor refused: closed to resume.
        #expect(Said.of(lost) == [.load("w"), .close(1, 1013)])
        s.h.handle(.disconnected(1))
        let readBack = try s.load()
        #expect(Said.of(readBack) == [.applied(to: [2], version: 4, seq: 4)])
        #expect(s.h.core.metrics.commitsOutcomeUnknown == 1)
        #expect(s.h.core.metrics.opsReadBack == 1)

        let again = try s.join(3, client: "seeder", lastVersion: 3, epoch: s.epoch)
        #expect(again.recovered && again.lastSeq == 4)
        #expect(again.missed.map(\.version) == [4])
        // The workspace goes on at the next version, for everyone.
        let next = try s.commit(s.h.submit(3, seq: 5, .activate(.tabId("t4"))))
        #expect(Said.of(next) == [.applied(to: [2, 3], version: 5, seq: 5)])
    }

    @Test func aBatchWhoseAnswerWasLostAndNotStoredIsSentAgainAfterTheResume() throws {
        var s = try Self.seeded()
        let lost = try s.commit(
            s.h.submit(1, seq: 4, CoreHarness.add("t4")), stored: false, answer: .failed(.outcomeUnknown("lost")))
        #expect(Said.of(lost) == [.load("w"), .close(1, 1013)])
        s.h.handle(.disconnected(1))
        #expect(Said.of(try s.load()).isEmpty)  // nothing reaches anyone
        #expect(s.h.core.metrics.opsReadBack == 0)
        let again = try s.join(3, client: "seeder", lastVersion: 3, epoch: s.epoch)
        #expect(again.recovered && again.missed.isEmpty)
        #expect(again.lastSeq == 3)  // seq 4 was not consumed: sent again
        let resent = try s.commit(s.h.submit(3, seq: 4, CoreHarness.add("t4")))
        #expect(Said.of(resent) == [.applied(to: [2, 3], version: 4, seq: 4)])
    }

    /// A failed commit's read back finds another node's ops stored meanwhile: they go to the
    /// sessions in order, before any later op, versions contiguous (before the fix: none of them).
    @Test func aReadBackAfterAFailedCommitSendsTheOpsStoredMeanwhileInOrder() throws {
        var s = try Self.seeded()
        let failed = try s.commit(
            s.h.submit(1, seq: 4, CoreHarness.add("mine")), stored: false, answer: .failed(.writeFailed("down")))
        #expect(Said.of(failed) == [.load("w"), .rejected(to: 1, seq: 4, code: .unavailable)])
        // Another node stores v4..v6 meanwhile.
        var other = try #require(try s.store.load(workspaceId: "w")).sequencer(limits: .default)
        for i in 1...3 {
            let base = other.workspace.version
            let outcome = other.submit(clientId: "b", seq: UInt64(i), baseVersion: base, op: CoreHarness.add("b\(i)"))
            let record = try #require(CommitRecord(
                workspaceId: "w", clientId: "b", seq: UInt64(i), outcome: outcome, after: other))
            try s.store.commit(CommitBatch(
                records: [record], workspaces: ["w": other.workspace], logRetention: 10_000, baseVersions: ["w": base]))
        }
        let readBack = try s.load()
        #expect(Said.of(readBack) == [
            .applied(to: [1, 2], version: 4, seq: 1), .applied(to: [1, 2], version: 5, seq: 2),
            .applied(to: [1, 2], version: 6, seq: 3),
        ])
        #expect(s.h.core.metrics.opsReadBack == 3)
        // And on from there.
        let mine = try s.commit(s.h.submit(1, seq: 5, CoreHarness.add("mine")))
        #expect(Said.of(mine) == [.applied(to: [1, 2], version: 7, seq: 5)])
    }
}
