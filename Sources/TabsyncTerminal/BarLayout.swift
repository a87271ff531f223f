import TabsyncCore

/// The tab bar line: tabs in display order, each as wide as its title up to a cap, trimmed around the
/// focused tab with hidden counts on each side (`‹3` … `5›`), as tmux trims its window list.
///
/// A tab's cell reads ` N:title(badge)🔒* `: its 1-based position, the title cut by display width,
/// the badge in parentheses, a lock mark when locked, `*` when it is the workspace's active tab (also
/// drawn reversed). The tab this terminal views is drawn in brackets, `[N:title]`, and underlined,
/// when it is not the active tab. A non-editable workspace starts the bar with ``readOnlyMark``.
///
/// Groups (docs/design.md, "Tab groups"): the first tab of a group's run is preceded by the group's
/// chip, its title (or "(untitled)", cut at ``groupTitleCap``). With colour the chip is drawn
/// reversed in the group's colour (``TermColor``) and each of its tabs' `N:` in that colour; without
/// colour the chip reads `{title` and a `}` follows the group's last tab, so membership shows in
/// plain text. Chip and close mark belong to the cell of the tab they touch.
///
/// Guarantees: the line is exactly `width` cells; the focused tab is always shown (cut if it alone
/// is wider than the bar); the shown tabs are contiguous; the hidden counts are exact; with a valid
/// scroll hint the window only moves as far as needed to show the focus.
struct BarLayout: Sendable, Equatable {
    /// The longest title, in cells, before it is cut.
    static let titleCap = 20
    static let badgeCap = 6
    static let lockMark = "🔒"
    static let activeMark = "*"
    static let readOnlyMark = "[RO]"
    static let groupTitleCap = 16
    static let untitledGroup = "(untitled)"

    /// The bar line, exactly `width` cells.
    var line: Line
    /// The first and last shown tab indices (empty range when there are no tabs).
    var shown: Range<Int>
    var hiddenLeft: Int { shown.lowerBound }
    var hiddenRight: Int
    /// Where each shown tab's cell starts and its width, for tests and clicks.
    var cells: [(index: Int, column: Int, width: Int)]

    static func == (a: BarLayout, b: BarLayout) -> Bool {
        a.line == b.line && a.shown == b.shown && a.hiddenRight == b.hiddenRight
            && a.cells.elementsEqual(b.cells) { $0 == $1 }
    }

