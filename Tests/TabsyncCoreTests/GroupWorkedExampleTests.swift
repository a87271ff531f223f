import Testing
import TabsyncCore
import TabsyncTestSupport

/// docs/design.md, "Tab groups": each worked example through the server's apply path (``Sequencer``),
/// and each result applied by a client from the `Applied` alone (``Workspace/apply(applied:)``), which
/// must reach the same state; then the ops' refusals, each in its precedence.
@Suite struct GroupWorkedExampleTests {
    /// Applies `ops` in order on the server; every client follows from the `Applied`s alone.
    static func play(_ start: String, _ ops: [Operation], editable: Bool = true, limits: Limits = .default)
        -> (server: Workspace, outcomes: [Sequencer.Outcome])
    {
        let initial = GroupNotation.workspace(start, editable: editable)
        var server = Sequencer(workspace: initial, limits: limits)
        var client = initial
        var outcomes: [Sequencer.Outcome] = []
        for (n, op) in ops.enumerated() {
            let outcome = server.submit(clientId: "c", seq: UInt64(n + 1), baseVersion: 0, op: op)
            if case .applied(let applied) = outcome {
                for a in applied {
                    do throws(OpError) { try client.apply(applied: a) } catch { Issue.record("client: \(error) for \(a.op)") }
                }
            }
            outcomes.append(outcome)
        }
        #expect(client == server.workspace, "a client applying the Applieds reaches the server's state")
        #expect(server.workspace.invariantViolations(limits: limits) == [])
        return (server.workspace, outcomes)
    }

    static func expect(_ start: String, _ ops: [Operation], gives expected: String, sourceLocation: SourceLocation = #_sourceLocation) {
        let (w, outcomes) = play(start, ops)
        for outcome in outcomes {
            if case .rejected(let error) = outcome { Issue.record("refused: \(error)", sourceLocation: sourceLocation) }
        }
        #expect(GroupNotation.text(w) == expected, sourceLocation: sourceLocation)
    }

    static func refusal(_ start: String, _ op: Operation, editable: Bool = true, limits: Limits = .default) -> ErrorCode? {
        let before = GroupNotation.workspace(start, editable: editable)
        let (w, outcomes) = play(start, [op], editable: editable, limits: limits)
        guard case .rejected(let error) = outcomes[0] else { return nil }
        #expect(w.tabs == before.tabs && w.groups == before.groups, "a refused op changes nothing")
        return error.code
    }

    /// Rule 7's rekey renames every key and leaves every tab's group as it was: moves into one narrowing
    /// gap between two tabs of G until the server rekeys.
    @Test func aRekeyKeepsEveryTabsGroup() {
        let start = GroupNotation.workspace("a(G) b(G) x y(H) z")
        var server = Sequencer(workspace: start, limits: .default)
        var client = start
        var rekeyed = false
        for seq in 1...2_000 where !rekeyed {
            let w = server.workspace
            let mover = seq % 2 == 0 ? "x" : "z"
            let a = w.index(of: "a")!
            let place = Place.key(PositionKey.between(w.tabs[a].key, w.tabs[a + 1].key))
            guard case .applied(let applied) = server.submit(clientId: "c", seq: UInt64(seq), baseVersion: w.version,
                                                             op: .move(tabId: mover, place: place)) else {
                Issue.record("move \(seq) refused")
                return
            }
            for op in applied {
                if case .rekey = op.op { rekeyed = true }
                do throws(OpError) { try client.apply(applied: op) } catch { Issue.record("client: \(error)") }
            }
        }
        #expect(rekeyed, "the gap never needed a rekey")
        let w = server.workspace
        #expect(client == w)
        #expect(w.invariantViolations(limits: .default) == [])
        #expect(w.tabs.filter { $0.group == "G" }.count == 4, "every tab moved between a(G) and its neighbour joined G: \(GroupNotation.text(w))")
        #expect(w.tab("y")?.group == "H")
    }

    // MARK: - the worked examples

    @Test func aTabMovedBetweenTwoOfAGroupJoinsIt() {
        Self.expect("a b(G) c(G)", [.move(tabId: "a", place: .index(1))], gives: "b(G) a(G) c(G)")
    }

    @Test func aTabMovedAwayFromItsGroupLeavesIt() {
        Self.expect("a(G) b(G) c", [.move(tabId: "b", place: .index(2))], gives: "a(G) c b")
    }

    @Test func aGroupsOnlyTabKeepsItWherever() {
        Self.expect("a(G) b c", [.move(tabId: "a", place: .index(2))], gives: "b c a(G)")
    }

    @Test func anAddAskingForAGroupGetsItNextToTheGroupOnly() {
        let n = Tab(id: "n", group: "G")
        Self.expect("a b(G) c", [.add(tab: n, place: .index(2), activate: false)], gives: "a b(G) n(G) c")
        Self.expect("a b(G) c", [.add(tab: n, place: .index(0), activate: false)], gives: "n a b(G) c")
    }

