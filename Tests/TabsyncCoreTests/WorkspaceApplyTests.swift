import Testing
@testable import TabsyncCore

/// A workspace with tabs `ids` appended in order (keys a0, a1, …) and the first one active.
func makeWorkspace(_ ids: [String], limits: Limits = .default) throws -> Workspace {
    var ws = Workspace(id: "w")
    for id in ids { try ws.apply(.add(tab: Tab(id: id, title: id.uppercased()), place: .end, activate: false), limits: limits) }
    return ws
}

func order(_ ws: Workspace) -> [String] { ws.tabs.map(\.id) }

func expectRefused(_ code: ErrorCode, _ ws: Workspace, _ op: Operation, limits: Limits = .default, sourceLocation: SourceLocation = #_sourceLocation) {
    var copy = ws
    do {
        try copy.apply(op, limits: limits)
        Issue.record("expected \(code.wireName), but \(op) was applied", sourceLocation: sourceLocation)
    } catch {
        #expect(error.code == code, "\(error)", sourceLocation: sourceLocation)
    }
    #expect(copy == ws, "a refused op changed the workspace", sourceLocation: sourceLocation)
}

@Suite struct WorkspaceApplyTests {
    @Test func firstAddGetsKeyA0AndBecomesActive() throws {
        var ws = Workspace(id: "w")
        let op = try ws.apply(.add(tab: Tab(id: "t1", title: "Docs"), place: .end, activate: false), limits: .default)
        #expect(op == .add(tab: Tab(id: "t1", title: "Docs", key: "a0"), place: .end, activate: false))
        #expect(ws.activeTabId == "t1")
        #expect(ws.version == 1)
    }

    @Test func appendsGetIncreasingShortKeys() throws {
        let ws = try makeWorkspace(["a", "b", "c"])
        #expect(ws.tabs.map(\.key) == ["a0", "a1", "a2"])
        #expect(ws.activeTabId == "a")
    }

    @Test func addAtIndexInsertsThereAndClampsPastTheEnd() throws {
        var ws = try makeWorkspace(["a", "b", "c"])
        try ws.apply(.add(tab: Tab(id: "x"), place: .index(1), activate: true), limits: .default)
        #expect(order(ws) == ["a", "x", "b", "c"])
        #expect(ws.activeTabId == "x")
        try ws.apply(.add(tab: Tab(id: "y"), place: .index(99), activate: false), limits: .default)
        #expect(order(ws) == ["a", "x", "b", "c", "y"])
        try ws.apply(.add(tab: Tab(id: "z"), place: .index(0), activate: false), limits: .default)
        #expect(order(ws).first == "z")
        #expect(ws.invariantViolations(limits: .default).isEmpty)
    }

    @Test func addWithEmptyKeyGoesToTheEnd() throws {
        var ws = try makeWorkspace(["a", "b"])
        try ws.apply(.add(tab: Tab(id: "x"), place: .key(""), activate: false), limits: .default)
        #expect(order(ws) == ["a", "b", "x"])
    }

    @Test func addIgnoresTheTabsOwnKey() throws {
        var ws = try makeWorkspace(["a", "b"])
        try ws.apply(.add(tab: Tab(id: "x", key: "Zz"), place: .end, activate: false), limits: .default)
        #expect(order(ws) == ["a", "b", "x"])
    }

    @Test func addRefusals() throws {
        let ws = try makeWorkspace(["a", "b"])
        expectRefused(.tabExists, ws, .add(tab: Tab(id: "a"), place: .end, activate: false))
        expectRefused(.invalidArgument, ws, .add(tab: Tab(id: "bad id"), place: .end, activate: false))
        expectRefused(.invalidArgument, ws, .add(tab: Tab(id: ""), place: .end, activate: false))
        expectRefused(.invalidArgument, ws, .add(tab: Tab(id: String(repeating: "x", count: 65)), place: .end, activate: false))
        expectRefused(.invalidArgument, ws, .add(tab: Tab(id: "x", title: "evil\u{1B}[2J"), place: .end, activate: false))
        expectRefused(.invalidArgument, ws, .add(tab: Tab(id: "x", title: "c1\u{9B}"), place: .end, activate: false))
        expectRefused(.invalidArgument, ws, .add(tab: Tab(id: "x", title: String(repeating: "é", count: 257)), place: .end, activate: false))
        expectRefused(.invalidArgument, ws, .add(tab: Tab(id: "x", url: String(repeating: "u", count: 4097)), place: .end, activate: false))
        expectRefused(.invalidArgument, ws, .add(tab: Tab(id: "x", icon: String(repeating: "i", count: 33)), place: .end, activate: false))
        expectRefused(.invalidArgument, ws, .add(tab: Tab(id: "x", badge: String(repeating: "9", count: 17)), place: .end, activate: false))
        expectRefused(.invalidArgument, ws, .add(tab: Tab(id: "x"), place: .key("not a key"), activate: false))
        expectRefused(.invalidArgument, ws, .add(tab: Tab(id: "x"), place: .key("a0" + String(repeating: "V", count: 127)), activate: false))
        expectRefused(.limitExceeded, ws, .add(tab: Tab(id: "x"), place: .end, activate: false), limits: Limits(maxTabs: 2))
        var locked = ws
        try locked.apply(.setEditable(false), limits: .default)
        expectRefused(.notEditable, locked, .add(tab: Tab(id: "x"), place: .end, activate: false))
    }

