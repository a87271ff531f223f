import TabsyncCore

/// Naming tabs on a command line: a tab id, or a unique prefix of a title.
public enum TabReference {
    /// Why a reference names no single tab.
    public enum Failure: Error, Sendable, Equatable, CustomStringConvertible {
        /// No tab has that id, or a title starting with it.
        case noMatch(String)
        /// Several titles start with it (their ids are listed).
        case ambiguous(String, ids: [String])

        public var description: String {
            switch self {
            case .noMatch(let ref):
                "no tab has the id or a title starting with \"\(TerminalText.clean(ref))\""
            case .ambiguous(let ref, let ids):
                "\"\(TerminalText.clean(ref))\" starts several titles (ids: "
                    + ids.map(TerminalText.clean).joined(separator: ", ") + "); give more of the title or an id"
            }
        }
    }

    /// The tab `reference` names in `workspace`: an exact id first, then the one title starting with
    /// it (case-sensitive; when nothing matches that way, case-insensitive).
    public static func resolve(_ reference: String, in workspace: Workspace) throws(Failure) -> Tab {
        if let tab = workspace.tab(reference) { return tab }
        guard !reference.isEmpty else { throw .noMatch(reference) }
        var matches = workspace.tabs.filter { $0.title.hasPrefix(reference) }
        if matches.isEmpty {
            let lower = reference.lowercased()
            matches = workspace.tabs.filter { $0.title.lowercased().hasPrefix(lower) }
        }
        if matches.count == 1 { return matches[0] }
        if matches.isEmpty { throw .noMatch(reference) }
        throw .ambiguous(reference, ids: matches.map(\.id))
    }
}

/// `tabsync ls` as a table: one row per tab in display order, every cell cleaned and cut by display
/// width so columns line up whatever the titles hold. When the workspace has groups, a GROUP column
/// names each tab's group as `title (colour) id` ("(untitled)" for an empty title; empty when none).
public enum TabTable {
    static let titleWidth = 32
    static let urlWidth = 48
    static let groupTitleWidth = 24

    /// A group as the GROUP column shows it.
    static func groupCell(_ group: TabGroup) -> String {
        let title = group.title.isEmpty ? "(untitled)"
            : TerminalText.truncate(TerminalText.clean(group.title), toWidth: groupTitleWidth)
        return "\(title) (\(group.color)) " + TerminalText.truncate(TerminalText.clean(group.id), toWidth: 64)
    }

    public static func render(_ workspace: Workspace) -> String {
        let grouped = !workspace.groups.isEmpty
        var rows: [[String]] = [["#", "ID", "TITLE", "URL"] + (grouped ? ["GROUP"] : []) + ["FLAGS"]]
        for (i, tab) in workspace.tabs.enumerated() {
            var flags: [String] = []
            if tab.id == workspace.activeTabId { flags.append("active") }
            if tab.locked { flags.append("locked") }
            if !tab.badge.isEmpty { flags.append("badge=" + TerminalText.clean(tab.badge)) }
            rows.append([
                "\(i + 1)",
                TerminalText.truncate(TerminalText.clean(tab.id), toWidth: 64),
                TerminalText.truncate(TerminalText.clean(tab.title), toWidth: titleWidth),
                TerminalText.truncate(TerminalText.clean(tab.url), toWidth: urlWidth),
            ] + (grouped ? [workspace.group(tab.group).map(groupCell) ?? ""] : []) + [
                flags.joined(separator: ","),
            ])
        }
        var widths = [Int](repeating: 0, count: rows[0].count)
        for row in rows { for (c, cell) in row.enumerated() { widths[c] = max(widths[c], TerminalText.width(cell)) } }
        var out = "workspace \(TerminalText.clean(workspace.id)) v\(workspace.version)"
            + (workspace.editable ? "" : " (read-only)") + ", \(workspace.tabs.count) tab"
            + (workspace.tabs.count == 1 ? "" : "s")
            + (grouped ? ", \(workspace.groups.count) group" + (workspace.groups.count == 1 ? "" : "s") : "") + "\n"
        for row in rows {
            var line = ""
            for (c, cell) in row.enumerated() {
                line += c == row.count - 1 ? cell : TerminalText.fit(cell, toWidth: widths[c]) + "  "
            }
            while line.last == " " { line.removeLast() }
            out += line + "\n"
        }
        return out
    }
}
