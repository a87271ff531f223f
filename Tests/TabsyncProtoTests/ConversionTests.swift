import Testing
import TabsyncCore
@testable import TabsyncProto

@Suite struct OpConversionTests {
    @Test(arguments: Samples.pairs)
    func coreOpConvertsToExactlyTheWireOp(pair: Samples.Pair) {
        #expect(Tabsync_V1_Op(pair.core) == pair.wire)
    }

    @Test(arguments: Samples.pairs)
    func wireOpConvertsToExactlyTheCoreOp(pair: Samples.Pair) throws {
        #expect(try Operation(pair.wire) == pair.core)
    }

    @Test func samplesCoverEveryOpKind() {
        let kinds = Set(Samples.pairs.map(\.core.kind))
        #expect(kinds == Set(Operation.Kind.allCases))
    }

    @Test func opWithNoKindIsRefusedAsInvalidArgument() {
        #expect(throws: ConversionError.opKindMissing) { try Operation(Tabsync_V1_Op()) }
        #expect(ConversionError.opKindMissing.code == .invalidArgument)
        #expect(ConversionError.opKindMissing.opError.code == .invalidArgument)
    }

    @Test func submitWithoutOpIsRefusedAsOpKindMissing() {
        var submit = Tabsync_V1_Submit()
        submit.seq = 7
        #expect(!submit.hasOp)
        #expect(throws: ConversionError.opKindMissing) { try Operation(submit.op) }
    }

    @Test func activateWithNoTargetIsRefusedAsInvalidArgument() {
        let wire = Samples.op(.activate(Tabsync_V1_Activate()))
        #expect(throws: ConversionError.activateTargetMissing) { try Operation(wire) }
        #expect(ConversionError.activateTargetMissing.code == .invalidArgument)
    }

    @Test func activateWithExplicitEmptyIdKeepsTheEmptyIdForValidation() throws {
        var activate = Tabsync_V1_Activate()
        activate.tabID = ""
        #expect(try Operation(Samples.op(.activate(activate))) == .activate(.tabId("")))
    }

    @Test func addWithoutTabBecomesAnEmptyTab() throws {
        let wire = Samples.op(.add(Tabsync_V1_Add()))
        #expect(try Operation(wire) == .add(tab: Tab(id: ""), place: .end, activate: false))
    }
}

@Suite struct PlaceConversionTests {
    @Test func absentPlaceIsEnd() {
        #expect(Place(Tabsync_V1_Place()) == .end)
        #expect(Place(Tabsync_V1_Move().place) == .end)
    }

    @Test func emptyKeyIsEnd() throws {
        #expect(Place(Samples.wirePlace(key: "")) == .end)
        #expect(try Operation(Samples.move("t1", Samples.wirePlace(key: ""))) == .move(tabId: "t1", place: .end))
    }

    @Test func keyAndIndexConvertBothWays() {
        #expect(Place(Samples.wirePlace(key: "a3")) == .key("a3"))
        #expect(Place(Samples.wirePlace(index: 0)) == .index(0))
        #expect(Place(Samples.wirePlace(index: 12)) == .index(12))
        #expect(Tabsync_V1_Place(.key("a3")) == Samples.wirePlace(key: "a3"))
        #expect(Tabsync_V1_Place(.index(0)) == Samples.wirePlace(index: 0))
    }

    @Test func endIsSentAsAbsentPlace() {
        #expect(Tabsync_V1_Place(.end) == nil)
        guard case .move(let move)? = Tabsync_V1_Op(.move(tabId: "t1", place: .end)).kind else {
            Issue.record("not a move")
            return
        }
        #expect(!move.hasPlace)
    }
}

@Suite struct UpdateConversionTests {
    @Test func eachFieldIsPresentExactlyWhenSet() {
        let fields: [(TabUpdate, (Tabsync_V1_Update) -> Bool)] = [
            (TabUpdate(tabId: "t", title: ""), \.hasTitle),
            (TabUpdate(tabId: "t", url: ""), \.hasURL),
            (TabUpdate(tabId: "t", icon: ""), \.hasIcon),
            (TabUpdate(tabId: "t", badge: ""), \.hasBadge),
            (TabUpdate(tabId: "t", locked: false), \.hasLocked),
        ]
        let all: [(Tabsync_V1_Update) -> Bool] = fields.map(\.1)
        for (index, (update, has)) in fields.enumerated() {
            let wire = Tabsync_V1_Update(update)
            #expect(has(wire))
            for (other, otherHas) in all.enumerated() where other != index {
                #expect(!otherHas(wire))
            }
            #expect(TabUpdate(wire) == update)
        }
    }

    @Test func absentFieldsStayNil() {
        let update = TabUpdate(Tabsync_V1_Update())
        #expect(update == TabUpdate(tabId: ""))
        #expect(update.isEmpty)
    }
}

@Suite struct ValueConversionTests {
    @Test func tabCopiesEveryField() {
        #expect(Tabsync_V1_Tab(Samples.fullTab) == Samples.wireFullTab)
        #expect(Tab(Samples.wireFullTab) == Samples.fullTab)
        #expect(Tab(Tabsync_V1_Tab()) == Tab(id: ""))
    }

    @Test func tabKeyConvertsBothWays() {
        let key = TabKey(tabId: "t1", key: "a0")
        #expect(TabKey(Tabsync_V1_TabKey(key)) == key)
        #expect(Tabsync_V1_TabKey(key).tabID == "t1")
    }

