import TabsyncCore

/// Drawing: the whole screen as a pure function of the model.
///
/// Rows, top position: bar, help line, body, message or prompt, status. Bottom position: body, help
/// line, message or prompt, status, bar. With fewer than four rows the bar comes first, then the
/// status, then the message. The body shows the viewed tab's details, presence and recent ops, or
/// the help screen, or the overflow list.
extension BarModel {
    static let helpLine =
        "←→/hl tab  HL move  1-9 go  n new  x close  r rename  b badge  k lock  e edit  o list  f follow  ? help  q quit"

    static let helpScreen: [String] = [
        "Keys",
        "  ← → or h l        previous / next tab",
        "  Shift+← → or H L  move the tab left / right",
        "  1 … 9, Home End   go to the tab at that position / the first / the last",
        "  n                 new tab (asks the title, then an optional url)",
        "  x                 close the tab",
        "  r / b             rename the tab / set or clear its badge",
        "  k                 lock / unlock the tab",
        "  e                 make the workspace editable / read-only",
        "  o                 list of every tab (↑ ↓, Enter picks, Esc closes)",
        "  u                 reopen the tab closed last here (else the workspace's last closed)",
        "  U                 recently closed tabs (↑ ↓, Enter reopens, Esc closes)",
        "  g / G             group the tab with the next one / into a group by title",
        "  d t / c C         ungroup / rename its group; next / previous group colour",
        "  f                 follow mode (moving activates for everyone) / browse mode (only this view)",
        "  ? / q             this help / quit",
        "",
        "Bar: N:title(badge)🔒*  * = active tab, [ ] = the tab viewed here, ‹N N› = tabs hidden",
        "Groups: the group's title in its colour before its tabs ({title … } without colour)",
        "Any key closes this help.",
    ]

    /// Rows the overflow list can show at once.
    var listHeight: Int { max(1, rows - 5) }

    /// The screen for the current state.
    func frame() -> Frame {
        let bar = barLayout().line
        let help = Line(Self.helpLine, .dim)
        let status = statusLine()
        var bottom = Line()
        var cursor: Frame.Cursor?
        if case .prompt(let prompt) = overlay {
            bottom = Line([Span(prompt.label, .bold), Span(prompt.text)])
            cursor = Frame.Cursor(row: 0, col: min(max(0, cols - 1), bottom.width))
        } else if !message.isEmpty {
            bottom = Line(message, .bold)
        }
        var lines: [Line]
        var bottomRow: Int
        switch rows {
        case ..<1:
            return Frame(rows: 0, cols: cols, lines: [])
        case 1:
            lines = [bar]
            bottomRow = -1
        case 2:
            lines = position == .top ? [bar, status] : [status, bar]
            bottomRow = -1
        case 3:
            lines = position == .top ? [bar, bottom, status] : [bottom, status, bar]
            bottomRow = position == .top ? 1 : 0
        default:
            var body = bodyLines(height: rows - 4)
            while body.count < rows - 4 { body.append(Line()) }
            if position == .top {
                lines = [bar, help] + body + [bottom, status]
                bottomRow = rows - 2
            } else {
                lines = body + [help, bottom, status, bar]
                bottomRow = rows - 3
            }
        }
        if cursor != nil {
            cursor = bottomRow >= 0 ? Frame.Cursor(row: bottomRow, col: cursor!.col) : nil
        }
        return Frame(rows: rows, cols: cols, lines: lines, cursor: cursor)
    }

    /// Server, workspace and version, connection, round-trip time, pending ops, mode.
    func statusLine() -> Line {
        var line = Line()
        line.append(server)
        line.append(" | ")
        line.append("\(workspace.id) v\(workspace.version)")
        line.append(" | ")
        line.append(link.text, link == .connected ? [] : .bold)
        line.append(" | rtt " + (rttMillis.map { "\($0)ms" } ?? "-"))
        line.append(" | pending \(pendingOps)")
        line.append(" | " + (mode == .follow ? "follow" : "browse"))
        if !workspace.editable { line.append(" | read-only", .bold) }
        return Line(line.spans.map { Span($0.text, $0.style.union(.reverse)) })
    }

    func bodyLines(height: Int) -> [Line] {
        guard height > 0 else { return [] }
        switch overlay {
        case .help:
            return Self.helpScreen.prefix(height).map { Line($0) }
        case .list(let selection, let top):
            return listLines(selection: selection, top: top, height: height)
        case .closed(let tabs, let selection, let top):
            return closedLines(tabs, selection: selection, top: top, height: height)
        case .none, .prompt:
            return mainLines(height: height)
        }
    }

