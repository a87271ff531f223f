import TabsyncCore
import TabsyncProto
import TabsyncStore
import Testing
@testable import TabsyncServerCore

/// Several nodes: how a node hears of other nodes' commits and catches up, without sockets or a
/// database (the test answers the store's reads and plays the commit feed).
struct CatchUpRuleTests {
    /// Session 1 joined to "w" on a node of a shared store; the workspace is empty.
    static func joined() -> CoreHarness {
        var h = CoreHarness { $0.sharedStorePollInterval = .seconds(1) }
        h.hello(1, client: "c1")
        h.handle(.loaded(workspaceId: "w", .success(nil)))
        return h
    }

    /// Another node's op on "w" at version `version` (its tab `id`).
    static func othersOp(_ id: String, version: UInt64, after tabs: [String] = []) -> AppliedOp {
        var other = Sequencer(workspace: Workspace(id: "w", epoch: "e1"), limits: .default)
        var seq: UInt64 = 0
        for tab in tabs + [id] {
            seq += 1
            _ = other.submit(clientId: "c9", seq: seq, baseVersion: 0, op: .add(tab: Tab(id: tab), place: .end, activate: false))
        }
        let op = other.log.last!
        precondition(op.version == version)
        return op
    }

    @Test func aNotificationCarryingTheNextBatchIsTakenWithoutARead() {
        var h = Self.joined()
        let op = Self.othersOp("theirs", version: 1)
        let changes = CommitNotification.Changes(base: 0, ops: [op], refusals: [], lastSeqs: ["c9": 1])
        let actions = h.handle(.heard(.committed(CommitNotification(workspaceId: "w", version: 1, changes: changes))))
        #expect(Said.of(actions) == [.applied(to: [1], version: 1, seq: 1)])
        #expect(h.core.metrics.notificationsTaken == 1)
        #expect(h.core.workspaces.hub("w")?.live.lastSeq(of: "c9") == 1)
    }

    @Test func aNotificationThatDoesNotFollowIsReadFromTheStore() {
        var h = Self.joined()
        let actions = h.handle(.heard(.committed(CommitNotification(workspaceId: "w", version: 2))))
        guard case .readChanges(let versions)? = actions.first else {
            Issue.record("no read: \(actions)")
            return
        }
        #expect(versions == ["w": 0])
        // The read brings both ops; they are broadcast in order.
        let read = CatchUpRead.caughtUp(.init(
            from: 0, ops: [Self.othersOp("a", version: 1), Self.othersOp("b", version: 2, after: ["a"])],
            dedup: DedupState(version: 2, lastSeqs: ["c9": 2], rejections: [], rekeys: [])))
        let caught = h.handle(.caughtUp(["w": read], duration: .zero))
        #expect(Said.of(caught) == [.applied(to: [1], version: 1, seq: 1), .applied(to: [1], version: 2, seq: 2)])
    }

    @Test func aWorkspaceWithABatchOfItsOwnInFlightIsNotReadUntilTheBatchIsBack() {
        var h = Self.joined()
        #expect(h.submit(1, seq: 1, CoreHarness.add("mine")).commitId == 1)
        let heard = h.handle(.heard(.committed(CommitNotification(workspaceId: "w", version: 1))))
        #expect(heard.isEmpty)  // its own batch runs into `behind` and catches up there
        let stored = h.handle(.committed(batch: 1, .stored, duration: .zero))
        // Stored at v1 itself: nothing left to read.
        #expect(Said.of(stored) == [.applied(to: [1], version: 1, seq: 1)])
    }

    @Test func aLogCompactedPastThisNodeClosesItsSessionsToResumeAndReadsTheWorkspaceBack() {
        var h = Self.joined()
        h.handle(.heard(.committed(CommitNotification(workspaceId: "w", version: 5))))
        let caught = h.handle(.caughtUp(["w": .compacted], duration: .zero))
        #expect(Said.of(caught) == [.close(1, 1013), .load("w")])
    }

    @Test func thePollFindsCommitsNoNotificationToldOf() {
        var h = Self.joined()
        h.advance(.seconds(1))
        h.handle(.timeout)  // schedules the first poll
        h.advance(.seconds(1))
        let polled = h.handle(.timeout)
        #expect(polled.contains { if case .pollVersions(["w"]) = $0 { true } else { false } })
        let answer = h.handle(.polled(.success(["w": 3]), duration: .zero))
        #expect(answer.contains { if case .readChanges(["w": 0]) = $0 { true } else { false } })
    }
}

/// The holder registry's side in the core: a node that forgets a workspace of a shared store says
/// so (``ServerCore/Action/release(_:)``), so other nodes' commits stop notifying it; a split is
/// counted (docs/design.md, "Several nodes and placement").
struct HolderRuleTests {
    static func releases(_ actions: [ServerCore.Action]) -> [String] {
        actions.compactMap { if case .release(let id) = $0 { id } else { nil } }
    }

