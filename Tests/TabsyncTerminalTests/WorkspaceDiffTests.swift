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
}
