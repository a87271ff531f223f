import Testing
import TabsyncCore

/// Rule 7 through the server's apply path: key length limits, server-made rekeys, and translation of
/// keys computed before a rekey (by `baseVersion`).
@Suite struct SequencerRekeyTests {
    /// A sequencer holding `[C B A]` at version 3 with keys `Zy Zz a0` (each added at index 0), so a
    /// rekey (`a0 a1 a2`) changes how old keys sort against new ones.
    static func prepended() -> Sequencer {
        var s = Sequencer(workspace: Workspace(id: "w"), limits: .default)
        _ = s.submit(clientId: "setup", seq: 1, baseVersion: 0, op: .add(tab: Tab(id: "A"), place: .end, activate: false))
        _ = s.submit(clientId: "setup", seq: 2, baseVersion: 0, op: .add(tab: Tab(id: "B"), place: .index(0), activate: false))
        _ = s.submit(clientId: "setup", seq: 3, baseVersion: 0, op: .add(tab: Tab(id: "C"), place: .index(0), activate: false))
        return s
    }

    static func ids(_ w: Workspace) -> [String] { w.tabs.map(\.id) }

    static func key(_ w: Workspace, _ id: String) -> String { w.tab(id)!.key }

    /// A valid key of exactly `length` bytes just after `lower` (which must be a bare integer).
    static func longKey(after lower: String, length: Int) -> String {
        lower + String(repeating: "0", count: length - lower.utf8.count - 1) + "1"
    }

    @Test func setupHasTheKeysTheTestsRelyOn() {
        let s = Self.prepended()
        #expect(Self.ids(s.workspace) == ["C", "B", "A"])
        #expect(s.workspace.tabs.map(\.key) == ["Zy", "Zz", "a0"])
        #expect(s.workspace.version == 3)
    }

    @Test func aKeyOver64BytesIsStoredAfterAServerRekeyThatComesFirst() throws {
        var s = Self.prepended()
        let long = Self.longKey(after: "Zz", length: 72) // between B (Zz) and A (a0)
        #expect(PositionKey.isValid(long) && long.utf8.count == 72)
        let outcome = s.submit(clientId: "c1", seq: 1, baseVersion: 3, op: .add(tab: Tab(id: "X"), place: .key(long), activate: false))
        guard case .applied(let applied) = outcome else {
            Issue.record("expected applied, got \(outcome)")
            return
        }
        try #require(applied.count == 2)
        let rekey = applied[0]
        #expect(rekey.clientId == "" && rekey.seq == 0 && rekey.version == 4)
        #expect(rekey.op == .rekey(keys: [TabKey(tabId: "C", key: "a0"), TabKey(tabId: "B", key: "a1"), TabKey(tabId: "A", key: "a2")]))
        let add = applied[1]
        #expect(add.clientId == "c1" && add.seq == 1 && add.version == 5)
        guard case .add(let tab, _, _) = add.op else {
            Issue.record("expected an add, got \(add.op)")
            return
        }
        #expect(tab.key.utf8.count <= PositionKey.maxStoredLength)
        // Between B and A, as the client meant.
        #expect(Self.ids(s.workspace) == ["C", "B", "X", "A"])
        #expect(s.workspace.tabs.allSatisfy { $0.key.utf8.count <= 8 })
        #expect(s.missed(after: 3) == applied)
        #expect(s.workspace.invariantViolations(limits: .default).isEmpty)
    }

