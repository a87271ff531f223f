import Testing
import TabsyncCore
@testable import TabsyncStore

/// The part of the store contract a restarted ``Sequencer`` relies on beyond the log and the dedup
/// table: refusals are answered again, and keys computed before a rekey are still translated. Run on
/// the memory, the SQLite and the PostgreSQL store.
@Suite("Store contract: restart")
struct StoreRestartContractTests {
    @Test(arguments: StoreKind.allCases)
    func everyRecentRefusalIsAnsweredAgainAfterARestart(kind: StoreKind) throws {
        let harness = try StoreHarness(kind)
        var driver = Driver(epoch: harness.store.epoch)
        driver.submit("w", "c1", 1, .remove(tabId: "ghost"))  // TAB_GONE
        driver.submit("w", "c1", 2, .add(tab: Tab(id: "a"), place: .end, activate: true))
        driver.submit("w", "c1", 3, .add(tab: Tab(id: "a"), place: .end, activate: true))  // TAB_EXISTS
        driver.submit("w", "c1", 4, .add(tab: Tab(id: "b"), place: .end, activate: false))  // c1's last is applied
        driver.submit("w", "c2", 9, .update(TabUpdate(tabId: "nope", title: "x")))  // TAB_GONE
        try harness.store.commit(driver.takeBatch())
        try harness.restart()

        let stored = try #require(try harness.store.load(workspaceId: "w"))
        #expect(stored.rejections == driver.sequencer("w").rejections)
        #expect(stored.rejections.map(\.seq) == [1, 3, 9])
        var restored = try Driver(store: harness.store, workspaces: ["w"])
        // Refusals that are not a client's last consumed seq are answered again too.
        #expect(restored.submit("w", "c1", 1, .remove(tabId: "ghost")) == .answeredAgain(.rejected(seq: 1, .tabGone("ghost"))))
        #expect(restored.submit("w", "c1", 3, .add(tab: Tab(id: "a"), place: .end, activate: true))
            == .answeredAgain(.rejected(seq: 3, .tabExists("a"))))
        #expect(restored.submit("w", "c2", 9, .update(TabUpdate(tabId: "nope", title: "x")))
            == .answeredAgain(.rejected(seq: 9, .tabGone("nope"))))
        guard case .answeredAgain(.applied(let applied)) = restored.submit("w", "c1", 4, .remove(tabId: "a")) else {
            Issue.record("applied seq 4 was not answered again")
            return
        }
        #expect(applied.version == 2)
        #expect(restored.sequencer("w").workspace.version == 2)
    }

    @Test(arguments: StoreKind.allCases)
    func storedRefusalsAreBoundedByTheRetention(kind: StoreKind) throws {
        let harness = try StoreHarness(kind)
        var driver = Driver(epoch: harness.store.epoch, limits: Limits(logRetention: 10))
        for round in 0..<6 {
            for seq in UInt64(round * 10 + 1)...UInt64(round * 10 + 10) {
                driver.submit("w", "c", seq, .remove(tabId: "gone"))
            }
            try harness.store.commit(driver.takeBatch())
        }
        try harness.restart()
        let stored = try #require(try harness.store.load(workspaceId: "w"))
        // At least the retention (the memory store trims in chunks of a quarter of it).
        #expect((10...13).contains(stored.rejections.count))
        #expect(stored.rejections.last?.seq == 60)
        #expect(stored.lastSeqs == ["c": 60])
        var restored = try Driver(store: harness.store, workspaces: ["w"], limits: Limits(logRetention: 10))
        #expect(restored.submit("w", "c", 55, .remove(tabId: "gone")) == .answeredAgain(.rejected(seq: 55, .tabGone("gone"))))
        #expect(restored.submit("w", "c", 2, .remove(tabId: "gone")) == .ignored)
    }

    /// `[C B A]` with keys `Zy Zz a0`, then a move with a key over 64 bytes: the server rekeys first.
    static func rekeyed(_ driver: inout Driver) throws {
        driver.submit("w", "setup", 1, .add(tab: Tab(id: "A"), place: .end, activate: true))
        driver.submit("w", "setup", 2, .add(tab: Tab(id: "B"), place: .index(0), activate: false))
        driver.submit("w", "setup", 3, .add(tab: Tab(id: "C"), place: .index(0), activate: false))
        try #require(driver.sequencer("w").workspace.tabs.map(\.key) == ["Zy", "Zz", "a0"])
        let long = "Zz" + String(repeating: "0", count: 69) + "1"  // 72 bytes, between B and A
        let outcome = driver.submit("w", "c1", 1, .move(tabId: "C", place: .key(long)), baseVersion: 3)
        guard case .applied(let ops) = outcome, ops.count == 2, case .rekey = ops[0].op else {
            Issue.record("expected a rekey then the move, got \(outcome)")
            return
        }
        try #require(driver.sequencer("w").rekeys.map(\.version) == [4])
    }

    @Test(arguments: StoreKind.allCases)
    func aKeyComputedBeforeARekeyIsStillTranslatedAfterARestart(kind: StoreKind) throws {
        let harness = try StoreHarness(kind)
        var driver = Driver(epoch: harness.store.epoch)
        try Self.rekeyed(&driver)
        try harness.store.commit(driver.takeBatch())
        try harness.restart()

        let stored = try #require(try harness.store.load(workspaceId: "w"))
        #expect(stored.rekeys == driver.sequencer("w").rekeys)
        #expect(stored.rekeys.first?.oldKeys == ["Zy", "Zz", "a0"])
        var restored = try Driver(store: harness.store, workspaces: ["w"])
        // c2 saw version 3 and drops X between B (Zz) and A (a0), by the old keys.
        let add = TabsyncCore.Operation.add(tab: Tab(id: "X"), place: .key("Zz5"), activate: false)
        let expected = driver.submit("w", "c2", 1, add, baseVersion: 3)
        let got = restored.submit("w", "c2", 1, add, baseVersion: 3)
        #expect(got == expected)
        let ids = restored.sequencer("w").workspace.tabs.map(\.id)
        #expect(ids == driver.sequencer("w").workspace.tabs.map(\.id))
        #expect(ids.firstIndex(of: "X")! > ids.firstIndex(of: "B")!)
        #expect(ids.last == "A")
        // Without the stored rekey the old key sorts before every new one: X would be first.
        var forgetful = Sequencer(
            workspace: stored.workspace, limits: Limits(), log: stored.log, lastSeqs: stored.lastSeqs)
        _ = forgetful.submit(clientId: "c2", seq: 1, baseVersion: 3, op: add)
        #expect(forgetful.workspace.tabs.first?.id == "X")
    }

    @Test(arguments: StoreKind.allCases)
    func rekeysLeaveWithTheLogWindow(kind: StoreKind) throws {
        let harness = try StoreHarness(kind, options: .init(snapshotInterval: 4))
        var driver = Driver(epoch: harness.store.epoch, limits: Limits(logRetention: 8))
        try Self.rekeyed(&driver)
        try harness.store.commit(driver.takeBatch())
        try harness.restart()
        #expect(try harness.store.load(workspaceId: "w")?.rekeys.map(\.version) == [4])

        for seq in UInt64(1)...30 {
            driver.submit("w", "mover", seq, .activate(.index(UInt32(seq % 3))))
            try harness.store.commit(driver.takeBatch())
        }
        try harness.restart()
        let stored = try #require(try harness.store.load(workspaceId: "w"))
        #expect(stored.workspace == driver.sequencer("w").workspace)
        #expect(stored.rekeys.isEmpty)
        #expect(try #require(stored.log.first?.version) > 4)
    }
}
