import TabsyncCore
import Testing
@testable import TabsyncTerminal

/// The bar's tab groups (docs/design.md, "Tab groups"; BarModel+Groups.swift, BarLayout): drawn as
/// `{title … }` in the group's colour (braces alone without colour), each group key submits its one
/// op through the core's rules (the harness applies it as the client would), a refused edit is not
/// sent, and the log names group ops by title.
@Suite struct BarGroupTests {
    /// `Docs(Work) Mail(Work) Chat`: Docs and Mail in group "g1" titled Work, blue.
    static func grouped(editable: Bool = true) -> Workspace {
        var ws = workspace(["Docs", "Mail", "Chat"], editable: true)
        _ = try! ws.apply(.group(GroupTabs(tabIds: ["t1", "t2"], groupId: "g1", title: "Work", color: "blue")), limits: .default)
        if !editable { _ = try! ws.apply(.setEditable(false), limits: .default) }
        return ws
    }

    static func listing(_ ws: Workspace) -> String {
        ws.tabs.map { $0.group.isEmpty ? $0.title : "\($0.title)(\(ws.group($0.group)!.title))" }.joined(separator: " ")
    }

    @Test func aGroupIsDrawnInBracesInItsColourAndWithoutColourStillBraced() {
        let ws = Self.grouped()
        let l = BarLayout(tabs: ws.tabs, activeTabId: ws.activeTabId, viewedTabId: ws.activeTabId, editable: true,
                          focus: 0, width: 60, groups: ws.groups)
        #expect(l.line.plain.trimmingCharacters(in: .whitespaces) == "{Work 1:Docs*  2:Mail } 3:Chat")
        #expect(l.line.spans.contains { $0.text == "{Work" && $0.color == .ansi(4) })
        #expect(l.line.spans.contains { $0.text == "2:" && $0.color == .ansi(4) })
        #expect(l.line.spans.contains { $0.text == "3:" && $0.color == .none })
        let colored = Renderer.encode(l.line, colors: true)
        let plain = Renderer.encode(l.line, colors: false)
        #expect(colored.contains("\u{1B}[0;1;34m{Work"))
        #expect(!plain.contains(";34m") && plain.contains("{Work") && plain.contains("}"))
        // An untitled group and the colours without an ANSI twin.
        #expect(BarLayout.groupOpening(TabGroup(id: "x")) == "{·")
        #expect(TermColor(group: "orange").sgr == "38;5;208" && TermColor(group: "grey").sgr == "90")
        #expect(TermColor(group: "pink").sgr == "95")
    }

    @Test func gGroupsWithTheNeighboursGroupOrMakesANewOne() {
        var h = Harness(Self.grouped())
        h.type(.char("3"))  // Chat, beside Mail(Work)
        h.type(.char("g"))
        #expect(h.submitted.last == .group(GroupTabs(tabIds: ["t3"], groupId: "g1")))
        #expect(Self.listing(h.ws) == "Docs(Work) Mail(Work) Chat(Work)")
        var fresh = Harness(workspace(["A", "B"]))
        fresh.type(.char("g"))
        #expect(fresh.submitted.last == .group(GroupTabs(tabIds: ["t1", "t2"], groupId: "gzz-1")))
        #expect(fresh.ws.groups.map(\.id) == ["gzz-1"] && fresh.ws.tabs.allSatisfy { $0.group == "gzz-1" })
    }

    @Test func dUngroupsAndSaysSoWhenThereIsNoGroup() {
        var h = Harness(Self.grouped())
        h.type(.char("d"))
        #expect(h.submitted.last == .ungroup(UngroupTabs(tabIds: ["t1"])))
        #expect(h.ws.tab("t1")?.group == "")
        let count = h.submitted.count
        h.type(.char("3"), .char("d"))
        #expect(h.model.message == "the tab is in no group")
        #expect(h.submitted.count == count + 1, "only the activate was sent")
    }

    @Test func rRenamesAndCRecoloursTheViewedTabsGroup() {
        var h = Harness(Self.grouped())
        h.type(.char("R"))
        for _ in 0..<4 { h.type(.backspace) }
        h.type("Deep")
        h.type(.enter)
        #expect(h.submitted.last == .updateGroup(GroupUpdate(groupId: "g1", title: "Deep")))
        h.type(.char("c"))
        #expect(h.submitted.last == .updateGroup(GroupUpdate(groupId: "g1", color: "red")))
        #expect(h.ws.groups == [TabGroup(id: "g1", title: "Deep", color: "red")])
    }

    @Test func bigGPutsTheTabIntoTheGroupWithThatTitleOrANewOne() {
        var h = Harness(Self.grouped())
        h.type(.char("3"), .char("G"))
        h.type("Work")
        h.type(.enter)
        #expect(h.submitted.last == .group(GroupTabs(tabIds: ["t3"], groupId: "g1")))
        h.type(.char("1"), .char("G"))
        h.type("Play")
        h.type(.enter)
        #expect(h.submitted.last == .group(GroupTabs(tabIds: ["t1"], groupId: "gzz-1", title: "Play")))
        #expect(h.ws.groups.map(\.title).sorted() == ["Play", "Work"])
    }

    @Test func aReadOnlyWorkspaceRefusesGroupingHereButAllowsARename() {
        var h = Harness(Self.grouped(editable: false))
        h.type(.char("d"))
        #expect(h.submitted.isEmpty)
        #expect(h.model.message.hasPrefix("refused: NOT_EDITABLE"))
        h.type(.char("c"))
        #expect(h.submitted == [.updateGroup(GroupUpdate(groupId: "g1", color: "red"))])
    }

    @Test func theLogNamesGroupOpsByTitle() {
        var h = Harness(Self.grouped())
        h.send(.applied(AppliedOp(version: 9, op: .updateGroup(GroupUpdate(groupId: "g1", title: "Deep")), clientId: "other", seq: 1, activeTabId: "t1")))
        h.send(.applied(AppliedOp(version: 10, op: .ungroup(UngroupTabs(tabIds: ["t2"], keys: ["a5"])), clientId: "other", seq: 2, activeTabId: "t1")))
        let text = h.model.frame().plainText
        #expect(text.contains("renamed group “Work” to “Deep”"))
        #expect(text.contains("ungrouped “Mail”"))
        #expect(text.contains("group  Work (blue, 2 tabs)"))
    }
}
