import TabsyncCore

/// Workspaces with groups written as docs/design.md writes them: `"a b(G) c(G)"` is tabs a, b, c in
/// that order, b and c in group G. Groups get the title of their id and colour `blue`.
public enum GroupNotation {
    public static func workspace(_ text: String, editable: Bool = true) -> Workspace {
        let items = text.split(separator: " ").map { item -> (id: String, group: String) in
            guard let open = item.firstIndex(of: "(") else { return (String(item), "") }
            return (String(item[..<open]), String(item[item.index(after: open)..<item.index(before: item.endIndex)]))
        }
        let keys = PositionKey.keys(count: items.count)
        let tabs = zip(items, keys).map { Tab(id: $0.id, title: $0.id, key: $1, group: $0.group) }
        var groups: [TabGroup] = []
        for tab in tabs where !tab.group.isEmpty && !groups.contains(where: { $0.id == tab.group }) {
            groups.append(TabGroup(id: tab.group, title: tab.group, color: "blue"))
        }
        return Workspace(
            id: "w", version: 1, epoch: "e", tabs: tabs, activeTabId: tabs.first?.id ?? "", editable: editable,
            groups: groups)
    }

    /// The notation of a workspace's tabs.
    public static func text(_ w: Workspace) -> String {
        w.tabs.map { $0.group.isEmpty ? $0.id : "\($0.id)(\($0.group))" }.joined(separator: " ")
    }
}