    @Test func keyLengthBoundariesAre64StoredAnd128Submitted() {
        // 64 bytes: stored as is, no rekey.
        var s = Self.prepended()
        let k64 = Self.longKey(after: "Zz", length: 64)
        guard case .applied(let a) = s.submit(clientId: "c1", seq: 1, baseVersion: 3, op: .move(tabId: "C", place: .key(k64))) else {
            Issue.record("64-byte key refused")
            return
        }
        #expect(a.count == 1 && a[0].op == .move(tabId: "C", place: .key(k64)))
        // 65 bytes: rekey first.
        s = Self.prepended()
        let k65 = Self.longKey(after: "Zz", length: 65)
        guard case .applied(let b) = s.submit(clientId: "c1", seq: 1, baseVersion: 3, op: .move(tabId: "C", place: .key(k65))) else {
            Issue.record("65-byte key refused")
            return
        }
        #expect(b.count == 2 && b[0].op.kind == .rekey)
        #expect(Self.ids(s.workspace) == ["B", "C", "A"])
        // 128 bytes: accepted (and rekeyed); 129: refused, seq consumed, nothing changed.
        s = Self.prepended()
        guard case .applied(let c) = s.submit(clientId: "c1", seq: 1, baseVersion: 3, op: .move(tabId: "C", place: .key(Self.longKey(after: "Zz", length: 128)))) else {
            Issue.record("128-byte key refused")
            return
        }
        #expect(c.count == 2)
        let before = s.workspace
        let outcome = s.submit(clientId: "c1", seq: 2, baseVersion: 5, op: .move(tabId: "A", place: .key(Self.longKey(after: "a1", length: 129))))
        guard case .rejected(let error) = outcome else {
            Issue.record("129-byte key not refused: \(outcome)")
            return
        }
        #expect(error.code == .invalidArgument)
        #expect(s.workspace == before)
        #expect(s.lastSeq(of: "c1") == 2)
    }

    @Test func aKeyComputedBeforeARekeyIsTranslatedByBaseVersion() throws {
        var s = Self.prepended()
        // Client 2 sees [C B A] at version 3 and drops Y between C and B.
        let yKey = PositionKey.between(Self.key(s.workspace, "C"), Self.key(s.workspace, "B"))
        // Client 1's long key makes the server rekey (version 4) and add X (version 5) first.
        _ = s.submit(clientId: "c1", seq: 1, baseVersion: 3, op: .add(tab: Tab(id: "X"), place: .key(Self.longKey(after: "Zz", length: 100)), activate: false))
        #expect(s.workspace.version == 5)
        let outcome = s.submit(clientId: "c2", seq: 1, baseVersion: 3, op: .add(tab: Tab(id: "Y"), place: .key(yKey), activate: false))
        guard case .applied(let applied) = outcome, applied.count == 1 else {
            Issue.record("expected one applied op, got \(outcome)")
            return
        }
        // Still between C and B; untranslated, "ZyV" would sort before every new key.
        #expect(Self.ids(s.workspace) == ["C", "Y", "B", "X", "A"])
    }

    @Test func aKeyEqualToATabsOldKeyBecomesItsNewKeyThenRuleOnePlacesItAfter() {
        var s = Self.prepended()
        _ = s.submit(clientId: "c1", seq: 1, baseVersion: 3, op: .add(tab: Tab(id: "X"), place: .key(Self.longKey(after: "a0", length: 80)), activate: false))
        // Client 2 computed its key as B's old key exactly (Zz): it becomes B's new key, taken, so just after B.
        _ = s.submit(clientId: "c2", seq: 1, baseVersion: 3, op: .move(tabId: "A", place: .key("Zz")))
        #expect(Self.ids(s.workspace) == ["C", "B", "A", "X"])
        #expect(s.workspace.invariantViolations(limits: .default).isEmpty)
    }

    /// The issue's suspects, as rule 7 words them: a key before the first tab stays before it.
    @Test func aKeyBeforeTheFirstTabStaysBeforeThatTabThroughARekey() {
        var s = Self.prepended()
        // Client 2 sees [C B A] at version 3 and drops Y before C: "Zx".
        let yKey = PositionKey.between(nil, Self.key(s.workspace, "C"))
        _ = s.submit(clientId: "c1", seq: 1, baseVersion: 3, op: .add(tab: Tab(id: "X"), place: .key(Self.longKey(after: "a0", length: 80)), activate: false))
        #expect(s.workspace.tabs.map(\.key) == ["a0", "a1", "a2", "a3"])
        _ = s.submit(clientId: "c2", seq: 1, baseVersion: 3, op: .add(tab: Tab(id: "Y"), place: .key(yKey), activate: false))
        #expect(Self.ids(s.workspace) == ["Y", "C", "B", "A", "X"])
    }

