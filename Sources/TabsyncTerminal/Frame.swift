/// Text attributes of a span; rendered as SGR codes.
public struct Style: OptionSet, Sendable, Hashable {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public static let bold = Style(rawValue: 1 << 0)
    public static let dim = Style(rawValue: 1 << 1)
    public static let underline = Style(rawValue: 1 << 2)
    public static let reverse = Style(rawValue: 1 << 3)
}

/// A run of text with one style. Its text has always passed through ``TerminalText/clean(_:)``:
/// the initializer cleans, so nothing reaches a ``Line`` (and so the terminal) without the cleaner.
public struct Span: Sendable, Hashable {
    public let text: String
    public let style: Style

    public init(_ text: String, _ style: Style = []) {
        self.text = TerminalText.clean(text)
        self.style = style
    }

    public var width: Int { TerminalText.width(text) }
}

/// One screen row, as styled spans.
public struct Line: Sendable, Hashable {
    public var spans: [Span]

    public init(_ spans: [Span] = []) { self.spans = spans }
    public init(_ text: String, _ style: Style = []) { self.spans = [Span(text, style)] }

    public var width: Int { spans.reduce(0) { $0 + $1.width } }
    /// The text without attributes, as `tmux capture-pane` shows it (before trailing spaces are cut).
    public var plain: String { spans.map(\.text).joined() }

    public mutating func append(_ text: String, _ style: Style = []) { spans.append(Span(text, style)) }

    /// The line cut (with an ellipsis) or padded with spaces to exactly `width` cells.
    public func fitted(to width: Int) -> Line {
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
                out.append(Span(cut, span.style))
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
public struct Frame: Sendable, Hashable {
    public var rows: Int
    public var cols: Int
    public var lines: [Line]
    public var cursor: Cursor?

    public struct Cursor: Sendable, Hashable {
        public var row: Int
        public var col: Int
        public init(row: Int, col: Int) {
            self.row = row
            self.col = col
        }
    }

    /// Builds a frame; `lines` are fitted to `cols` and padded or cut to `rows`.
    public init(rows: Int, cols: Int, lines: [Line], cursor: Cursor? = nil) {
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
    public var plainText: String {
        lines.map { line in
            var s = line.plain
            while s.last == " " { s.removeLast() }
            return s
        }.joined(separator: "\n")
    }
}