    private func listLines(selection: Int, top: Int, height: Int) -> [Line] {
        let tabs = workspace.tabs
        var lines = [Line("All tabs (\(tabs.count)): ↑↓ select, Enter go, Esc close", .bold)]
        let end = min(tabs.count, top + height - 1)
        if top < end {
            for i in top..<end {
                let tab = tabs[i]
                var text = "\(i + 1):" + TerminalText.clean(tab.title)
                if !tab.badge.isEmpty { text += "(\(TerminalText.clean(tab.badge)))" }
                if tab.locked { text += BarLayout.lockMark }
                if tab.id == workspace.activeTabId { text += BarLayout.activeMark }
                let marker = i == selection ? "> " : "  "
                let style: Style = i == selection ? .reverse : []
                var line = Line(marker + text, style)
                if let group = workspace.group(tab.group) {
                    // The group as the bar's chip names it, in its colour, or in braces without colour.
                    let title = group.title.isEmpty ? BarLayout.untitledGroup : group.title
                    line.append("  ", style)
                    line.append(color ? title : "{\(title)}", style.union(.bold),
                                color: color ? TermColor.group(group.color) : nil)
                }
                if !tab.url.isEmpty { line.append("  " + TerminalText.clean(tab.url), style) }
                lines.append(line)
            }
        }
        return lines
    }

    private func closedLines(_ tabs: [Tab]?, selection: Int, top: Int, height: Int) -> [Line] {
        guard let tabs else { return [Line("Recently closed: loading…", .bold)] }
        guard !tabs.isEmpty else { return [Line("Recently closed: none (Esc closes)", .bold)] }
        var lines = [Line("Recently closed (\(tabs.count)): ↑↓ select, Enter reopen, Esc close", .bold)]
        let end = min(tabs.count, top + height - 1)
        if top < end {
            for i in top..<end {
                let tab = tabs[i]
                var text = TerminalText.clean(tab.title.isEmpty ? tab.id : tab.title)
                if !tab.url.isEmpty { text += "  " + TerminalText.clean(tab.url) }
                let marker = i == selection ? "> " : "  "
                lines.append(Line(marker + text, i == selection ? .reverse : []))
            }
        }
        return lines
    }

    private func mainLines(height: Int) -> [Line] {
        var lines: [Line] = []
        if let i = viewedIndex {
            let tab = workspace.tabs[i]
            var head = Line("Viewing \(i + 1)/\(workspace.tabs.count): ", .bold)
            head.append(tab.title.isEmpty ? "(untitled)" : tab.title, .bold)
            if tab.id == workspace.activeTabId {
                head.append("  (active)")
            } else if let active = workspace.tab(workspace.activeTabId) {
                head.append("  (active: ")
                head.append(active.title.isEmpty ? active.id : active.title)
                head.append(")")
            }
            lines.append(head)
            lines.append(Line("  id     " + tab.id))
            if !tab.url.isEmpty { lines.append(Line("  url    " + tab.url)) }
            if !tab.badge.isEmpty { lines.append(Line("  badge  " + tab.badge)) }
            if tab.locked { lines.append(Line("  locked")) }
            if let group = workspace.group(tab.group) {
                var line = Line("  group  ")
                line.append(group.title.isEmpty ? BarLayout.untitledGroup : group.title, .bold,
                            color: color ? TermColor.group(group.color) : nil)
                line.append(" (\(group.color), \(group.id))")
                lines.append(line)
            }
        } else {
            lines.append(Line("No tabs. Press n to add one.", .bold))
        }
        lines.append(Line())
        let others = height - lines.count
        // Presence takes at most half of what is left; the log gets the rest.
        let presenceRoom = max(1, others / 2)
        lines.append(Line("Connected (\(peers.count + othersCount))", .bold))
        // Past the server's cap, the last line counts the sessions the list does not name.
        let listRoom = othersCount > 0 ? max(1, presenceRoom - 1) : presenceRoom
        for (n, peer) in peers.enumerated() {
            if n >= listRoom - 1 && peers.count > listRoom - 1 && n > 0 {
                lines.append(Line("  … \(peers.count - n) more"))
                break
            }
            var line = Line("  " + (peer.name.isEmpty ? peer.clientId : peer.name))
            if peer.clientId == clientId { line.append(" (you)", .dim) }
            if !peer.focusTabId.isEmpty {
                let tab = workspace.tab(peer.focusTabId)
                line.append(" → " + (tab.map { $0.title.isEmpty ? $0.id : $0.title } ?? peer.focusTabId))
            }
            lines.append(line)
        }
        if othersCount > 0 { lines.append(Line("  +\(othersCount) others")) }
        lines.append(Line())
        lines.append(Line("Recent", .bold))
        let room = max(0, height - lines.count)
        for entry in log.suffix(room) {
            lines.append(Line("  v\(entry.version) \(entry.who): \(entry.what)"))
        }
        return Array(lines.prefix(height))
    }
}
