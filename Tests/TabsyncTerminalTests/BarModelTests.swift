import TabsyncCore
import Testing
@testable import TabsyncTerminal

/// Drives the model the way the app does: keys in, submitted ops applied to the workspace (as the
/// client's optimistic state would), and the new workspace fed back.
struct Harness {
    var model: BarModel
    var ws: Workspace
    var submitted: [Operation] = []
    var focused: [String] = []
    var loads: [Int] = []
    var quit = false

    init(_ ws: Workspace, rows: Int = 20, cols: Int = 80) {
        self.ws = ws
        self.model = TabsyncTerminalTests.model(ws, rows: rows, cols: cols)
    }

    mutating func send(_ event: BarEvent) {
        for action in model.handle(event) {
            switch action {
            case .submit(let op):
                submitted.append(op)
                _ = try? ws.apply(op, limits: .default)
                for follow in model.handle(.workspace(ws)) {
                    if case .focus(let id) = follow { focused.append(id) }
                }
            case .focus(let id):
                focused.append(id)
            case .loadClosed(let limit):
                loads.append(limit)
            case .quit:
                quit = true
            }
        }
    }

    mutating func type(_ keys: Key...) { for k in keys { send(.key(k)) } }
    mutating func type(_ text: String) { for c in text { send(.key(.char(c))) } }

    var titles: [String] { ws.tabs.map(\.title) }
    var activeTitle: String? { ws.tab(ws.activeTabId)?.title }
    var viewedTitle: String? { ws.tab(model.viewedTabId)?.title }
}

@Suite struct BarModelTests {
    @Test func followModeMovesActivateForEveryone() {
        var h = Harness(workspace(["A", "B", "C"]))
        h.type(.right)
        #expect(h.submitted == [.activate(.tabId("t2"))])
        #expect(h.activeTitle == "B" && h.viewedTitle == "B")
        h.type(.char("l"), .char("l"))  // clamps at the end
        #expect(h.activeTitle == "C")
        #expect(h.submitted.count == 2)
        h.type(.char("1"))
        #expect(h.activeTitle == "A")
        h.type(.char("9"))
        #expect(h.model.message == "no tab 9")
    }

    @Test func browseModeMovesOnlyThisView() {
        var h = Harness(workspace(["A", "B", "C"]))
        h.type(.char("f"))
        #expect(h.model.mode == .browse)
        h.type(.right, .right)
        #expect(h.submitted.isEmpty)
        #expect(h.activeTitle == "A" && h.viewedTitle == "C")
        #expect(h.focused == ["t2", "t3"])
        // Another client activates B: browsing, the view stays on C.
        h.ws = try! applying(.activate(.tabId("t2")), to: h.ws)
        h.send(.workspace(h.ws))
        #expect(h.viewedTitle == "C")
        // Back to follow: this view's tab becomes the active one for everyone.
        h.type(.char("f"))
        #expect(h.submitted == [.activate(.tabId("t3"))])
        #expect(h.activeTitle == "C")
    }

    @Test func followModeFollowsOtherClientsActivations() {
        var h = Harness(workspace(["A", "B", "C"]))
        h.ws = try! applying(.activate(.tabId("t3")), to: h.ws)
        h.send(.workspace(h.ws))
        #expect(h.viewedTitle == "C")
        #expect(h.focused == ["t3"])
    }

    @Test func removedViewedTabFallsBackToTheActiveOne() {
        var h = Harness(workspace(["A", "B", "C"]))
        h.type(.char("f"), .char("3"))
        #expect(h.viewedTitle == "C")
        h.ws = try! applying(.remove(tabId: "t3"), to: h.ws)
        h.send(.workspace(h.ws))
        #expect(h.model.viewedTabId == "t1")
    }