    /// Lays the bar out.
    /// - Parameters:
    ///   - tabs: the workspace's tabs in display order.
    ///   - focus: the index to keep visible (this terminal's viewed tab); nil when there are no tabs.
    ///   - firstHint: the first shown index of the previous layout (keeps scrolling steady).
    init(
        tabs: [Tab], activeTabId: String, viewedTabId: String, editable: Bool, focus: Int?, width: Int,
        firstHint: Int = 0, groups: [TabGroup] = [], color: Bool = true
    ) {
        let width = max(0, width)
        var line = Line()
        var room = width
        if !editable {
            line.append(Self.readOnlyMark + " ", .bold)
            room -= TerminalText.width(Self.readOnlyMark) + 1
        }
        let groupById = Dictionary(groups.map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a })
        let labels = tabs.enumerated().map { i, tab in
            let group = tab.group.isEmpty ? nil : groupById[tab.group] ?? TabGroup(id: tab.group)
            let first = i == 0 || tabs[i - 1].group != tab.group
            let last = i == tabs.count - 1 || tabs[i + 1].group != tab.group
            return Self.cell(for: tab, index: i, active: tab.id == activeTabId,
                             viewed: tab.id == viewedTabId && tab.id != activeTabId,
                             group: group.map { ($0, first, last) }, color: color)
        }
        let widths = labels.map { $0.width }
        let window = Self.window(widths: widths, focus: focus, width: max(0, room), firstHint: firstHint)
        var column = width - max(0, room)
        var cells: [(index: Int, column: Int, width: Int)] = []
        if window.first > 0 {
            let marker = Self.leftMarker(window.first)
            line.append(marker, .bold)
            column += TerminalText.width(marker)
        }
        let markerRight = window.last < tabs.count - 1 ? Self.rightMarker(tabs.count - 1 - window.last) : ""
        if !tabs.isEmpty {
            for i in window.first...window.last {
                var label = labels[i]
                if window.cut, i == focus {
                    let limit = max(0, width - column - TerminalText.width(markerRight))
                    label = label.fitted(to: limit)
                }
                cells.append((i, column, label.width))
                column += label.width
                line.spans.append(contentsOf: label.spans)
            }
        }
        if !markerRight.isEmpty {
            let pad = width - column - TerminalText.width(markerRight)
            if pad > 0 { line.append(String(repeating: " ", count: pad)) }
            line.append(markerRight, .bold)
        }
        self.line = line.fitted(to: width)
        self.shown = tabs.isEmpty ? 0..<0 : window.first..<(window.last + 1)
        self.hiddenRight = tabs.isEmpty ? 0 : tabs.count - 1 - window.last
        self.cells = cells
    }

    static func leftMarker(_ count: Int) -> String { "‹\(count)" }
    static func rightMarker(_ count: Int) -> String { "\(count)›" }

    /// A group's chip: its title in its colour, or `{title` without colour.
    static func chip(_ group: TabGroup, color: Bool) -> Span {
        let title = group.title.isEmpty ? untitledGroup
            : TerminalText.truncate(TerminalText.clean(group.title), toWidth: groupTitleCap)
        return color ? Span(" \(title) ", [.reverse, .bold], color: TermColor.group(group.color))
                     : Span("{" + title, .bold)
    }

    /// One tab's cell, with its styles; `group` is the tab's group and whether the tab is the first
    /// and the last of its run.
    static func cell(
        for tab: Tab, index: Int, active: Bool, viewed: Bool,
        group: (group: TabGroup, first: Bool, last: Bool)? = nil, color: Bool = true
    ) -> Line {
        let number = "\(index + 1):"
        var text = TerminalText.truncate(TerminalText.clean(tab.title), toWidth: titleCap)
        if !tab.badge.isEmpty {
            text += "(" + TerminalText.truncate(TerminalText.clean(tab.badge), toWidth: badgeCap) + ")"
        }
        if tab.locked { text += lockMark }
        if active { text += activeMark }
        var style: Style = []
        if active { style.insert(.reverse) }
        if viewed { style.insert(.underline) }
        var spans: [Span] = []
        if let group, group.first { spans.append(chip(group.group, color: color)) }
        spans.append(Span(viewed ? "[" : " "))
        let numberColor = color ? group.map { TermColor.group($0.group.color) } : nil
        if let numberColor {
            spans.append(Span(number, style, color: numberColor))
            spans.append(Span(text, style))
        } else {
            spans.append(Span(number + text, style))
        }
        spans.append(Span(viewed ? "]" : " "))
        if let group, group.last, !color { spans.append(Span("}", .bold)) }
        return Line(spans)
    }

    /// The contiguous window of cells to show: contains `focus`, starts at `firstHint` when that
    /// still shows the focus, else moves just far enough; then fills leftwards when the right end is
    /// reached. `cut` is true when the focus cell alone does not fit and must be truncated.
    static func window(widths: [Int], focus: Int?, width: Int, firstHint: Int)
        -> (first: Int, last: Int, cut: Bool)
    {
        let n = widths.count
        guard n > 0 else { return (0, -1, false) }
        let f = min(max(focus ?? 0, 0), n - 1)
        var prefix = [0]
        prefix.reserveCapacity(n + 1)
        for w in widths { prefix.append(prefix.last! + w) }
        if prefix[n] <= width { return (0, n - 1, false) }

        func markerWidth(left: Int, right: Int) -> Int {
            (left > 0 ? TerminalText.width(leftMarker(left)) : 0)
                + (right > 0 ? TerminalText.width(rightMarker(right)) : 0)
        }
        func fits(_ a: Int, _ b: Int) -> Bool {
            prefix[b + 1] - prefix[a] + markerWidth(left: a, right: n - 1 - b) <= width
        }
        if !fits(f, f) { return (f, f, true) }
        /// The last index shown when starting at `a` (at least `a`), or nil when even `a` does not fit.
        func lastShown(from a: Int) -> Int? {
            var best: Int?
            var b = a
            while b < n {
                if fits(a, b) { best = b } else if prefix[b + 1] - prefix[a] > width { break }
                b += 1
            }
            return best
        }
        var first = min(max(firstHint, 0), f)
        while first < f {
            if let last = lastShown(from: first), last >= f { break }
            first += 1
        }
        var last = lastShown(from: first) ?? f
        if last < f { last = f }
        if last == n - 1 {
            while first > 0 && fits(first - 1, last) { first -= 1 }
        }
        return (first, last, false)
    }
}
