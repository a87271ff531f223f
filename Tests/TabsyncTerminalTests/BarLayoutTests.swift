import TabsyncCore
import Testing
@testable import TabsyncTerminal

@Suite struct BarLayoutTests {
    func layout(_ ws: Workspace, viewed: String? = nil, focus: Int? = nil, width: Int, hint: Int = 0) -> BarLayout {
        let viewedId = viewed ?? ws.activeTabId
        return BarLayout(
            tabs: ws.tabs, activeTabId: ws.activeTabId, viewedTabId: viewedId, editable: ws.editable,
            focus: focus ?? ws.index(of: viewedId), width: width, firstHint: hint)
    }

    func plain(_ l: BarLayout) -> String { l.line.plain }
    /// The bar's text without its trailing padding.
    func text(_ l: BarLayout) -> String {
        var s = l.line.plain
        while s.last == " " { s.removeLast() }
        return s
    }

    @Test func tabsShowInDisplayOrderWithTheActiveOneMarked() {
        let l = layout(workspace(["Docs", "Mail", "Chat"], active: 1), width: 40)
        #expect(text(l) == " 1:Docs  2:Mail*  3:Chat")
        #expect(l.line.width == 40)
        #expect(l.shown == 0..<3 && l.hiddenLeft == 0 && l.hiddenRight == 0)
        // The active tab is drawn reversed.
        #expect(l.line.spans.contains { $0.text == "2:Mail*" && $0.style.contains(.reverse) })
    }

    @Test func theViewedTabIsBracketedOnlyWhenItIsNotTheActiveOne() {
        let ws = workspace(["Docs", "Mail", "Chat"], active: 0)
        #expect(text(layout(ws, viewed: "t3", width: 30)) == " 1:Docs*  2:Mail [3:Chat]")
        #expect(text(layout(ws, viewed: "t1", width: 30)) == " 1:Docs*  2:Mail  3:Chat")
    }

    @Test func badgesLocksAndReadOnlyAreMarked() {
        var ws = workspace(["Docs", "Mail"], active: 0)
        ws = try! applying(.update(TabUpdate(tabId: "t2", badge: "3", locked: true)), to: ws)
        ws = try! applying(.setEditable(false), to: ws)
        #expect(text(layout(ws, width: 30)) == "[RO]  1:Docs*  2:Mail(3)🔒")
        #expect(layout(ws, width: 30).line.width == 30)
    }

    @Test func longTitlesAreCutAtTheCap() {
        let ws = workspace([String(repeating: "x", count: 40)])
        let text = plain(layout(ws, width: 60))
        #expect(text.hasPrefix(" 1:" + String(repeating: "x", count: BarLayout.titleCap - 1) + "…* "))
    }

    @Test func wideTitlesTakeTheirDisplayWidth() {
        let ws = workspace(["日本語", "🚀go", "abc"], active: 2)
        let l = layout(ws, width: 30)
        #expect(text(l) == " 1:日本語  2:🚀go  3:abc*")
        #expect(l.line.width == 30)
        #expect(l.cells.map(\.column) == [0, 10, 18])
    }

    @Test func overflowKeepsTheFocusVisibleAndCountsHiddenTabs() {
        let titles = (1...12).map { "tab\($0)" }  // each cell " N:tabN " is 8–10 cells
        let ws = workspace(titles, active: 0)
        // Focus at the start: only right marker.
        let start = layout(ws, width: 40)
        #expect(start.hiddenLeft == 0 && start.hiddenRight > 0)
        #expect(plain(start).hasSuffix("\(start.hiddenRight)›"))
        #expect(plain(start).count == 40)
        // Focus at the end: left marker, and the window fills from the right.
        let end = layout(ws, viewed: "t12", width: 40)
        #expect(end.shown.upperBound == 12 && end.hiddenRight == 0)
        #expect(plain(end).hasPrefix("‹\(end.hiddenLeft)"))
        // Focus in the middle: both markers, counts add up.
        let mid = layout(ws, viewed: "t6", width: 40)
        #expect(mid.shown.contains(5))
        #expect(mid.hiddenLeft > 0 && mid.hiddenRight > 0)
        #expect(mid.hiddenLeft + mid.shown.count + mid.hiddenRight == 12)
        #expect(plain(mid).hasPrefix("‹\(mid.hiddenLeft)") && plain(mid).hasSuffix("\(mid.hiddenRight)›"))
        for l in [start, end, mid] { #expect(l.line.width == 40) }
    }

    @Test func everyFocusAtEveryWidthIsShownAndExact() {
        let titles = ["a", "日本語タブ", "Documentation for everything", "🚀", "mail", "x", "chat room", "z"]
        let ws = workspace(titles)
        for width in 1...70 {
            var hint = 0
            for focus in 0..<titles.count {
                let l = layout(ws, viewed: ws.tabs[focus].id, width: width, hint: hint)
                #expect(l.line.width == width, "width \(width) focus \(focus)")
                #expect(l.shown.contains(focus), "width \(width) focus \(focus)")
                #expect(l.hiddenLeft + l.shown.count + l.hiddenRight == titles.count)
                hint = l.shown.lowerBound
            }
        }
    }

    @Test func scrollingIsSteadyWhileTheFocusStaysVisible() {
        let ws = workspace((1...12).map { "tab\($0)" })
        let a = layout(ws, viewed: "t12", width: 40)  // scrolled to the end
        // Moving the focus left within the window keeps the window.
        let b = layout(ws, viewed: "t\(a.shown.lowerBound + 2)", width: 40, hint: a.shown.lowerBound)
        #expect(b.shown == a.shown)
        // Moving just past the left edge scrolls by one.
        let c = layout(ws, viewed: "t\(a.shown.lowerBound)", width: 40, hint: a.shown.lowerBound)
        #expect(c.shown.lowerBound == a.shown.lowerBound - 1)
    }

    @Test func aFocusWiderThanTheBarIsCut() {
        let ws = workspace(["a", String(repeating: "W", count: 20), "b"])
        let l = layout(ws, viewed: "t2", width: 12)
        #expect(l.shown == 1..<2)
        #expect(l.line.width == 12)
        #expect(plain(l).hasPrefix("‹1[2:WW"))
        #expect(plain(l).hasSuffix("1›"))
    }

    @Test func hostileTitlesAreDrawnInert() {
        let ws = workspace(["\u{1B}[2Jboom\u{7}", "ok"])
        let l = layout(ws, width: 40)
        #expect(plain(l).hasPrefix(" 1:?[2Jboom?* "))
        #expect(!Renderer.encode(l.line).contains("\u{1B}[2J"))
    }

    @Test func noTabsGivesAnEmptyBar() {
        let l = layout(workspace([]), width: 10)
        #expect(l.shown.isEmpty && l.hiddenRight == 0 && text(l) == "" && l.line.width == 10)
    }
}