    @Test func shiftMovesTheTabWithAKeyBetweenItsNewNeighbours() {
        var h = Harness(workspace(["A", "B", "C", "D"], active: 1))
        h.type(.shiftRight)
        #expect(h.titles == ["A", "C", "B", "D"])
        h.type(.char("L"))
        #expect(h.titles == ["A", "C", "D", "B"])
        h.type(.char("L"))  // already last: nothing
        #expect(h.submitted.count == 2)
        h.type(.shiftLeft, .char("H"), .char("H"))
        #expect(h.titles == ["B", "A", "C", "D"])
        if case .move(_, .key(let key), _) = h.submitted.last! { #expect(PositionKey.isValid(key)) } else {
            Issue.record("not a keyed move")
        }
        #expect(h.activeTitle == "B")
    }

    @Test func newTabAsksTitleThenURLAndAddsAfterTheViewedTab() {
        var h = Harness(workspace(["A", "B"]))
        h.type(.char("n"))
        h.type("Docs 日本")
        h.type(.backspace)
        h.type(.enter)
        if case .prompt(let p) = h.model.overlay { #expect(p.purpose == .newURL(title: "Docs 日")) } else {
            Issue.record("no url prompt")
        }
        h.type("https://x.example")
        h.type(.enter)
        #expect(h.titles == ["A", "Docs 日", "B"])
        #expect(h.ws.tabs[1].url == "https://x.example")
        #expect(h.ws.tabs[1].id == "zz-1")
        #expect(h.activeTitle == "Docs 日")  // follow mode activates it
        #expect(h.model.overlay == .none)
        h.type(.char("n"))
        h.type(.escape)
        #expect(h.model.overlay == .none && h.submitted.count == 1)
    }

    @Test func closeRenameBadgeLockAndEditable() {
        var h = Harness(workspace(["A", "B", "C"], active: 1))
        h.type(.char("r"))
        h.type(.backspace)
        h.type("Bee")
        h.type(.enter)
        #expect(h.titles == ["A", "Bee", "C"])
        h.type(.char("b"))
        h.type("7")
        h.type(.enter)
        #expect(h.ws.tabs[1].badge == "7")
        h.type(.char("k"))
        #expect(h.ws.tabs[1].locked)
        // Closing a locked tab is refused locally with the reason, nothing submitted.
        let before = h.submitted.count
        h.type(.char("x"))
        #expect(h.submitted.count == before)
        #expect(h.model.message.hasPrefix("refused: LOCKED"))
        h.type(.char("k"), .char("x"))
        #expect(h.titles == ["A", "C"])
        h.type(.char("e"))
        #expect(!h.ws.editable)
        h.type(.char("x"))
        #expect(h.model.message.hasPrefix("refused: NOT_EDITABLE"))
        #expect(h.titles == ["A", "C"])
        h.type(.char("e"))
        #expect(h.ws.editable)
    }

    @Test func serverRefusalsShowInTheStatusArea() {
        var h = Harness(workspace(["A"]))
        h.send(.rejected(code: .tabGone, message: "tab t9 does not exist"))
        #expect(h.model.message == "refused: TAB_GONE: tab t9 does not exist")
        #expect(h.model.frame().plainText.contains("refused: TAB_GONE: tab t9 does not exist"))
        h.type(.escape)
        #expect(h.model.message.isEmpty)
    }

    @Test func overflowListNavigatesAndPicks() {
        var h = Harness(workspace((1...30).map { "tab\($0)" }), rows: 10, cols: 40)
        h.type(.char("o"))
        #expect(h.model.overlay == .list(selection: 0, top: 0))
        for _ in 0..<7 { h.type(.down) }
        guard case .list(let sel, let top) = h.model.overlay else { Issue.record("list closed"); return }
        #expect(sel == 7)
        #expect(top > 0 && sel < top + h.model.listHeight)  // scrolled to keep it visible
        let text = h.model.frame().plainText
        #expect(text.contains("> 8:tab8"))
        h.type(.enter)
        #expect(h.model.overlay == .none)
        #expect(h.activeTitle == "tab8")
        h.type(.char("o"), .up, .escape)
        #expect(h.model.overlay == .none && h.activeTitle == "tab8")
    }

