/// Text attributes of a span; rendered as SGR codes.
struct Style: OptionSet, Sendable, Hashable {
    let rawValue: UInt8
    init(rawValue: UInt8) { self.rawValue = rawValue }

    static let bold = Style(rawValue: 1 << 0)
    static let dim = Style(rawValue: 1 << 1)
    static let underline = Style(rawValue: 1 << 2)
    static let reverse = Style(rawValue: 1 << 3)
}

/// A run of text with one style and an optional foreground colour. Its text has always passed through ``TerminalText/clean(_:)``:
/// the initializer cleans, so nothing reaches a ``Line`` (and so the terminal) without the cleaner.
struct Span: Sendable, Hashable {
    let text: String
    let style: Style
    /// nil = the terminal's default colour.
    let color: TermColor?

    init(_ text: String, _ style: Style = [], color: TermColor? = nil) {
        self.text = TerminalText.clean(text)
        self.style = style
        self.color = color
    }

    var width: Int { TerminalText.width(text) }
}

/// One screen row, as styled spans.
struct Line: Sendable, Hashable {
    var spans: [Span]

    init(_ spans: [Span] = []) { self.spans = spans }
    init(_ text: String, _ style: Style = []) { self.spans = [Span(text, style)] }

    var width: Int { spans.reduce(0) { $0 + $1.width } }
    /// The text without attributes, as `tmux capture-pane` shows it (before trailing spaces are cut).
    var plain: String { spans.map(\.text).joined() }

    mutating func append(_ text: String, _ style: Style = [], color: TermColor? = nil) {
        spans.append(Span(text, style, color: color))
    }

    /// The line cut (with an ellipsis) or padded with spaces to exactly `width` cells.
    func fitted(to width: Int) -> Line {
        var out: [Span] = []
        var used = 0
        for span in spans {
            let w = span.width
            if used + w <= width {
                out.append(span)
                used += w
                continue
            }
            let room = width - used
            if room > 0 {
                let cut = TerminalText.truncate(span.text, toWidth: room)
                out.append(Span(cut, span.style, color: span.color))
                used += TerminalText.width(cut)
            }
            break
        }
        if used < width { out.append(Span(String(repeating: " ", count: width - used))) }
        return Line(out)
    }
}

/// What the screen should show: exactly `rows` lines of exactly `cols` cells each, and where the
/// cursor goes (nil = hidden).
struct Frame: Sendable, Hashable {
    var rows: Int
    var cols: Int
    var lines: [Line]
    var cursor: Cursor?

    struct Cursor: Sendable, Hashable {
        var row: Int
        var col: Int
        init(row: Int, col: Int) {
            self.row = row
            self.col = col
        }
    }

    /// Builds a frame; `lines` are fitted to `cols` and padded or cut to `rows`.
    init(rows: Int, cols: Int, lines: [Line], cursor: Cursor? = nil) {
        let rows = max(0, rows)
        let cols = max(0, cols)
        var fitted = lines.prefix(rows).map { $0.fitted(to: cols) }
        while fitted.count < rows { fitted.append(Line().fitted(to: cols)) }
        self.rows = rows
        self.cols = cols
        self.lines = fitted
        self.cursor = cursor
    }

    /// The frame as plain text, one line per row, trailing spaces cut (as `capture-pane` prints it).
    var plainText: String {
        lines.map { line in
            var s = line.plain
            while s.last == " " { s.removeLast() }
            return s
        }.joined(separator: "\n")
    }
}
