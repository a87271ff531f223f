/// Text as the terminal will show it: the one cleaner for strings from the network, display width,
/// and truncation by display width.
///
/// Guarantees of ``clean(_:)``: the result contains no C0 control (U+0000–U+001F), no DEL (U+007F),
/// no C1 control (U+0080–U+009F), no format character (general category Cf, e.g. bidi overrides)
/// other than the zero-width joiner that emoji sequences need, no line or paragraph separator, and no
/// unassigned code point; so no escape sequence can start or be completed from it, and the text cannot
/// reorder or move what is drawn around it, whatever a server sends. Cleaning is idempotent.
///
/// Widths follow what terminals (and tmux) do for the common cases: East Asian wide and fullwidth
/// characters and emoji with default emoji presentation take two cells, nonspacing and enclosing marks
/// and format characters none, everything else one. Ambiguous-width characters count as one.
enum TerminalText {
    /// What a control or unassigned character is replaced with: visible, ASCII, one cell.
    static let replacement: Character = "?"
    /// The mark a truncated text ends with.
    static let ellipsis: Character = "…"

    /// The cleaned text: safe to write to a terminal between our own escape sequences.
    static func clean(_ text: String) -> String {
        var out = String.UnicodeScalarView()
        var changed = false
        for scalar in text.unicodeScalars {
            switch disposition(of: scalar) {
            case .keep:
                out.append(scalar)
            case .space:
                out.append(" ")
                changed = true
            case .replace:
                out.append(contentsOf: String(replacement).unicodeScalars)
                changed = true
            case .drop:
                changed = true
            }
        }
        return changed ? String(out) : text
    }

    /// True when `clean(text) == text`.
    static func isClean(_ text: String) -> Bool {
        text.unicodeScalars.allSatisfy { disposition(of: $0) == .keep }
    }

    private enum Disposition { case keep, space, replace, drop }

    private static func disposition(of scalar: Unicode.Scalar) -> Disposition {
        let v = scalar.value
        switch v {
        case 0x09, 0x0A, 0x0B, 0x0C, 0x0D: return .space
        case 0x00...0x1F, 0x7F...0x9F: return .replace
        case 0x20...0x7E: return .keep
        case 0x2028, 0x2029: return .space
        case 0x200D: return .keep  // zero-width joiner: part of emoji sequences
        default: break
        }
        switch scalar.properties.generalCategory {
        case .format: return .drop  // bidi overrides and isolates, soft hyphen, zero-width space, tags, ...
        case .unassigned, .surrogate: return .replace
        case .lineSeparator, .paragraphSeparator: return .space
        case .control: return .replace
        default: return .keep
        }
    }

    /// The number of cells a scalar takes on its own.
    static func width(of scalar: Unicode.Scalar) -> Int {
        let v = scalar.value
        if v >= 0x20 && v < 0x7F { return 1 }
        if v < 0x20 || (v >= 0x7F && v <= 0x9F) { return 0 }
        switch scalar.properties.generalCategory {
        case .nonspacingMark, .enclosingMark, .format: return 0
        default: break
        }
        if (0x1160...0x11FF).contains(v) || (0xD7B0...0xD7FF).contains(v) { return 0 }  // Hangul medial/final jamo
        if scalar.properties.isEmojiPresentation || isEastAsianWide(v) { return 2 }
        return 1
    }

    /// The number of cells a grapheme cluster takes: its first scalar's width, or two for an emoji
    /// followed by the emoji variation selector (U+FE0F).
    static func width(of character: Character) -> Int {
        let scalars = character.unicodeScalars
        guard let first = scalars.first else { return 0 }
        let base = width(of: first)
        if base == 1, first.properties.isEmoji, scalars.contains("\u{FE0F}") { return 2 }
        return base
    }

    /// The number of cells a text takes.
    static func width(_ text: String) -> Int {
        var total = 0
        for character in text { total += width(of: character) }
        return total
    }

    /// The text cut to at most `maxWidth` cells; a cut text ends with ``ellipsis``. Never splits a
    /// grapheme cluster; the result may be one cell short when a wide character would straddle the edge.
    static func truncate(_ text: String, toWidth maxWidth: Int) -> String {
        guard maxWidth > 0 else { return "" }
        if width(text) <= maxWidth { return text }
        let room = maxWidth - width(of: ellipsis)
        var out = ""
        var used = 0
        for character in text {
            let w = width(of: character)
            if used + w > room { break }
            out.append(character)
            used += w
        }
        out.append(ellipsis)
        return out
    }

    /// The text truncated to `width` cells and padded with spaces to exactly `width` cells.
    static func fit(_ text: String, toWidth targetWidth: Int) -> String {
        let cut = truncate(text, toWidth: targetWidth)
        let missing = targetWidth - width(cut)
        return missing > 0 ? cut + String(repeating: " ", count: missing) : cut
    }

    /// East Asian Wide (W) and Fullwidth (F) ranges that do not have emoji presentation
    /// (those are caught by `isEmojiPresentation`), from Unicode's EastAsianWidth.txt, coalesced.
    private static let wideRanges: [ClosedRange<UInt32>] = [
        0x1100...0x115F,  // Hangul Jamo initial consonants
        0x2329...0x232A,  // angle brackets
        0x2E80...0x303E,  // CJK radicals, Kangxi radicals, ideographic description, CJK symbols and punctuation
        0x3041...0x33FF,  // Hiragana, Katakana, Bopomofo, Hangul compatibility jamo, Kanbun, CJK strokes, enclosed, compatibility
        0x3400...0x4DBF,  // CJK unified ideographs extension A
        0x4E00...0x9FFF,  // CJK unified ideographs
        0xA000...0xA4CF,  // Yi
        0xA960...0xA97F,  // Hangul Jamo extended A
        0xAC00...0xD7A3,  // Hangul syllables
        0xF900...0xFAFF,  // CJK compatibility ideographs
        0xFE10...0xFE19,  // vertical forms
        0xFE30...0xFE6F,  // CJK compatibility forms, small form variants
        0xFF00...0xFF60,  // fullwidth forms
        0xFFE0...0xFFE6,  // fullwidth signs
        0x16FE0...0x16FE4,  // ideographic symbols
        0x17000...0x18CFF,  // Tangut, Khitan
        0x1B000...0x1B2FF,  // Kana supplement and extensions, Nushu
        0x1F200...0x1F265,  // enclosed ideographic supplement
        0x20000...0x2FFFD,  // CJK extensions B–F, compatibility supplement
        0x30000...0x3FFFD,  // CJK extensions G–H
    ]

    private static func isEastAsianWide(_ v: UInt32) -> Bool {
        if v < 0x1100 { return false }
        var lo = 0
        var hi = wideRanges.count - 1
        while lo <= hi {
            let mid = (lo + hi) / 2
            let r = wideRanges[mid]
            if v < r.lowerBound {
                hi = mid - 1
            } else if v > r.upperBound {
                lo = mid + 1
            } else {
                return true
            }
        }
        return false
    }
}