    @Test func titlesCountUnicodeScalarsAndURLsCountBytes() throws {
        var ws = Workspace(id: "w")
        try ws.apply(.add(tab: Tab(id: "x", title: String(repeating: "漢", count: 256), url: String(repeating: "é", count: 2048)), place: .end, activate: false), limits: .default)
        expectRefused(.invalidArgument, ws, .add(tab: Tab(id: "y", url: String(repeating: "é", count: 2049)), place: .end, activate: false))
    }

    @Test func refusalPrecedenceFollowsDesignOrder() throws {
        var ws = try makeWorkspace(["a", "b"])
        try ws.apply(.update(TabUpdate(tabId: "a", locked: true)), limits: .default)
        try ws.apply(.setEditable(false), limits: .default)
        // Invalid beats everything; gone beats not editable; not editable beats locked; locked is last.
        expectRefused(.invalidArgument, ws, .move(tabId: "a", place: .key("!")))
        expectRefused(.tabGone, ws, .remove(tabId: "zz"))
        expectRefused(.notEditable, ws, .remove(tabId: "a"))
        ws.editable = true
        expectRefused(.locked, ws, .remove(tabId: "a"))
        expectRefused(.locked, ws, .move(tabId: "a", place: .end))
        // Not editable beats TAB_EXISTS and LIMIT_EXCEEDED for add.
        ws.editable = false
        expectRefused(.notEditable, ws, .add(tab: Tab(id: "a"), place: .end, activate: false), limits: Limits(maxTabs: 1))
        ws.editable = true
        expectRefused(.tabExists, ws, .add(tab: Tab(id: "a"), place: .end, activate: false), limits: Limits(maxTabs: 1))
    }

    @Test func openActivatesByIdThenByFirstURLElseAdds() throws {
        var ws = Workspace(id: "w")
        try ws.apply(.add(tab: Tab(id: "a", url: "https://x"), place: .end, activate: false), limits: .default)
        try ws.apply(.add(tab: Tab(id: "b", url: "https://y"), place: .end, activate: false), limits: .default)
        try ws.apply(.add(tab: Tab(id: "c", url: "https://y"), place: .end, activate: false), limits: .default)
        #expect(try ws.apply(.open(tab: Tab(id: "b"), place: .end), limits: .default) == .activate(.tabId("b")))
        #expect(try ws.apply(.open(tab: Tab(id: "new", url: "https://y"), place: .end), limits: .default) == .activate(.tabId("b")))
        #expect(ws.activeTabId == "b")
        let added = try ws.apply(.open(tab: Tab(id: "d", url: "https://z"), place: .index(0)), limits: .default)
        guard case .add(let tab, .end, true) = added else { Issue.record("open should add: \(added)"); return }
        #expect(tab.id == "d")
        #expect(order(ws) == ["d", "a", "b", "c"])
        #expect(ws.activeTabId == "d")
        #expect(ws.tabs.count == 4)
    }

    @Test func openActivatesInANonEditableWorkspaceButDoesNotAdd() throws {
        var ws = try makeWorkspace(["a", "b"])
        try ws.apply(.setEditable(false), limits: .default)
        #expect(try ws.apply(.open(tab: Tab(id: "b"), place: .end), limits: .default) == .activate(.tabId("b")))
        expectRefused(.notEditable, ws, .open(tab: Tab(id: "c"), place: .end))
        expectRefused(.invalidArgument, ws, .open(tab: Tab(id: "c", title: "\u{7}"), place: .end))
    }

