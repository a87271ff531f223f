/// One line saying what an applied op did, for history views (docs/design.md, "History"): tab
/// titles where the op carries them, ids otherwise; text fields cut to 60 characters.
extension Operation {
    public var summary: String {
        func cut(_ text: String) -> String { text.count > 60 ? String(text.prefix(59)) + "…" : text }
        func name(_ tab: Tab) -> String { tab.title.isEmpty ? tab.id : "\"\(cut(tab.title))\"" }
        switch self {
        case .add(let tab, _, let activate): return "added \(name(tab))" + (activate ? " and made it active" : "")
        case .open(let tab, _): return "opened \(name(tab))"
        case .move(let tabId, _, _): return "moved \(tabId)"
        case .remove(let tabId): return "closed \(tabId)"
        case .activate(.tabId(let tabId)): return "activated \(tabId)"
        case .activate(.index(let index)): return "activated tab \(index + 1)"
        case .update(let update):
            var changed: [String] = []
            if let title = update.title { changed.append("title \"\(cut(title))\"") }
            if let url = update.url { changed.append(url.isEmpty ? "url cleared" : "url \(cut(url))") }
            if update.icon != nil { changed.append("icon") }
            if update.badge != nil { changed.append("badge") }
            if let locked = update.locked { changed.append(locked ? "locked" : "unlocked") }
            return "updated \(update.tabId): " + changed.joined(separator: ", ")
        case .setEditable(let editable): return editable ? "made the workspace editable" : "made the workspace read-only"
        case .replace(let tabs, _): return "replaced every tab (\(tabs.count) now)"
        case .rekey(let keys): return "re-keyed \(keys.count) tabs"
        case .restore(let version, let state):
            return "restored version \(version)" + (state.map { " (\($0.tabs.count) tabs)" } ?? "")
        case .reopen(let tabId): return "reopened \(tabId)"
        case .group(let change):
            let named = change.title.map { $0.isEmpty ? change.groupId : "\"\(cut($0))\"" } ?? change.groupId
            return "grouped \(change.tabIds.joined(separator: ", ")) into \(named)"
        case .ungroup(let change): return "ungrouped \(change.tabIds.joined(separator: ", "))"
        case .updateGroup(let update):
            var changed: [String] = []
            if let title = update.title { changed.append("title \"\(cut(title))\"") }
            if let color = update.color { changed.append("color \(color)") }
            return "updated group \(update.groupId): " + changed.joined(separator: ", ")
        }
    }
}