    /// A key equal to the old key of a tab removed since the rekey takes that tab's new key (free
    /// now): between the removed tab's neighbours, as rule 7 then rule 1 say.
    @Test func aKeyEqualToTheOldKeyOfATabRemovedSinceTakesThatTabsNewKey() throws {
        var s = Self.prepended()
        _ = s.submit(clientId: "c1", seq: 1, baseVersion: 3, op: .add(tab: Tab(id: "X"), place: .key(Self.longKey(after: "a0", length: 80)), activate: false))
        _ = s.submit(clientId: "c1", seq: 2, baseVersion: 5, op: .remove(tabId: "B"))
        // Client 2 saw [C B A] at version 3 and used B's key "Zz"; B was "a1" after the rekey.
        let outcome = s.submit(clientId: "c2", seq: 1, baseVersion: 3, op: .add(tab: Tab(id: "Y"), place: .key("Zz"), activate: false))
        guard case .applied(let applied) = outcome, case .add(let y, _, _) = applied.last?.op else {
            Issue.record("expected an add, got \(outcome)")
            return
        }
        #expect(y.key == "a1")
        #expect(Self.ids(s.workspace) == ["C", "Y", "A", "X"])
    }

    /// The defect: a rekey that has left the log window was skipped, so a key computed before it was
    /// read against keys made after it. Here "a0V" (between A and B at version 2) would have landed
    /// between D and C (the new `a0` and `a1`); rule 7 puts it between A and B, which the server can
    /// no longer work out, so it refuses the key instead (the client computes it again).
    @Test func aKeyComputedBeforeARekeyThatHasLeftTheLogWindowIsRefusedNotReadAgainstTheNewKeys() throws {
        var s = Sequencer(workspace: Workspace(id: "w"), limits: Limits(logRetention: 4))
        var seq: UInt64 = 0
        func submit(_ op: Operation, base: UInt64) -> Sequencer.Outcome {
            seq += 1
            return s.submit(clientId: "c1", seq: seq, baseVersion: base, op: op)
        }
        _ = submit(.add(tab: Tab(id: "A"), place: .end, activate: false), base: 0)
        _ = submit(.add(tab: Tab(id: "B"), place: .end, activate: false), base: 0)
        // Client 2 sees [A B] (a0 a1) at version 2 and drops Y between them.
        let yKey = PositionKey.between("a0", "a1")
        _ = submit(.add(tab: Tab(id: "C"), place: .index(0), activate: false), base: 0) // Zz
        _ = submit(.add(tab: Tab(id: "D"), place: .index(0), activate: false), base: 0) // Zy
        guard case .applied(let rekeyed) = submit(.add(tab: Tab(id: "X"), place: .key(Self.longKey(after: "a1", length: 80)), activate: false), base: 4),
            case .rekey = rekeyed.first?.op
        else {
            Issue.record("expected a rekey")
            return
        }
        #expect(s.workspace.tabs.map(\.key) == ["a0", "a1", "a2", "a3", "a4"]) // D C A B X
        #expect(s.rekeys.map(\.version) == [5])
        // Inside the window the key is still translated (a copy, to keep the original going).
        var inWindow = s
        _ = inWindow.submit(clientId: "c2", seq: 1, baseVersion: 2, op: .add(tab: Tab(id: "Y"), place: .key(yKey), activate: false))
        #expect(Self.ids(inWindow.workspace) == ["D", "C", "A", "Y", "B", "X"])
        // Ops that push the rekey out of the log window.
        for n in 0..<6 { _ = submit(.activate(.index(UInt32(n % 3))), base: 0) }
        #expect(s.rekeys.isEmpty)
        #expect(s.forgottenRekeysThrough == 5)
        let before = s.workspace
        let outcome = s.submit(clientId: "c2", seq: 1, baseVersion: 2, op: .add(tab: Tab(id: "Y"), place: .key(yKey), activate: false))
        guard case .rejected(let error) = outcome else {
            Issue.record("expected INVALID_ARGUMENT, got \(outcome) with \(Self.ids(s.workspace))")
            return
        }
        #expect(error.code == .invalidArgument)
        #expect(s.workspace == before)
        // Computed after the forgotten rekey: still placed (no translation needed).
        let after = s.submit(clientId: "c2", seq: 2, baseVersion: 5, op: .add(tab: Tab(id: "Y"), place: .key("a2V"), activate: false))
        guard case .applied = after else {
            Issue.record("expected applied, got \(after)")
            return
        }
        #expect(Self.ids(s.workspace) == ["D", "C", "A", "Y", "B", "X"])
        // An open that only activates a tab that is there does not use its place: not refused.
        let open = s.submit(clientId: "c2", seq: 3, baseVersion: 2, op: .open(tab: Tab(id: "A"), place: .key(yKey)))
        #expect(open == .applied([s.log.last!]) && s.workspace.activeTabId == "A")
    }