    @Test func moveByIndexCountsTheListWithoutTheMovedTab() throws {
        var ws = try makeWorkspace(["a", "b", "c", "d"])
        try ws.apply(.move(tabId: "a", place: .index(2)), limits: .default)
        #expect(order(ws) == ["b", "c", "a", "d"])
        try ws.apply(.move(tabId: "d", place: .index(0)), limits: .default)
        #expect(order(ws) == ["d", "b", "c", "a"])
        try ws.apply(.move(tabId: "b", place: .index(100)), limits: .default)
        #expect(order(ws) == ["d", "c", "a", "b"])
    }

    @Test func moveToItsOwnPlaceKeepsItsKeyButIsApplied() throws {
        var ws = try makeWorkspace(["a", "b", "c"])
        let keyB = ws.tab("b")!.key
        let v = ws.version
        #expect(try ws.apply(.move(tabId: "b", place: .index(1)), limits: .default) == .move(tabId: "b", place: .key(keyB)))
        #expect(try ws.apply(.move(tabId: "b", place: .key(keyB)), limits: .default) == .move(tabId: "b", place: .key(keyB)))
        #expect(try ws.apply(.move(tabId: "c", place: .end), limits: .default) == .move(tabId: "c", place: .key("a2")))
        #expect(ws.version == v + 3)
        #expect(order(ws) == ["a", "b", "c"])
    }

    @Test func moveToATakenKeyLandsJustAfterIt() throws {
        var ws = try makeWorkspace(["a", "b", "c"])
        // Rule 1: C asks for A's key; it goes between A and B.
        let op = try ws.apply(.move(tabId: "c", place: .key("a0")), limits: .default)
        #expect(order(ws) == ["a", "c", "b"])
        guard case .move(_, .key(let key), _) = op else { Issue.record("\(op)"); return }
        #expect(PositionKey.less("a0", key) && PositionKey.less(key, "a1"))
    }

    @Test func moveRefusals() throws {
        var ws = try makeWorkspace(["a", "b"])
        expectRefused(.tabGone, ws, .move(tabId: "zz", place: .end))
        try ws.apply(.update(TabUpdate(tabId: "b", locked: true)), limits: .default)
        expectRefused(.locked, ws, .move(tabId: "b", place: .index(0)))
        try ws.apply(.setEditable(false), limits: .default)
        expectRefused(.notEditable, ws, .move(tabId: "a", place: .end))
    }

    @Test func removingTheActiveTabActivatesItsRightNeighbourElseItsLeft() throws {
        var ws = try makeWorkspace(["a", "b", "c"])
        try ws.apply(.activate(.tabId("b")), limits: .default)
        try ws.apply(.remove(tabId: "b"), limits: .default)
        #expect(ws.activeTabId == "c")
        try ws.apply(.remove(tabId: "c"), limits: .default)
        #expect(ws.activeTabId == "a")
        try ws.apply(.remove(tabId: "a"), limits: .default)
        #expect(ws.activeTabId == "")
        #expect(ws.tabs.isEmpty)
    }

    @Test func removingAnInactiveTabKeepsTheActiveOne() throws {
        var ws = try makeWorkspace(["a", "b", "c"])
        try ws.apply(.remove(tabId: "b"), limits: .default)
        #expect(ws.activeTabId == "a")
        expectRefused(.tabGone, ws, .remove(tabId: "b"))
    }

    @Test func activateByIdAndByIndex() throws {
        var ws = try makeWorkspace(["a", "b", "c"])
        #expect(try ws.apply(.activate(.index(2)), limits: .default) == .activate(.tabId("c")))
        #expect(ws.activeTabId == "c")
        try ws.apply(.activate(.tabId("b")), limits: .default)
        #expect(ws.activeTabId == "b")
        expectRefused(.invalidArgument, ws, .activate(.index(3)))
        expectRefused(.tabGone, ws, .activate(.tabId("zz")))
        // Activating is allowed in a non-editable workspace and on locked tabs.
        try ws.apply(.update(TabUpdate(tabId: "a", locked: true)), limits: .default)
        try ws.apply(.setEditable(false), limits: .default)
        try ws.apply(.activate(.tabId("a")), limits: .default)
        #expect(ws.activeTabId == "a")
    }