    @Test func workspaceConvertsToSnapshotAndBack() {
        let workspace = Workspace(
            id: "team", version: 42, epoch: "e-7",
            tabs: [Tab(id: "a", key: "a0"), Tab(id: "b", title: "B", locked: true, key: "a1")],
            activeTabId: "b", editable: false)
        let snapshot = Tabsync_V1_Snapshot(workspace)
        #expect(snapshot.workspace == "team")
        #expect(snapshot.version == 42)
        #expect(snapshot.epoch == "e-7")
        #expect(snapshot.tabs == [Samples.wireTab("a", key: "a0"), Samples.wireTab("b", title: "B", locked: true, key: "a1")])
        #expect(snapshot.activeTabID == "b")
        #expect(snapshot.editable == false)
        #expect(Workspace(snapshot) == workspace)
    }

    @Test func emptySnapshotIsAnEmptyWorkspace() {
        var snapshot = Tabsync_V1_Snapshot()
        snapshot.workspace = "new"
        snapshot.editable = true
        #expect(Workspace(snapshot) == Workspace(id: "new"))
    }

    @Test func appliedConvertsBothWays() throws {
        let applied = AppliedOp(
            version: 9, op: .move(tabId: "t1", place: .key("a0V")), clientId: "c1", seq: 3, activeTabId: "t1")
        let wire = Tabsync_V1_Applied(applied)
        #expect(wire.version == 9)
        #expect(wire.op == Samples.move("t1", Samples.wirePlace(key: "a0V")))
        #expect(wire.clientID == "c1")
        #expect(wire.seq == 3)
        #expect(wire.activeTabID == "t1")
        #expect(try AppliedOp(wire) == applied)
    }

    @Test func appliedWithoutOpIsABrokenStream() {
        var wire = Tabsync_V1_Applied()
        wire.version = 1
        #expect(throws: ConversionError.opKindMissing) { try AppliedOp(wire) }
    }

    @Test(arguments: ErrorCode.allCases)
    func errorCodeConvertsBothWays(code: ErrorCode) {
        let wire = Tabsync_V1_ErrorCode(code)
        #expect(wire.rawValue == code.rawValue)
        #expect(ErrorCode(wire) == code)
    }

    @Test func unspecifiedAndUnknownErrorCodesHaveNoCoreCode() {
        #expect(ErrorCode(Tabsync_V1_ErrorCode.unspecified) == nil)
        #expect(ErrorCode(Tabsync_V1_ErrorCode.UNRECOGNIZED(99)) == nil)
    }

    @Test func opErrorBecomesRejected() {
        let rejected = Tabsync_V1_Rejected(seq: 5, error: OpError.tabGone("B"))
        #expect(rejected.seq == 5)
        #expect(rejected.code == .tabGone)
        #expect(rejected.message == OpError.tabGone("B").message)
        let conversion = Tabsync_V1_Rejected(seq: 6, error: ConversionError.activateTargetMissing)
        #expect(conversion.code == .invalidArgument)
        #expect(conversion.seq == 6)
        let limited = Tabsync_V1_Rejected(seq: 7, code: .rateLimited, message: "slow down")
        #expect(limited.code == .rateLimited)
        #expect(limited.message == "slow down")
    }

    @Test func limitsConvertBothWays() {
        let limits = Limits(maxTabs: 50, maxFrameBytes: 4096, maxOpsPerSecond: 10, maxResumeOps: 20)
        let wire = Tabsync_V1_Limits(limits)
        #expect(wire.maxTabs == 50)
        #expect(wire.maxFrameBytes == 4096)
        #expect(wire.maxOpsPerSecond == 10)
        #expect(wire.maxResumeOps == 20)
        let back = Limits(wire)
        #expect(back.maxTabs == 50 && back.maxFrameBytes == 4096 && back.maxOpsPerSecond == 10 && back.maxResumeOps == 20)
        #expect(back.logRetention == Limits.default.logRetention)
        #expect(Limits(Tabsync_V1_Limits()) == Limits.default)
        #expect(Tabsync_V1_Limits(Limits(maxFrameBytes: Int.max)).maxFrameBytes == UInt32.max)
    }

    @Test func welcomeCarriesSnapshotOrMissedOps() throws {
        let workspace = Workspace(id: "w", version: 2, epoch: "e", tabs: [Tab(id: "a", key: "a0")],
                                  activeTabId: "a", editable: true)
        let full = Tabsync_V1_Welcome(sessionId: "s1", clientId: "c1", lastSeq: 4, limits: .default, snapshot: workspace)
        #expect(!full.recovered)
        #expect(full.epoch == "e")
        #expect(full.lastSeq == 4)
        #expect(Workspace(full.snapshot) == workspace)
        #expect(Limits(full.limits) == .default)
        #expect(try full.missedOps().isEmpty)

        let missed = [
            AppliedOp(version: 3, op: .remove(tabId: "a"), clientId: "c2", seq: 1, activeTabId: ""),
            AppliedOp(version: 4, op: .setEditable(false), clientId: "c2", seq: 2, activeTabId: ""),
        ]
        let resumed = Tabsync_V1_Welcome(sessionId: "s2", clientId: "c1", lastSeq: 4, limits: .default,
                                         epoch: "e", missed: missed)
        #expect(resumed.recovered)
        #expect(!resumed.hasSnapshot)
        #expect(resumed.sessionID == "s2")
        #expect(try resumed.missedOps() == missed)
    }
}
