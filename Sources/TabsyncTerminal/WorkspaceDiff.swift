import TabsyncCore

/// What would change if the workspace went from `current` to `target` (a restore's dry run):
/// tabs added, removed, moved and changed (a tab's group among its fields), groups added, removed
/// and changed (title, colour), and the active tab (docs/design.md, "Tab groups"). Pure.
public struct WorkspaceDiff: Sendable {
    /// Tabs of `target` not in `current`, with their 1-based position in `target`.
    public private(set) var added: [(tab: Tab, position: Int)] = []
    /// Tabs of `current` not in `target`.
    public private(set) var removed: [Tab] = []
    /// Tabs in both whose place among the tabs they share differs: positions in `current` and `target`, from 1.
    public private(set) var moved: [(tab: Tab, from: Int, to: Int)] = []
    /// Tabs in both whose fields differ, with one description per field ("title “a” → “b”").
    public private(set) var changed: [(tab: Tab, changes: [String])] = []
    /// Groups of `target` not in `current`.
    public private(set) var groupsAdded: [TabGroup] = []
    /// Groups of `current` not in `target`.
    public private(set) var groupsRemoved: [TabGroup] = []
    /// Groups in both whose title or colour differs, with one description per field.
    public private(set) var groupsChanged: [(group: TabGroup, changes: [String])] = []
    /// The active tab, when it differs.
    public private(set) var active: (from: String, to: String)?
    /// Whether the workspace's editable flag differs.
    public private(set) var editable: (from: Bool, to: Bool)?

    public var isEmpty: Bool {
        added.isEmpty && removed.isEmpty && moved.isEmpty && changed.isEmpty && active == nil && editable == nil
            && groupsAdded.isEmpty && groupsRemoved.isEmpty && groupsChanged.isEmpty
    }

    /// A group as a person reads it: “title” (or "(untitled)") and its id.
    static func groupName(_ id: String, in ws: Workspace) -> String {
        guard !id.isEmpty else { return "(none)" }
        guard let group = ws.group(id) else { return id }
        return (group.title.isEmpty ? "(untitled)" : "“\(group.title)”") + " [\(id)]"
    }

    public init(from current: Workspace, to target: Workspace) {
        let currentIds = Set(current.tabs.map(\.id))
        let targetIds = Set(target.tabs.map(\.id))
        for (index, tab) in target.tabs.enumerated() where !currentIds.contains(tab.id) {
            added.append((tab, index + 1))
        }
        removed = current.tabs.filter { !targetIds.contains($0.id) }
        // Moves: the order of the shared tabs differs (added and removed tabs shift nothing).
        let sharedBefore = current.tabs.filter { targetIds.contains($0.id) }.map(\.id)
        let sharedAfter = target.tabs.filter { currentIds.contains($0.id) }.map(\.id)
        for (index, id) in sharedAfter.enumerated() where sharedBefore[index] != id {
            guard let tab = target.tab(id), let from = current.index(of: id), let to = target.index(of: id) else { continue }
            moved.append((tab, from + 1, to + 1))
        }
        for tab in target.tabs {
            guard let old = current.tab(tab.id) else { continue }
            var changes: [String] = []
            if old.title != tab.title { changes.append("title “\(old.title)” → “\(tab.title)”") }
            if old.url != tab.url { changes.append("url \(old.url.isEmpty ? "(none)" : old.url) → \(tab.url.isEmpty ? "(none)" : tab.url)") }
            if old.icon != tab.icon { changes.append("icon \(old.icon.isEmpty ? "(none)" : old.icon) → \(tab.icon.isEmpty ? "(none)" : tab.icon)") }
            if old.badge != tab.badge { changes.append("badge “\(old.badge)” → “\(tab.badge)”") }
            if old.locked != tab.locked { changes.append(tab.locked ? "locked" : "unlocked") }
            if old.group != tab.group {
                changes.append("group \(Self.groupName(old.group, in: current)) → \(Self.groupName(tab.group, in: target))")
            }
            if !changes.isEmpty { changed.append((tab, changes)) }
        }
        let currentGroups = Set(current.groups.map(\.id))
        let targetGroups = Set(target.groups.map(\.id))
        groupsAdded = target.groups.filter { !currentGroups.contains($0.id) }
        groupsRemoved = current.groups.filter { !targetGroups.contains($0.id) }
        for group in target.groups {
            guard let old = current.group(group.id) else { continue }
            var changes: [String] = []
            if old.title != group.title { changes.append("title “\(old.title)” → “\(group.title)”") }
            if old.color != group.color { changes.append("colour \(old.color) → \(group.color)") }
            if !changes.isEmpty { groupsChanged.append((group, changes)) }
        }
        if current.activeTabId != target.activeTabId { active = (current.activeTabId, target.activeTabId) }
        if current.editable != target.editable { editable = (current.editable, target.editable) }
    }

    /// One line per change, for people: `+` added, `-` removed, `~` moved, `*` changed; tabs first,
    /// then groups (named “title” [id], "(untitled)" when the title is empty).
    public func lines(naming current: Workspace, _ target: Workspace) -> [String] {
        func name(_ tab: Tab) -> String { tab.title.isEmpty ? tab.id : "\(tab.id) “\(tab.title)”" }
        func name(_ id: String) -> String {
            if id.isEmpty { return "(none)" }
            if let tab = target.tab(id) ?? current.tab(id) { return name(tab) }
            return id
        }
        var lines: [String] = []
        for (tab, position) in added {
            lines.append("+ add \(name(tab))\(tab.url.isEmpty ? "" : " \(tab.url)") at \(position)")
        }
        for tab in removed { lines.append("- remove \(name(tab))") }
        for (tab, from, to) in moved { lines.append("~ move \(name(tab)) from \(from) to \(to)") }
        for (tab, changes) in changed { lines.append("* change \(name(tab)): \(changes.joined(separator: ", "))") }
        for group in groupsAdded {
            lines.append("+ add group \(Self.groupName(group.id, in: target)) \(group.color)")
        }
        for group in groupsRemoved { lines.append("- remove group \(Self.groupName(group.id, in: current))") }
        for (group, changes) in groupsChanged {
            lines.append("* change group \(Self.groupName(group.id, in: current)): \(changes.joined(separator: ", "))")
        }
        if let active { lines.append("active: \(name(active.from)) → \(name(active.to))") }
        if let editable { lines.append(editable.to ? "editable: read-only → editable" : "editable: editable → read-only") }
        return lines
    }
}