    @Test func updateSetsPresentFieldsAndEmptyClears() throws {
        var ws = Workspace(id: "w")
        try ws.apply(.add(tab: Tab(id: "a", title: "A", url: "u", icon: "i", badge: "3"), place: .end, activate: false), limits: .default)
        try ws.apply(.update(TabUpdate(tabId: "a", title: "New", url: "", badge: "")), limits: .default)
        #expect(ws.tab("a") == Tab(id: "a", title: "New", url: "", icon: "i", badge: "", locked: false, key: "a0"))
        expectRefused(.invalidArgument, ws, .update(TabUpdate(tabId: "a")))
        expectRefused(.invalidArgument, ws, .update(TabUpdate(tabId: "a", badge: "\u{1B}")))
        expectRefused(.tabGone, ws, .update(TabUpdate(tabId: "b", title: "x")))
        // Update is allowed when not editable.
        try ws.apply(.setEditable(false), limits: .default)
        try ws.apply(.update(TabUpdate(tabId: "a", locked: true)), limits: .default)
        #expect(ws.tab("a")?.locked == true)
    }

    @Test func replaceKeepsTheActiveTabElseTheOldIndexElseTheFirst() throws {
        var ws = try makeWorkspace(["a", "b", "c"])
        try ws.apply(.activate(.tabId("b")), limits: .default)
        let op = try ws.apply(.replace(tabs: [Tab(id: "c", key: "zz"), Tab(id: "b"), Tab(id: "x")]), limits: .default)
        #expect(order(ws) == ["c", "b", "x"])
        #expect(ws.tabs.map(\.key) == ["a0", "a1", "a2"])
        #expect(ws.activeTabId == "b")
        guard case .replace(let tabs, _) = op else { Issue.record("\(op)"); return }
        #expect(tabs.map(\.key) == ["a0", "a1", "a2"])
        try ws.apply(.replace(tabs: [Tab(id: "p"), Tab(id: "q"), Tab(id: "r")]), limits: .default)
        #expect(ws.activeTabId == "q")
        try ws.apply(.activate(.tabId("r")), limits: .default)
        try ws.apply(.replace(tabs: [Tab(id: "s")]), limits: .default)
        #expect(ws.activeTabId == "s")
        try ws.apply(.replace(tabs: []), limits: .default)
        #expect(ws.activeTabId == "")
        #expect(ws.invariantViolations(limits: .default).isEmpty)
    }

    @Test func replaceRefusals() throws {
        var ws = try makeWorkspace(["a", "b", "c"])
        expectRefused(.invalidArgument, ws, .replace(tabs: [Tab(id: "a"), Tab(id: "a")]))
        expectRefused(.limitExceeded, ws, .replace(tabs: [Tab(id: "a"), Tab(id: "b"), Tab(id: "c"), Tab(id: "d")]), limits: Limits(maxTabs: 3))
        try ws.apply(.update(TabUpdate(tabId: "b", locked: true)), limits: .default)
        expectRefused(.locked, ws, .replace(tabs: [Tab(id: "a"), Tab(id: "c"), Tab(id: "b")]))
        expectRefused(.locked, ws, .replace(tabs: [Tab(id: "a")]))
        try ws.apply(.replace(tabs: [Tab(id: "x"), Tab(id: "b", locked: true)]), limits: .default)
        #expect(order(ws) == ["x", "b"])
        try ws.apply(.setEditable(false), limits: .default)
        expectRefused(.notEditable, ws, .replace(tabs: [Tab(id: "x"), Tab(id: "b")]))
    }

    @Test func canonicalOpsReplayToTheSameState() throws {
        var server = try makeWorkspace(["a", "b", "c"])
        var client = server
        let ops: [Operation] = [
            .add(tab: Tab(id: "x"), place: .index(1), activate: true),
            .move(tabId: "a", place: .index(3)),
            .open(tab: Tab(id: "y", url: "https://y"), place: .key("a0V")),
            .activate(.index(0)),
            .update(TabUpdate(tabId: "b", title: "Bee", locked: true)),
            .remove(tabId: "c"),
            .replace(tabs: [Tab(id: "x"), Tab(id: "y"), Tab(id: "b")]),
            .setEditable(false),
        ]
        for op in ops {
            let canonical = try server.apply(op, limits: .default)
            let applied = AppliedOp(version: server.version, op: canonical, clientId: "c1", seq: 1, activeTabId: server.activeTabId)
            try client.apply(applied: applied)
            #expect(client == server)
        }
    }

    @Test func appliedOpsThatDoNotFitAreRefused() throws {
        var ws = try makeWorkspace(["a"])
        let wrongVersion = AppliedOp(version: 9, op: .remove(tabId: "a"), clientId: "", seq: 0, activeTabId: "")
        #expect(throws: OpError.self) { try ws.apply(applied: wrongVersion) }
        let missingTab = AppliedOp(version: 2, op: .remove(tabId: "zz"), clientId: "", seq: 0, activeTabId: "a")
        #expect(throws: OpError.self) { try ws.apply(applied: missingTab) }
        #expect(ws.version == 1)
    }
}
