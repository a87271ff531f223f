/// Turns frames into terminal output, rewriting only the lines that changed since the last frame
/// (as tmux skips unchanged status lines).
///
/// Guarantees: after the output of `render(f)` is written, the screen shows `f` exactly, provided the
/// screen showed the previous frame (or ``invalidate()`` was called, which forces a full redraw with
/// a clear). Every line is written at an absolute position and padded to the full width, with
/// autowrap expected off (see ``Terminal``), so nothing scrolls. Text comes only from ``Span``s, which
/// are cleaned; the renderer adds nothing but cursor moves, SGR and erase sequences.
struct Renderer: Sendable {
    private var previous: Frame?

    init() {}

    /// Forgets what is on screen: the next render clears and draws every line.
    mutating func invalidate() { previous = nil }

    /// The output bringing the screen from the previous frame to `frame` ("" when nothing changed).
    mutating func render(_ frame: Frame) -> String {
        var out = ""
        let full = previous == nil || previous?.rows != frame.rows || previous?.cols != frame.cols
        if full { out += "\u{1B}[0m\u{1B}[2J" }
        for (row, line) in frame.lines.enumerated() {
            if !full, let previous, row < previous.lines.count, previous.lines[row] == line { continue }
            out += "\u{1B}[\(row + 1);1H"
            out += Self.encode(line)
        }
        if full || previous?.cursor != frame.cursor || !out.isEmpty {
            if let cursor = frame.cursor {
                out += "\u{1B}[\(cursor.row + 1);\(cursor.col + 1)H\u{1B}[?25h"
            } else if full || previous?.cursor != nil {
                out += "\u{1B}[?25l"
            }
        }
        previous = frame
        return out
    }

    /// One line's spans with their SGR codes (attributes and colour), attributes reset at the end.
    static func encode(_ line: Line) -> String {
        var out = ""
        var current: Style = []
        var currentColor: TermColor?
        for span in line.spans {
            if span.style != current || span.color != currentColor {
                out += sgr(span.style, color: span.color)
                current = span.style
                currentColor = span.color
            }
            out += span.text
        }
        if current != [] || currentColor != nil { out += "\u{1B}[0m" }
        return out
    }

    static func sgr(_ style: Style, color: TermColor? = nil) -> String {
        var codes = ["0"]
        if let color { codes.append(color.sgr) }
        if style.contains(.bold) { codes.append("1") }
        if style.contains(.dim) { codes.append("2") }
        if style.contains(.underline) { codes.append("4") }
        if style.contains(.reverse) { codes.append("7") }
        return "\u{1B}[" + codes.joined(separator: ";") + "m"
    }
}
