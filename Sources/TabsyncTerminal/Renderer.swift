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
    /// False: colours are left out (the `NO_COLOR` convention); styles stay.
    let colors: Bool

    init(colors: Bool = true) { self.colors = colors }

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
            out += Self.encode(line, colors: colors)
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

    /// One line's spans with their SGR codes (colours only when `colors`), attributes reset at the end.
    static func encode(_ line: Line, colors: Bool = true) -> String {
        var out = ""
        var current: (Style, TermColor) = ([], .none)
        for span in line.spans {
            let wanted = (span.style, colors ? span.color : .none)
            if wanted != current {
                out += sgr(wanted.0, wanted.1)
                current = wanted
            }
            out += span.text
        }
        if current != ([], .none) { out += "\u{1B}[0m" }
        return out
    }

    static func sgr(_ style: Style, _ color: TermColor = .none) -> String {
        var codes = ["0"]
        if style.contains(.bold) { codes.append("1") }
        if style.contains(.dim) { codes.append("2") }
        if style.contains(.underline) { codes.append("4") }
        if style.contains(.reverse) { codes.append("7") }
        if color != .none { codes.append(color.sgr) }
        return "\u{1B}[" + codes.joined(separator: ";") + "m"
    }
}
