import TabsyncCore

/// The bar's tab-group keys (docs/design.md, "Tab groups"): each submits one group op through
/// ``BarModel/submit(_:)``, so an edit the local workspace already refuses (read-only, a locked tab)
/// is not sent and its reason shows. The server places the tabs; the bar shows the result.
///
/// - `g` groups the viewed tab with its neighbour: into the right neighbour's group, else the left
///   one's, else the viewed tab's own group takes the right (or left) neighbour, else both make a
///   new untitled group.
/// - `G` asks a title and puts the viewed tab into the group with that title (a new one when no
///   group has it).
/// - `d` takes the viewed tab out of its group.
/// - `R` renames the viewed tab's group; `c` gives it the next of the nine colours.
extension BarModel {
    static let groupKeys: Set<Character> = ["g", "G", "d", "R", "c"]

    mutating func handleGroupKey(_ key: Character) -> [BarAction] {
        guard let tab = viewedTab, let i = viewedIndex else { return noTab() }
        let tabs = workspace.tabs
        let right = i + 1 < tabs.count ? tabs[i + 1] : nil
        let left = i > 0 ? tabs[i - 1] : nil
        switch key {
        case "g":
            guard let neighbour = right ?? left else {
                message = "no neighbour to group with"
                return []
            }
            if let target = [right, left].compactMap({ $0 }).first(where: { !$0.group.isEmpty && $0.group != tab.group }) {
                return submit(.group(GroupTabs(tabIds: [tab.id], groupId: target.group)))
            }
            if !tab.group.isEmpty {
                guard neighbour.group != tab.group else {
                    message = "already grouped with its neighbours"
                    return []
                }
                return submit(.group(GroupTabs(tabIds: [neighbour.id], groupId: tab.group)))
            }
            let pair = right != nil ? [tab.id, neighbour.id] : [neighbour.id, tab.id]
            return submit(.group(GroupTabs(tabIds: pair, groupId: newGroupId())))
        case "G":
            overlay = .prompt(Prompt(purpose: .groupInto(tabId: tab.id), text: ""))
        case "d":
            guard !tab.group.isEmpty else {
                message = "the tab is in no group"
                return []
            }
            return submit(.ungroup(UngroupTabs(tabIds: [tab.id])))
        case "R":
            guard let group = workspace.group(tab.group) else {
                message = "the tab is in no group"
                return []
            }
            overlay = .prompt(Prompt(purpose: .renameGroup(groupId: group.id), text: group.title))
        case "c":
            guard let group = workspace.group(tab.group) else {
                message = "the tab is in no group"
                return []
            }
            let colors = TabGroup.colors
            let next = colors[((colors.firstIndex(of: group.color) ?? -1) + 1) % colors.count]
            return submit(.updateGroup(GroupUpdate(groupId: group.id, color: next)))
        default:
            break
        }
        return []
    }

    /// Puts tab `tabId` into the group titled `title` (the first such in display order), or into a
    /// new group with that title.
    mutating func groupInto(_ tabId: String, title: String) -> [BarAction] {
        if let existing = workspace.groups.first(where: { $0.title == title }) {
            return submit(.group(GroupTabs(tabIds: [tabId], groupId: existing.id)))
        }
        return submit(.group(GroupTabs(tabIds: [tabId], groupId: newGroupId(), title: title)))
    }

    /// A group id this terminal has not used: as its tab ids, with a `g`.
    mutating func newGroupId() -> String {
        "g" + newTabId()
    }

    /// How an applied group op reads in the log, naming groups and tabs by title.
    func describeGroupOp(_ op: Operation) -> String {
        func groupName(_ id: String, _ title: String?) -> String {
            let title = title ?? workspace.group(id)?.title ?? ""
            return title.isEmpty ? "an untitled group" : "“\(title)”"
        }
        func tabs(_ ids: [String]) -> String {
            ids.count == 1 ? (workspace.tab(ids[0]).map { $0.title.isEmpty ? $0.id : "“\($0.title)”" } ?? ids[0])
                           : "\(ids.count) tabs"
        }
        switch op {
        case .group(let change):
            return "grouped \(tabs(change.tabIds)) into \(groupName(change.groupId, change.title))"
        case .ungroup(let change):
            return "ungrouped \(tabs(change.tabIds))"
        case .updateGroup(let update):
            var parts: [String] = []
            if let title = update.title {
                // This terminal's own rename already shows in its workspace: then the old title is gone.
                let old = workspace.group(update.groupId)?.title
                parts.append(old != nil && old != title ? "renamed group \(groupName(update.groupId, nil)) to “\(title)”"
                                                        : "renamed a group to “\(title)”")
            }
            if let color = update.color { parts.append("coloured group \(groupName(update.groupId, update.title)) \(color)") }
            return parts.joined(separator: ", ")
        default:
            return op.summary
        }
    }
}
