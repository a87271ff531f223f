import TabsyncCore
import TabsyncTestSupport
import Testing
@testable import TabsyncTerminal

@Suite struct TerminalTextTests {
    @Test func cleanerReplacesEveryC0C1AndDEL() {
        for v in Array(0x00...0x08) + Array(0x0E...0x1F) + [0x7F] + Array(0x80...0x9F) {
            let text = "a" + String(Character(Unicode.Scalar(UInt32(v))!)) + "b"
            #expect(TerminalText.clean(text) == "a?b", "U+\(String(v, radix: 16))")
        }
    }

    @Test func cleanerTurnsWhitespaceControlsIntoSpaces() {
        #expect(TerminalText.clean("a\tb\nc\rd\u{0B}e\u{0C}f\u{2028}g\u{2029}h") == "a b c d e f g h")
    }

    @Test func cleanerMakesEscapeSequencesInert() {
        let hostile = "\u{1B}[2J\u{1B}]0;pwned\u{07}\u{1B}P+q\u{1B}\\\u{9B}31m\u{1B}[31mred"
        let clean = TerminalText.clean(hostile)
        #expect(clean == "?[2J?]0;pwned??P+q?\\?31m?[31mred")
        #expect(!clean.unicodeScalars.contains { $0.value == 0x1B || (0x80...0x9F).contains($0.value) })
    }

    @Test func cleanerDropsBidiAndFormatCharactersButKeepsZWJ() {
        #expect(TerminalText.clean("a\u{202E}evil\u{202C}b") == "aevilb")
        #expect(TerminalText.clean("x\u{2066}y\u{2069}\u{200E}\u{200F}\u{061C}z") == "xyz")
        #expect(TerminalText.clean("soft\u{00AD}hy\u{200B}phen\u{FEFF}") == "softhyphen")
        let family = "👨\u{200D}👩\u{200D}👧"
        #expect(TerminalText.clean(family) == family)
    }

    @Test func cleanerReplacesUnassignedCodePoints() {
        #expect(TerminalText.clean("a\u{0378}b") == "a?b")  // unassigned in Greek block
    }

    @Test func cleanerKeepsOrdinaryTextAndIsIdempotent() {
        let samples = ["Docs", "日本語のタブ", "café", "e\u{301}", "🚀 launch", "Ünïcödé ‹›…", "a?b", ""]
        for s in samples {
            #expect(TerminalText.clean(s) == s)
            #expect(TerminalText.isClean(s))
        }
        let dirty = "x\u{1B}[1m\u{202E}\u{0}\u{85}y"
        #expect(TerminalText.clean(TerminalText.clean(dirty)) == TerminalText.clean(dirty))
        #expect(TerminalText.isClean(TerminalText.clean(dirty)))
        #expect(!TerminalText.isClean(dirty))
    }

    @Test func cleanedTextNeverHoldsAControlWhateverTheInput() {
        var rng = SplitMix64(seed: 42)
        for _ in 0..<2000 {
            var scalars = String.UnicodeScalarView()
            for _ in 0..<Int(rng.next() % 24) {
                let pick = rng.next() % 4
                let v: UInt32 = switch pick {
                case 0: UInt32(rng.next() % 0x100)
                case 1: UInt32(0x2000 + rng.next() % 0x80)
                case 2: UInt32(rng.next() % 0x11_0000)
                default: 0x1B
                }
                if let s = Unicode.Scalar(v) { scalars.append(s) }
            }
            let clean = TerminalText.clean(String(scalars))
            for s in clean.unicodeScalars {
                #expect(s.value >= 0x20 && !(0x7F...0x9F).contains(s.value))
                #expect(s.properties.generalCategory != .format || s.value == 0x200D)
            }
        }
    }

    @Test func widthCountsWideCharactersAsTwoAndMarksAsZero() {
        #expect(TerminalText.width("abc") == 3)
        #expect(TerminalText.width("日本語") == 6)
        #expect(TerminalText.width("한국어") == 6)
        #expect(TerminalText.width("ｆｕｌｌ") == 8)  // fullwidth Latin
        #expect(TerminalText.width("🚀") == 2)
        #expect(TerminalText.width("a🚀b") == 4)
        #expect(TerminalText.width("e\u{301}") == 1)  // combining acute
        #expect(TerminalText.width("a\u{20DD}") == 1)  // enclosing circle
        #expect(TerminalText.width("\u{301}") == 0)
        #expect(TerminalText.width("👨\u{200D}👩\u{200D}👧") == 2)  // one grapheme
        #expect(TerminalText.width("🇫🇷") == 2)  // flag: one grapheme of two regional indicators
        #expect(TerminalText.width("❤\u{FE0F}") == 2)  // text-default emoji made emoji by VS16
        #expect(TerminalText.width("❤") == 1)
        #expect(TerminalText.width("…‹›") == 3)
        #expect(TerminalText.width("\u{1100}\u{1161}\u{11A8}") == 2)  // conjoining jamo: one syllable
        #expect(TerminalText.width("𠀋") == 2)  // CJK extension B
    }

    @Test func truncationCutsByDisplayWidthWithAnEllipsis() {
        #expect(TerminalText.truncate("Documentation", toWidth: 8) == "Documen…")
        #expect(TerminalText.truncate("Docs", toWidth: 4) == "Docs")
        #expect(TerminalText.truncate("Docs", toWidth: 3) == "Do…")
        #expect(TerminalText.truncate("Docs", toWidth: 1) == "…")
        #expect(TerminalText.truncate("Docs", toWidth: 0) == "")
        // Wide characters are never split: "日本" is 4 cells, plus the ellipsis.
        #expect(TerminalText.truncate("日本語のタブ", toWidth: 6) == "日本…")
        #expect(TerminalText.width(TerminalText.truncate("日本語のタブ", toWidth: 6)) == 5)
        #expect(TerminalText.truncate("e\u{301}e\u{301}e\u{301}", toWidth: 2) == "e\u{301}…")
        for w in 0..<15 {
            #expect(TerminalText.width(TerminalText.truncate("a日b本c🚀d語e", toWidth: w)) <= w)
            #expect(TerminalText.width(TerminalText.fit("a日b本c🚀d語e", toWidth: w)) == w)
        }
    }
}