    /// After a restart the sequencer does not know which rekeys went before its log: it assumes any
    /// might have, unless told.
    @Test func aRestoredSequencerAssumesARekeyMayHaveGoneBeforeItsLog() {
        var s = Sequencer(workspace: Workspace(id: "w"), limits: Limits(logRetention: 4))
        for n in 1...12 { _ = s.submit(clientId: "c", seq: UInt64(n), baseVersion: 0, op: .add(tab: Tab(id: "t\(n)"), place: .end, activate: false)) }
        #expect(s.forgottenRekeysThrough == 0) // no rekey was ever dropped
        let first = s.log.first!.version
        let restored = Sequencer(workspace: s.workspace, limits: s.limits, log: s.log, lastSeqs: s.lastSeqs)
        #expect(restored.forgottenRekeysThrough == first - 1)
        let told = Sequencer(workspace: s.workspace, limits: s.limits, log: s.log, lastSeqs: s.lastSeqs, forgottenRekeysThrough: 0)
        #expect(told.forgottenRekeysThrough == 0)
        #expect(Sequencer(workspace: Workspace(id: "w"), limits: .default).forgottenRekeysThrough == 0)
    }

    @Test func baseVersionZeroOrAfterTheRekeyMeansNoTranslation() {
        for base: UInt64 in [0, 4, 5] {
            var s = Self.prepended()
            _ = s.submit(clientId: "c1", seq: 1, baseVersion: 3, op: .add(tab: Tab(id: "X"), place: .key(Self.longKey(after: "Zz", length: 100)), activate: false))
            // "ZyV" read against the current keys (a0 a1 a1V a2) goes first.
            _ = s.submit(clientId: "c2", seq: 1, baseVersion: base, op: .add(tab: Tab(id: "Y"), place: .key("ZyV"), activate: false))
            #expect(Self.ids(s.workspace) == ["Y", "C", "B", "X", "A"], "baseVersion \(base)")
        }
    }

    @Test func aMoveWithAnIndexPlaceThatWouldStoreALongKeyIsRekeyedAndPlacedByIndex() {
        // Grow keys in one gap until an index place resolves to a key over 64 bytes.
        var s = Sequencer(workspace: Workspace(id: "w"), limits: .default)
        var seq: UInt64 = 0
        func submit(_ op: Operation) -> Sequencer.Outcome {
            seq += 1
            return s.submit(clientId: "c", seq: seq, baseVersion: 0, op: op)
        }
        _ = submit(.add(tab: Tab(id: "L"), place: .end, activate: false))
        _ = submit(.add(tab: Tab(id: "R"), place: .end, activate: false))
        var sawRekey = false
        for n in 0..<400 where !sawRekey {
            // Always index 1: just after L, before everything added so far.
            guard case .applied(let applied) = submit(.add(tab: Tab(id: "t\(n)"), place: .index(1), activate: false)) else {
                Issue.record("add refused")
                return
            }
            sawRekey = applied.first?.op.kind == .rekey
            #expect(s.workspace.tabs.allSatisfy { $0.key.utf8.count <= PositionKey.maxStoredLength })
            #expect(s.workspace.tabs[1].id == "t\(n)")
        }
        #expect(sawRekey)
    }