    @Test func groupIntoANewGroupKeepsTheFirstTabWhereItIs() {
        Self.expect("a b(G) c(G) d", [.group(GroupTabs(tabIds: ["c", "a"], groupId: "H"))], gives: "b(G) c(H) a(H) d")
    }

    @Test func groupIntoAnExistingGroupAppendsAfterItsLastTab() {
        Self.expect("a b(G) c(G) d", [.group(GroupTabs(tabIds: ["a", "d"], groupId: "G"))], gives: "b(G) c(G) a(G) d(G)")
    }

    @Test func ungroupInsideTheSpanMovesAfterTheGroup() {
        Self.expect("a(G) b(G) c(G)", [.ungroup(UngroupTabs(tabIds: ["b"]))], gives: "a(G) c(G) b")
    }

    /// `[a(G) b(G) x]`: client 1 moves x to index 1, client 2 ungroups b, in both arrival orders.
    @Test func aConcurrentMoveAndUngroupInEitherOrder() {
        let move = Operation.move(tabId: "x", place: .index(1))
        let ungroup = Operation.ungroup(UngroupTabs(tabIds: ["b"]))
        Self.expect("a(G) b(G) x", [move, ungroup], gives: "a(G) x(G) b")
        Self.expect("a(G) b(G) x", [ungroup, move], gives: "a(G) x b")
    }

    // MARK: - more of the rule

    @Test func aNewGroupFromATabStrictlyInsideAGroupGoesAfterThatGroup() {
        Self.expect("a(G) b(G) c(G) d", [.group(GroupTabs(tabIds: ["b", "d"], groupId: "H"))], gives: "a(G) c(G) b(H) d(H)")
    }

    @Test func aNewGroupFromATabAtItsGroupsEdgeStaysThere() {
        Self.expect("a(G) b(G) c", [.group(GroupTabs(tabIds: ["b", "c"], groupId: "H"))], gives: "a(G) b(H) c(H)")
    }

    @Test func ungroupAtAnEdgeStaysAndTheLastTabTakesTheGroupAway() {
        let (w, _) = Self.play("a(G) b c", [.ungroup(UngroupTabs(tabIds: ["a"]))])
        #expect(GroupNotation.text(w) == "a b c")
        #expect(w.groups.isEmpty)
    }

    @Test func removingAGroupsLastTabRemovesTheGroup() {
        let (w, _) = Self.play("a(G) b(H) c(H)", [.remove(tabId: "a")])
        #expect(w.groups.map(\.id) == ["H"])
    }

    @Test func aGroupMovedAwayTabByTabLeavesNoEmptyGroup() {
        // a joins H by landing between two of H; G loses its only tab and is gone.
        let (w, _) = Self.play("a(G) b(H) c(H)", [.move(tabId: "a", place: .index(1))])
        #expect(GroupNotation.text(w) == "b(H) a(H) c(H)")
        #expect(w.groups.map(\.id) == ["H"])
    }

    @Test func anAddAskingForAGroupThatIsGoneGetsNone() {
        Self.expect("a b(G)", [.add(tab: Tab(id: "n", group: "X"), place: .end, activate: false)], gives: "a b(G) n")
    }

    @Test func aNewGroupGetsItsFieldsAndGreyByDefault() {
        let (w, outcomes) = Self.play("a b", [.group(GroupTabs(tabIds: ["a"], groupId: "G", title: "Docs"))])
        #expect(w.groups == [TabGroup(id: "G", title: "Docs", color: "grey")])
        guard case .applied(let applied) = outcomes[0], case .group(let canonical) = applied[0].op else {
            Issue.record("\(outcomes)")
            return
        }
        #expect(canonical.title == "Docs" && canonical.color == "grey" && canonical.keys.count == 1)
    }

    @Test func groupUpdatesAnExistingGroupsFields() {
        let (w, _) = Self.play("a(G) b", [.group(GroupTabs(tabIds: ["b"], groupId: "G", color: "red"))])
        #expect(w.groups == [TabGroup(id: "G", title: "G", color: "red")])
        #expect(GroupNotation.text(w) == "a(G) b(G)")
    }

    @Test func updateGroupSetsTitleAndColourEvenWhenNotEditable() {
        let (w, outcomes) = Self.play("a(G)", [.updateGroup(GroupUpdate(groupId: "G", title: "Mail", color: "cyan"))], editable: false)
        #expect(w.groups == [TabGroup(id: "G", title: "Mail", color: "cyan")], "\(outcomes)")
    }

    @Test func listedTabsThatAreGoneAreSkipped() {
        Self.expect("a b c", [.group(GroupTabs(tabIds: ["gone", "c", "a"], groupId: "G"))], gives: "b c(G) a(G)")
    }

