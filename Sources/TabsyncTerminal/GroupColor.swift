/// A foreground colour for a span: how the bar draws the browsers' nine group colours
/// (docs/design.md, "Tab groups") on a terminal.
///
/// The mapping, by SGR code: grey 90 (bright black), blue 34, red 31, yellow 33, green 32, pink 95
/// (bright magenta), purple 35 (magenta), cyan 36, orange 38;5;208 (the 256-colour orange, as no
/// basic colour is orange). A colour the bar does not know draws as grey. With colour off
/// (`NO_COLOR`, `--no-color`) no span carries one and the bar marks groups with braces instead.
struct TermColor: Sendable, Hashable {
    /// The SGR parameters that select it, e.g. "34" or "38;5;208".
    let sgr: String

    static let byGroupColor: [String: TermColor] = [
        "grey": TermColor(sgr: "90"), "blue": TermColor(sgr: "34"), "red": TermColor(sgr: "31"),
        "yellow": TermColor(sgr: "33"), "green": TermColor(sgr: "32"), "pink": TermColor(sgr: "95"),
        "purple": TermColor(sgr: "35"), "cyan": TermColor(sgr: "36"), "orange": TermColor(sgr: "38;5;208"),
    ]

    /// The terminal colour of a group colour.
    static func group(_ color: String) -> TermColor { byGroupColor[color] ?? byGroupColor["grey"]! }
}