    @Test func aWorkspaceUnloadedWhenIdleIsReleasedOnlyWithASharedStore() {
        for shared in [true, false] {
            var h = CoreHarness {
                $0.sharedStorePollInterval = shared ? .seconds(1) : nil
                $0.idleUnload = .seconds(5)
            }
            h.hello(1, client: "c1")
            h.handle(.loaded(workspaceId: "w", .success(nil)))
            let commit = h.submit(1, seq: 1, CoreHarness.add("a"))
            h.handle(.committed(batch: commit.commitId ?? 0, .stored, duration: .zero))
            #expect(Self.releases(h.handle(.disconnected(1))).isEmpty)  // idle, not yet unloaded
            h.advance(.seconds(6))
            #expect(Self.releases(h.handle(.timeout)) == (shared ? ["w"] : []), "shared: \(shared)")
            #expect(h.core.workspacesInMemory == 0)
        }
    }

    @Test func aLoadThatFailsReleasesTheRegistrationMadeForIt() {
        var h = CoreHarness { $0.sharedStorePollInterval = .seconds(1) }
        h.hello(1, client: "c1")
        let failed = h.handle(.loaded(workspaceId: "w", .failure(.readFailed("down"))))
        #expect(Self.releases(failed) == ["w"])
    }

    /// Another node's ops taken here mean the workspace is split: with a holder registry the core
    /// asks whether a newer holder exists (once a minute at most); if so its sessions are closed
    /// 4307 "moved" and the workspace goes as soon as it is idle.
    @Test func aSplitWorkspaceWithANewerHolderIsHandedOverAndUnloaded() throws {
        var h = CoreHarness {
            $0.sharedStorePollInterval = .seconds(1)
            $0.yieldsSplitWorkspaces = true
            $0.holderCheckPause = .zero
        }
        h.hello(1, client: "c1")
        let loaded = h.handle(.loaded(workspaceId: "w", .success(nil)))
        if let welcomeBatch = loaded.commitId { h.handle(.committed(batch: welcomeBatch, .stored, duration: .zero)) }
        let other = CatchUpRuleTests.othersOp("x", version: 1)
        let caught = h.handle(.heard(.committed(CommitNotification(
            workspaceId: "w", version: 1,
            changes: .init(base: 0, ops: [other], refusals: [], lastSeqs: [other.clientId: other.seq])))))
        #expect(caught.contains { if case .checkHolders("w") = $0 { true } else { false } })
        // No newer holder: nothing happens, and the next other-node op within the minute asks nothing.
        #expect(Said.of(h.handle(.holdersChecked(workspaceId: "w", newerHolder: false))).isEmpty)
        let second = CatchUpRuleTests.othersOp("y", version: 2, after: ["x"])
        let again = h.handle(.heard(.committed(CommitNotification(
            workspaceId: "w", version: 2,
            changes: .init(base: 1, ops: [second], refusals: [], lastSeqs: [second.clientId: second.seq])))))
        #expect(!again.contains { if case .checkHolders = $0 { true } else { false } })
        // A newer holder: the session is closed "moved", then the idle workspace is released at once.
        let moved = h.handle(.holdersChecked(workspaceId: "w", newerHolder: true))
        #expect(Said.of(moved) == [.close(1, 4307)])
        #expect(h.core.metrics.moves == 1)
        #expect(Self.releases(h.handle(.disconnected(1))) == ["w"])
        #expect(h.core.workspacesInMemory == 0)
    }

    @Test func withoutAHolderRegistryASplitIsNeverChecked() {
        var h = CatchUpRuleTests.joined()
        let other = CatchUpRuleTests.othersOp("x", version: 1)
        let caught = h.handle(.heard(.committed(CommitNotification(
            workspaceId: "w", version: 1,
            changes: .init(base: 0, ops: [other], refusals: [], lastSeqs: [other.clientId: other.seq])))))
        #expect(!caught.contains { if case .checkHolders = $0 { true } else { false } })
    }

    /// A node with a holder registry registers before it reads, and reads once registered.
    static func registering(_ configure: (inout ServerCore.Settings) -> Void = { _ in }) -> CoreHarness {
        CoreHarness {
            $0.sharedStorePollInterval = .seconds(1)
            $0.holderRegistry = .init(heartbeatInterval: .milliseconds(2_500))
            $0.yieldsSplitWorkspaces = true
            configure(&$0)
        }
    }