    @Test func helpOpensAndAnyKeyClosesIt() {
        var h = Harness(workspace(["A"]))
        h.type(.char("?"))
        #expect(h.model.overlay == .help)
        #expect(h.model.frame().plainText.contains("previous / next tab"))
        h.type(.char("q"))
        #expect(h.model.overlay == .none && !h.quit)
        h.type(.char("q"))
        #expect(h.quit)
    }

    @Test func logNamesWhoMadeEachOp() {
        var h = Harness(workspace(["A", "B"]))
        h.send(.presence([Peer(sessionId: "s1", clientId: "c-alice", name: "alice", focusTabId: "t2"),
                          Peer(sessionId: "s2", clientId: "me", name: "bob", focusTabId: "t1")]))
        h.send(.applied(AppliedOp(version: 2, op: .remove(tabId: "t2"), clientId: "c-alice", seq: 1, activeTabId: "t1")))
        h.send(.applied(AppliedOp(version: 3, op: .update(TabUpdate(tabId: "t1", title: "Z")), clientId: "me", seq: 1,
                                  activeTabId: "t1")))
        h.send(.applied(AppliedOp(version: 4, op: .rekey(keys: []), clientId: "", seq: 0, activeTabId: "t1")))
        #expect(h.model.log.map { "\($0.who): \($0.what)" }
            == ["alice: closed “B”", "you: renamed “A” to “Z”", "server: rekeyed positions"])
        let text = h.model.frame().plainText
        #expect(text.contains("Connected (2)"))
        #expect(text.contains("  alice → B"))
        #expect(text.contains("  bob (you) → A"))
        #expect(text.contains("  v2 alice: closed “B”"))
    }

    @Test func presencePastTheServersCapShowsHowManyOthers() {
        var h = Harness(workspace(["A", "B"]), rows: 24)
        h.send(.presence([Peer(sessionId: "1", clientId: "c-alice", name: "alice", focusTabId: "t2"),
                          Peer(sessionId: "2", clientId: "me", name: "bob", focusTabId: "t1")]))
        h.send(.othersCount(40))
        var text = h.model.frame().plainText
        #expect(text.contains("Connected (42)"))
        #expect(text.contains("  alice → B"))
        #expect(text.contains("  +40 others"))
        h.send(.othersCount(0))
        text = h.model.frame().plainText
        #expect(text.contains("Connected (2)"))
        #expect(!text.contains("others"))
    }

    @Test func logKeepsOnlyTheNewestEntries() {
        var h = Harness(workspace(["A"]))
        for v in 1...(BarModel.logCapacity + 10) {
            h.send(.applied(AppliedOp(version: UInt64(v), op: .activate(.tabId("t1")), clientId: "x", seq: 1,
                                      activeTabId: "t1")))
        }
        #expect(h.model.log.count == BarModel.logCapacity)
        #expect(h.model.log.last?.version == UInt64(BarModel.logCapacity + 10))
    }

    @Test func quitKeys() {
        for key in [Key.char("q"), .ctrl("c"), .ctrl("d")] {
            var h = Harness(workspace(["A"]))
            h.type(key)
            #expect(h.quit)
        }
    }

    @Test func emptyWorkspaceRefusesTabKeysGently() {
        var h = Harness(workspace([]))
        h.type(.right, .char("x"), .char("k"), .char("r"))
        #expect(h.submitted.isEmpty)
        #expect(h.model.message == "no tab")
        #expect(h.model.frame().plainText.contains("No tabs. Press n to add one."))
        h.type(.char("n"))
        h.type("First")
        h.type(.enter, .enter)
        #expect(h.titles == ["First"] && h.activeTitle == "First" && h.viewedTitle == "First")
    }
}
