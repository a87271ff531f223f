import TabsyncCore
import Testing
@testable import TabsyncTerminal

/// What `tabsync restore --dry-run` prints: the difference between two workspaces.
@Suite struct WorkspaceDiffTests {
    @Test func aRestoreDiffNamesAddedRemovedMovedChangedAndActive() {
        let current = workspace(["A", "B", "C"], active: 0)
        var target = workspace(["A", "B", "C", "D"], active: 2)
        // target: C, A (renamed), D; B is gone.
        _ = try? target.apply(.remove(tabId: "t2"), limits: .default)
        _ = try? target.apply(.move(tabId: "t3", place: .index(0)), limits: .default)
        _ = try? target.apply(.update(TabUpdate(tabId: "t1", title: "A2")), limits: .default)
        let diff = WorkspaceDiff(from: current, to: target)
        #expect(diff.added.map(\.tab.id) == ["t4"])
        #expect(diff.removed.map(\.id) == ["t2"])
        #expect(diff.moved.map(\.tab.id) == ["t3", "t1"])
        #expect(diff.changed.map(\.tab.id) == ["t1"])
        #expect(diff.active?.from == "t1" && diff.active?.to == "t3")
        let lines = diff.lines(naming: current, target)
        #expect(lines.contains("- remove t2 “B”"))
        #expect(lines.contains("* change t1 “A2”: title “A” → “A2”"))
        #expect(WorkspaceDiff(from: current, to: current).isEmpty)
    }

    @Test func activeAndEditableChangesAreNamed() {
        let current = workspace(["A", "B"], active: 0)
        let target = workspace(["A", "B"], active: 1, editable: false)
        let lines = WorkspaceDiff(from: current, to: target).lines(naming: current, target)
        #expect(lines == ["active: t1 “A” → t2 “B”", "editable: editable → read-only"])
    }

    @Test func groupChangesAreNamed() throws {
        // current: [A(G “Work” blue) B(G) C(H “Old” red)]; target: G renamed and recoloured, B out
        // of G, H gone, C in a new untitled group K.
        var current = workspace(["A", "B", "C"])
        _ = try current.apply(.group(GroupTabs(tabIds: ["t1", "t2"], groupId: "G", title: "Work", color: "blue")), limits: .default)
        _ = try current.apply(.group(GroupTabs(tabIds: ["t3"], groupId: "H", title: "Old", color: "red")), limits: .default)
        var target = current
        _ = try target.apply(.updateGroup(GroupUpdate(groupId: "G", title: "Job", color: "green")), limits: .default)
        _ = try target.apply(.ungroup(UngroupTabs(tabIds: ["t2"])), limits: .default)
        _ = try target.apply(.group(GroupTabs(tabIds: ["t3"], groupId: "K")), limits: .default)
        let diff = WorkspaceDiff(from: current, to: target)
        #expect(diff.groupsAdded.map(\.id) == ["K"])
        #expect(diff.groupsRemoved.map(\.id) == ["H"])
        #expect(diff.groupsChanged.map(\.group.id) == ["G"])
        #expect(!diff.isEmpty)
        let lines = diff.lines(naming: current, target)
        #expect(lines.contains("* change t2 “B”: group “Work” [G] → (none)"))
        #expect(lines.contains("* change t3 “C”: group “Old” [H] → (untitled) [K]"))
        #expect(lines.contains("+ add group (untitled) [K] grey"))
        #expect(lines.contains("- remove group “Old” [H]"))
        #expect(lines.contains("* change group “Work” [G]: title “Work” → “Job”, colour blue → green"))
        #expect(!lines.contains { $0.contains("t1") })  // A stays in G: no tab line
    }

    @Test func aGroupRecolouredAloneIsADifference() throws {
        var current = workspace(["A"])
        _ = try current.apply(.group(GroupTabs(tabIds: ["t1"], groupId: "G", title: "W")), limits: .default)
        var target = current
        _ = try target.apply(.updateGroup(GroupUpdate(groupId: "G", color: "cyan")), limits: .default)
        let diff = WorkspaceDiff(from: current, to: target)
        #expect(!diff.isEmpty)
        #expect(diff.lines(naming: current, target) == ["* change group “W” [G]: colour grey → cyan"])
    }
}