    @Test func aNodeWithARegistryRegistersBeforeItReadsAndASplitIsCounted() {
        var h = Self.registering()
        #expect(Said.of(h.hello(1, client: "c1")) == [.hold("w")])
        #expect(Said.of(h.handle(.held(workspaceId: "w", .success(1)))) == [.load("w")])
        #expect(h.core.metrics.workspaceSplits == 1)
        #expect(h.core.metrics.render(.init(connections: 0, socketsOpen: 0, workspacesLoaded: 1, sendQueueBytes: 0))
            .contains("tabsync_workspace_splits_total 1\n"))
        let loaded = h.handle(.loaded(workspaceId: "w", .success(nil)))
        #expect(Said.of(loaded).contains(.welcome(to: 1, snapshotVersion: 0, missed: 0)))
    }

    @Test func aFailedRegistrationFailsItsReadAndIsReleased() {
        var h = Self.registering()
        h.hello(1, client: "c1")
        let failed = h.handle(.held(workspaceId: "w", .failure(.readFailed("down"))))
        #expect(Said.of(failed).filter { $0 != .other } == [.error(to: 1, code: .unavailable), .close(1, 1013)])
        #expect(Self.releases(failed) == ["w"])
        #expect(h.core.workspacesInMemory == 0)
    }

    static func beats(_ actions: [ServerCore.Action]) -> Int {
        actions.filter { if case .heartbeat = $0 { true } else { false } }.count
    }

    /// The heartbeat is a deadline of the core: the first timeout beats, then one per interval, none
    /// once the stop began.
    @Test func theHeartbeatGoesEveryIntervalWhileRunning() {
        var h = Self.registering()
        #expect(Self.beats(h.handle(.timeout)) == 1)
        var beats = 0
        for _ in 0..<49 {
            h.advance(.milliseconds(50))
            beats += Self.beats(h.handle(.timeout))
        }
        #expect(beats == 0)  // 2.45 s
        h.advance(.milliseconds(50))
        #expect(Self.beats(h.handle(.timeout)) == 1)  // 2.5 s
        h.handle(.shutdown)
        h.advance(.seconds(3))
        #expect(Self.beats(h.handle(.timeout)) == 0)
        var unregistered = CoreHarness { $0.sharedStorePollInterval = .seconds(1) }
        #expect(Self.beats(unregistered.handle(.timeout)) == 0)
    }

    /// The check for a newer holder waits a pause drawn from the settings' seed, then goes at the
    /// first timeout past it.
    @Test func aHolderCheckWaitsItsSeededPause() {
        for seed: UInt64 in [1, 2, 3, 99] {
            var h = Self.registering { $0.jitterSeed = seed }
            h.hello(1, client: "c1")
            h.handle(.held(workspaceId: "w", .success(0)))
            let loaded = h.handle(.loaded(workspaceId: "w", .success(nil)))
            if let welcomeBatch = loaded.commitId { h.handle(.committed(batch: welcomeBatch, .stored, duration: .zero)) }
            let other = CatchUpRuleTests.othersOp("x", version: 1)
            let caught = h.handle(.heard(.committed(CommitNotification(
                workspaceId: "w", version: 1,
                changes: .init(base: 0, ops: [other], refusals: [], lastSeqs: [other.clientId: other.seq])))))
            var jitter = ServerCore.Jitter(seed: seed)
            let pause = jitter.pause(upTo: .seconds(1))
            #expect(!caught.contains { if case .checkHolders = $0 { true } else { false } })
            var checkedAt: Duration?
            for _ in 0..<120 where checkedAt == nil {
                h.advance(.milliseconds(10))
                if h.handle(.timeout).contains(where: { if case .checkHolders("w") = $0 { true } else { false } }) {
                    checkedAt = h.elapsed
                }
            }
            #expect(checkedAt.map { $0 >= pause && $0 < pause + .milliseconds(10) } ?? false,
                    "seed \(seed): pause \(pause), checked at \(String(describing: checkedAt))")
        }
    }
}

/// ``CloseReason``: each code, its text within a close frame's room, what flushes.
struct CloseReasonTests {
    static let all: [CloseReason] = [
        .shuttingDown, .undecodableFrame, .wrongFrameType(binary: true, subprotocol: "tabsync.v1.json"),
        .messageTooBig(limit: 1 << 20), .rateLimitAbuse, .slowReader, .storeUnavailable, .commitOutcomeUnknown,
        .behindStore, .storeChanged, .protocolViolation(.protocolError), .unauthorized(.unauthorized), .writeFailed,
        .workspaceNotInPath(path: String(repeating: "p", count: 64), hello: String(repeating: "h", count: 64)), .moved,
    ]

    @Test func everyReasonHasItsCodeAndATextThatFitsACloseFrame() {
        #expect(Self.all.map(\.code) == [1001, 1007, 1007, 1009, 1008, 1013, 1013, 1013, 1013, 1013, 4400, 4401, 1006, 4400, 4307])
        for reason in Self.all { #expect(!reason.text.isEmpty && reason.text.utf8.count <= 120) }
    }

    @Test func aReaderThatCannotKeepUpOrABrokenFrameDropsTheQueueOthersFlushIt() {
        #expect(!CloseReason.slowReader.flushesQueue)
        #expect(!CloseReason.messageTooBig(limit: 1).flushesQueue)
        #expect(CloseReason.protocolViolation(.invalidArgument).flushesQueue)  // the Error goes first
        #expect(CloseReason.workspaceNotInPath(path: "a", hello: "b").flushesQueue)
        #expect(CloseReason.shuttingDown.flushesQueue)  // acks go first
    }

    @Test func aLongTextIsCutOnAScalarBoundary() {
        let cut = CloseReason.cut(String(repeating: "é", count: 100), to: 120)
        #expect(cut.utf8.count == 120)
        #expect(cut == String(repeating: "é", count: 60))
    }
}