    @Test func replaceCarriesGroupsAndDropsUnnamedOnes() {
        let tabs = [Tab(id: "a", group: "G"), Tab(id: "b", group: "G"), Tab(id: "c")]
        let groups = [TabGroup(id: "X"), TabGroup(id: "G", title: "g", color: "red")]
        let (w, _) = Self.play("z", [.replace(tabs: tabs, groups: groups)])
        #expect(GroupNotation.text(w) == "a(G) b(G) c")
        #expect(w.groups == [TabGroup(id: "G", title: "g", color: "red")])
    }

    @Test func restorePutsTheGroupsBack() {
        let old = GroupNotation.workspace("a(G) b(G) c(H)")
        let state = RestoredState(old)
        let (w, _) = Self.play("x", [.restore(version: 1, state: state)])
        #expect(GroupNotation.text(w) == "a(G) b(G) c(H)")
        #expect(w.groups == old.groups)
    }

    // MARK: - refusals, in precedence

    @Test func refusals() {
        let group = { (ids: [String], id: String) in Operation.group(GroupTabs(tabIds: ids, groupId: id)) }
        #expect(Self.refusal("a b", group([], "G")) == .invalidArgument)
        #expect(Self.refusal("a b", group(["a", "a"], "G")) == .invalidArgument)
        #expect(Self.refusal("a b", group(["a"], "bad id")) == .invalidArgument)
        #expect(Self.refusal("a b", .group(GroupTabs(tabIds: ["a"], groupId: "G", color: "magenta"))) == .invalidArgument)
        #expect(Self.refusal("a b", .group(GroupTabs(tabIds: ["a"], groupId: "G", title: "\u{1B}[2J"))) == .invalidArgument)
        #expect(Self.refusal("a b", group(["x", "y"], "G")) == .tabGone)
        #expect(Self.refusal("a b", group(["x"], "G"), editable: false) == .tabGone, "TAB_GONE before NOT_EDITABLE")
        #expect(Self.refusal("a b", group(["a"], "G"), editable: false) == .notEditable)
        var locked = GroupNotation.workspace("a b")
        locked = Self.lock(locked, "b")
        var s = Sequencer(workspace: locked, limits: .default)
        #expect(s.submit(clientId: "c", seq: 1, baseVersion: 0, op: group(["a", "b"], "G")) == .rejected(.locked("b")))
        #expect(s.submit(clientId: "c", seq: 2, baseVersion: 0, op: .ungroup(UngroupTabs(tabIds: ["b"]))) == .rejected(.locked("b")))
        let few = Limits(maxGroups: 2)
        #expect(Self.refusal("a(G) b(H) c", group(["c"], "K"), limits: few) == .limitExceeded)
        #expect(Self.refusal("a(G) b(H) c", group(["a"], "K"), limits: few) == nil, "G is gone as K is made: 2 groups")
        #expect(Self.refusal("a(G)", .ungroup(UngroupTabs(tabIds: []))) == .invalidArgument)
        #expect(Self.refusal("a(G)", .ungroup(UngroupTabs(tabIds: ["x"]))) == .tabGone)
        #expect(Self.refusal("a(G)", .ungroup(UngroupTabs(tabIds: ["a"])), editable: false) == .notEditable)
        #expect(Self.refusal("a(G)", .updateGroup(GroupUpdate(groupId: "G"))) == .invalidArgument)
        #expect(Self.refusal("a(G)", .updateGroup(GroupUpdate(groupId: "G", color: "pink2"))) == .invalidArgument)
        #expect(Self.refusal("a(G)", .updateGroup(GroupUpdate(groupId: "H", title: "x"))) == .tabGone)
        #expect(Self.refusal("a", .add(tab: Tab(id: "n", group: "no good"), place: .end, activate: false)) == .invalidArgument)
        let split = [Tab(id: "a", group: "G"), Tab(id: "b"), Tab(id: "c", group: "G")]
        #expect(Self.refusal("a", .replace(tabs: split, groups: [TabGroup(id: "G")])) == .invalidArgument, "not contiguous")
        #expect(Self.refusal("a", .replace(tabs: [Tab(id: "a", group: "G")], groups: [])) == .invalidArgument, "unlisted")
        let many = (0..<3).map { Tab(id: "t\($0)", group: "g\($0)") }
        #expect(Self.refusal("a", .replace(tabs: many, groups: (0..<3).map { TabGroup(id: "g\($0)") }), limits: few) == .limitExceeded)
    }

    static func lock(_ w: Workspace, _ id: String) -> Workspace {
        var tabs = w.tabs
        tabs[w.index(of: id)!].locked = true
        return Workspace(id: w.id, version: w.version, epoch: w.epoch, tabs: tabs, activeTabId: w.activeTabId,
                         editable: w.editable, groups: w.groups)
    }
}
