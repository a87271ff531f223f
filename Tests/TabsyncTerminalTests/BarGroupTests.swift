import TabsyncCore
import Testing
@testable import TabsyncTerminal

/// Groups in the bar: drawn with and without colour, edited with g G d t c C, and named in the log
/// (docs/design.md, "Tab groups").
@Suite struct BarGroupTests {
    /// [A(G “Work” blue) B(G) C], A active.
    static func grouped() throws -> Workspace {
        var ws = workspace(["A", "B", "C"])
        _ = try ws.apply(.group(GroupTabs(tabIds: ["t1", "t2"], groupId: "G", title: "Work", color: "blue")), limits: .default)
        return ws
    }

    @Test func withColourTheChipIsTheTitleInTheGroupsColour() throws {
        let m = model(try Self.grouped())
        let bar = m.frame().lines[0]
        #expect(bar.plain.hasPrefix(" Work  1:A*  2:B  3:C "))
        let chip = try #require(bar.spans.first { $0.text == " Work " })
        #expect(chip.color == TermColor(sgr: "34") && chip.style.contains(.reverse))
        // The group's tabs' numbers are in its colour; the ungrouped tab's are not.
        #expect(bar.spans.first { $0.text == "1:" }?.color == TermColor(sgr: "34"))
        #expect(bar.spans.contains { $0.text == "3:C" && $0.color == nil })
        #expect(Renderer.encode(bar).contains("\u{1B}[0;34;1;7m Work "))
        #expect(!bar.plain.contains("{"))
    }

    @Test func withoutColourBracesMarkTheGroupAndNoSpanHasAColour() throws {
        var ws = try Self.grouped()
        _ = try ws.apply(.updateGroup(GroupUpdate(groupId: "G", title: "")), limits: .default)
        let m = BarModel(server: "s", clientId: "me", workspace: ws, rows: 20, cols: 80, idPrefix: "zz", color: false)
        let frame = m.frame()
        #expect(frame.lines[0].plain.hasPrefix("{(untitled) 1:A*  2:B } 3:C"))
        #expect(frame.lines.allSatisfy { $0.spans.allSatisfy { $0.color == nil } })
        #expect(!Renderer.encode(frame.lines[0]).contains("34"))
    }

    @Test func theMappingCoversTheNineColours() {
        let codes = TabGroup.colors.map { TermColor.group($0).sgr }
        #expect(codes == ["90", "34", "31", "33", "32", "95", "35", "36", "38;5;208"])
        #expect(TermColor.group("mauve") == TermColor.group("grey"))
    }

    @Test func theListNamesEachTabsGroup() throws {
        var h = Harness(try Self.grouped())
        h.type(.char("o"))
        var text = h.model.frame().plainText
        #expect(text.contains("> 1:A*  Work\n") && text.contains("  2:B  Work\n") && text.contains("  3:C\n"))
        let plain = BarModel(server: "s", clientId: "me", workspace: try Self.grouped(), rows: 20, cols: 80,
                             idPrefix: "zz", color: false)
        var m = plain
        _ = m.handle(.key(.char("o")))
        text = m.frame().plainText
        #expect(text.contains("  2:B  {Work}\n"))
    }

    @Test func theDetailsNameTheViewedTabsGroup() throws {
        let text = model(try Self.grouped()).frame().plainText
        #expect(text.contains("  group  Work (blue, G)"))
    }

    @Test func gGroupsWithTheRightNeighbourOrJoinsItsGroup() throws {
        // Two ungrouped tabs make a new untitled group.
        var h = Harness(workspace(["A", "B", "C"]))
        h.type(.char("l"), .char("g"))
        #expect(h.submitted.last == .group(GroupTabs(tabIds: ["t2", "t3"], groupId: "zz-g1")))
        #expect(h.ws.tabs.map(\.group) == ["", "zz-g1", "zz-g1"])
        // A tab whose neighbour is in a group joins it.
        h.type(.char("1"), .char("g"))
        #expect(h.submitted.last == .group(GroupTabs(tabIds: ["t1"], groupId: "zz-g1")))
        #expect(h.ws.groups.count == 1 && h.ws.tabs.allSatisfy { $0.group == "zz-g1" })
        // Nothing to the right, or already together: said, not submitted.
        func groupOps() -> Int { h.submitted.filter { if case .group = $0 { true } else { false } }.count }
        let count = groupOps()
        h.type(.end, .char("g"))
        #expect(h.model.message == "no tab to the right to group with")
        h.type(.home, .char("g"))
        #expect(h.model.message == "already in the group of the tab to the right")
        #expect(groupOps() == count)
    }