    /// Issue 3: inserts into one gap grow keys, and the rekey rule 7 makes brings 500 tabs back under 8 bytes.
    @Test func rekeyBringsFiveHundredTabsBackUnderEightBytes() throws {
        var s = Sequencer(workspace: Workspace(id: "w"), limits: .default)
        var seq: UInt64 = 0
        var rekeys: [AppliedOp] = []
        func submit(_ op: Operation) throws -> [AppliedOp] {
            seq += 1
            let outcome = s.submit(clientId: "c", seq: seq, baseVersion: s.workspace.version, op: op)
            guard case .applied(let applied) = outcome else { throw Failure(outcome: outcome) }
            rekeys += applied.filter { $0.op.kind == .rekey }
            return applied
        }
        _ = try submit(.add(tab: Tab(id: "L"), place: .end, activate: false))
        _ = try submit(.add(tab: Tab(id: "R"), place: .end, activate: false))
        // 498 inserts, each just after the previous one and before R: the direction that grows fastest.
        var last = "L"
        for n in 0..<498 {
            let w = s.workspace
            let i = w.index(of: last)!
            let key = PositionKey.between(w.tabs[i].key, w.tabs[i + 1].key)
            _ = try submit(.add(tab: Tab(id: "t\(n)"), place: .key(key), activate: false))
            last = "t\(n)"
            #expect(s.workspace.tabs.allSatisfy { $0.key.utf8.count <= PositionKey.maxStoredLength })
        }
        #expect(s.workspace.tabs.count == 500)
        #expect(s.workspace.tabs.map(\.id) == ["L"] + (0..<498).map { "t\($0)" } + ["R"])
        #expect(rekeys.count == 1)
        // Now force a rekey of all 500: a move with a key over 64 bytes.
        let order = s.workspace.tabs.map(\.id)
        let longest = s.workspace.tabs.map(\.key.utf8.count).max()!
        #expect(longest > 8, "keys should have grown before the final rekey")
        let w = s.workspace
        let j = w.index(of: "t100")!
        let longKey = w.tabs[j].key + String(repeating: "0", count: 80) + "1"
        #expect(PositionKey.less(longKey, w.tabs[j + 1].key))
        let applied = try submit(.move(tabId: "t300", place: .key(longKey)))
        guard case .rekey(let keys) = applied.first?.op else {
            Issue.record("no rekey before the long key")
            return
        }
        #expect(keys.count == 500)
        #expect(keys.map(\.tabId) == order)
        #expect(keys.allSatisfy { $0.key.utf8.count < 8 })
        #expect(s.workspace.tabs.allSatisfy { $0.key.utf8.count < 8 })
        #expect(s.workspace.index(of: "t300") == s.workspace.index(of: "t100")! + 1)
        #expect(s.workspace.invariantViolations(limits: .default).isEmpty)
    }

    /// The same without the sequencer: keys far over 64 bytes in a plain workspace, then `makeRekey`.
    @Test func makeRekeyGivesFiveHundredLongKeyedTabsShortKeysInTheSameOrder() throws {
        var w = Workspace(id: "w")
        try w.apply(.add(tab: Tab(id: "L"), place: .end, activate: false), limits: .default)
        try w.apply(.add(tab: Tab(id: "R"), place: .end, activate: false), limits: .default)
        for n in 0..<498 {
            let key = PositionKey.between(w.tabs[n].key, w.tabs[n + 1].key)
            try w.apply(.add(tab: Tab(id: "t\(n)"), place: .key(key), activate: false), limits: .default)
        }
        #expect(w.tabs.map(\.key.utf8.count).max()! > 64)
        let order = w.tabs.map(\.id)
        try w.apply(w.makeRekey(), limits: .default)
        #expect(w.tabs.map(\.id) == order)
        #expect(w.tabs.allSatisfy { $0.key.utf8.count < 8 })
        #expect(w.invariantViolations(limits: .default).isEmpty)
    }

    struct Failure: Error, CustomStringConvertible {
        var outcome: Sequencer.Outcome
        var description: String { "not applied: \(outcome)" }
    }
}
