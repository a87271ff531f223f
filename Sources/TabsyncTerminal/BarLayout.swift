import TabsyncCore

/// The tab bar line: tabs in display order, each as wide as its title up to a cap, trimmed around the
/// focused tab with hidden counts on each side (`‹3` … `5›`), as tmux trims its window list.
///
/// A tab's cell reads ` N:title(badge)🔒* `: its 1-based position, the title cut by display width,
/// the badge in parentheses, a lock mark when locked, `*` when it is the workspace's active tab (also
/// drawn reversed). The tab this terminal views is drawn in brackets, `[N:title]`, and underlined,
/// when it is not the active tab. A non-editable workspace starts the bar with ``readOnlyMark``.
/// A tab group (docs/design.md, "Tab groups") opens with `{title` before its first tab and closes
/// with `}` after its last, in the group's colour (``TermColor/init(group:)``), its tabs' numbers too;
/// without colour the braces alone still show which tabs it holds.
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
        firstHint: Int = 0, groups: [TabGroup] = []
    ) {
        let width = max(0, width)
        var line = Line()
        var room = width
        if !editable {
            line.append(Self.readOnlyMark + " ", .bold)
            room -= TerminalText.width(Self.readOnlyMark) + 1
        }
        let byId = Dictionary(groups.map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a })
        let labels = tabs.enumerated().map { i, tab in
            var cell = Self.cell(for: tab, index: i, active: tab.id == activeTabId,
                                 viewed: tab.id == viewedTabId && tab.id != activeTabId, group: byId[tab.group])
            if let group = byId[tab.group] {
                let color = TermColor(group: group.color)
                if i == 0 || tabs[i - 1].group != tab.group {
                    cell.spans.insert(Span(Self.groupOpening(group), .bold, color: color), at: 0)
                }
                if i == tabs.count - 1 || tabs[i + 1].group != tab.group { cell.append("}", .bold, color: color) }
            }
            return cell
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

    static let groupTitleCap = 16

    /// What opens a group in the bar: `{` and its title, cut (`{·` for an untitled one).
    static func groupOpening(_ group: TabGroup) -> String {
        let title = TerminalText.truncate(TerminalText.clean(group.title), toWidth: groupTitleCap)
        return "{" + (title.isEmpty ? "·" : title)
    }

    static func leftMarker(_ count: Int) -> String { "‹\(count)" }
    static func rightMarker(_ count: Int) -> String { "\(count)›" }

    /// One tab's cell, with its styles.
    static func cell(for tab: Tab, index: Int, active: Bool, viewed: Bool, group: TabGroup? = nil) -> Line {
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
        let color = group.map { TermColor(group: $0.color) } ?? .none
        return Line([Span(viewed ? "[" : " "), Span(number, style, color: color), Span(text, style), Span(viewed ? "]" : " ")])
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