    @Test func bigGPutsTheTabIntoAGroupByTitle() throws {
        var h = Harness(try Self.grouped())
        h.type(.char("3"), .char("G"))
        h.type("Work")
        h.type(.enter)
        #expect(h.submitted.last == .group(GroupTabs(tabIds: ["t3"], groupId: "G")))
        #expect(h.ws.tab("t3")?.group == "G")
        h.type(.char("G"))
        h.type("Later")
        h.type(.enter)
        #expect(h.submitted.last == .group(GroupTabs(tabIds: ["t3"], groupId: "zz-g1", title: "Later")))
        #expect(h.ws.groups.map(\.title) == ["Work", "Later"])
    }

    @Test func dUngroupsTAndCcEditTheGroup() throws {
        var h = Harness(try Self.grouped())
        h.type(.char("t"))
        for _ in 0..<4 { h.type(.backspace) }
        h.type("Job")
        h.type(.enter)
        #expect(h.submitted.last == .updateGroup(GroupUpdate(groupId: "G", title: "Job")))
        h.type(.char("c"))
        #expect(h.submitted.last == .updateGroup(GroupUpdate(groupId: "G", color: "red")))
        h.type(.char("C"), .char("C"))
        #expect(h.submitted.last == .updateGroup(GroupUpdate(groupId: "G", color: "grey")))
        h.type(.char("C"))
        #expect(h.submitted.last == .updateGroup(GroupUpdate(groupId: "G", color: "orange")))
        h.type(.char("d"))
        #expect(h.submitted.last == .ungroup(UngroupTabs(tabIds: ["t1"])))
        #expect(h.ws.tab("t1")?.group == "")
        let count = h.submitted.count
        h.type(.char("d"))
        #expect(h.model.message == "the tab is in no group")
        h.type(.char("t"))
        #expect(h.model.message == "the tab is in no group")
        #expect(h.submitted.count == count)
    }

    @Test func aGroupEditTheWorkspaceRefusesIsShownNotSubmitted() throws {
        var ws = try Self.grouped()
        _ = try ws.apply(.setEditable(false), limits: .default)
        var h = Harness(ws)
        h.type(.char("2"), .char("g"))
        #expect(h.model.message.hasPrefix("refused: NOT_EDITABLE"))
        h.type(.char("d"))
        #expect(h.model.message.hasPrefix("refused: NOT_EDITABLE"))
        // Recolouring a group is allowed like an update.
        h.type(.char("c"))
        let edits = h.submitted.filter { if case .activate = $0 { false } else { true } }
        #expect(edits == [.updateGroup(GroupUpdate(groupId: "G", color: "red"))])
        // A refusal from the server shows as the bar shows other refusals.
        h.send(.rejected(code: .tabGone, message: "group G does not exist"))
        #expect(h.model.frame().plainText.contains("refused: TAB_GONE: group G does not exist"))
    }

    @Test func theLogNamesGroupOpsPlainly() throws {
        let m = model(try Self.grouped())
        #expect(m.describe(.group(GroupTabs(tabIds: ["t1", "t2"], groupId: "G", title: "Work", color: "blue", keys: ["a", "b"])))
                == "grouped 2 tabs into “Work”")
        #expect(m.describe(.group(GroupTabs(tabIds: ["t3"], groupId: "G"))) == "grouped “C” into “Work”")
        #expect(m.describe(.group(GroupTabs(tabIds: ["t3"], groupId: "N", title: ""))) == "grouped “C” into (untitled)")
        #expect(m.describe(.ungroup(UngroupTabs(tabIds: ["t1"]))) == "ungrouped “A”")
        #expect(m.describe(.updateGroup(GroupUpdate(groupId: "G", title: "Job"))) == "renamed group “Work” to “Job”")
        #expect(m.describe(.updateGroup(GroupUpdate(groupId: "G", color: "red"))) == "coloured group “Work” red")
        // Its own rename is already in the workspace when it is logged.
        #expect(m.describe(.updateGroup(GroupUpdate(groupId: "G", title: "Work"))) == "renamed group to “Work”")
    }

    /// At 20 rows (16 for the help) every key line shows, the group keys among them.
    @Test func theHelpNamesTheGroupKeys() throws {
        var h = Harness(workspace(["A"]), rows: 20)
        h.type(.char("?"))
        let text = h.model.frame().plainText
        #expect(text.contains("  g / G             group the tab with the next one / into a group by title"))
        #expect(text.contains("  d t / c C         ungroup / rename its group; next / previous group colour"))
        #expect(text.contains("  ? / q             this help / quit"))
    }
}
