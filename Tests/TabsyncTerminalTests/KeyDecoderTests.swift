import TabsyncCore
import TabsyncTestSupport
import Testing
@testable import TabsyncTerminal

@Suite struct KeyDecoderTests {
    func decode(_ bytes: [UInt8]) -> [Key] {
        var d = KeyDecoder()
        return d.feed(bytes)
    }

    func decode(_ s: String) -> [Key] { decode(Array(s.utf8)) }

    @Test func decoderReadsArrowsInBothCursorModes() {
        #expect(decode("\u{1B}[A\u{1B}[B\u{1B}[C\u{1B}[D") == [.up, .down, .right, .left])
        #expect(decode("\u{1B}OA\u{1B}OB\u{1B}OC\u{1B}OD") == [.up, .down, .right, .left])
    }

    @Test func decoderReadsShiftArrowsAsXtermAndTmuxSendThem() {
        #expect(decode("\u{1B}[1;2C\u{1B}[1;2D\u{1B}[1;2A\u{1B}[1;2B") == [.shiftRight, .shiftLeft, .shiftUp, .shiftDown])
        // Ctrl+arrow (modifier 5) is not Shift: plain arrow.
        #expect(decode("\u{1B}[1;5C") == [.right])
    }

    @Test func decoderReadsEditingKeys() {
        #expect(decode("\u{1B}[H\u{1B}[F\u{1B}[1~\u{1B}[4~\u{1B}[3~\u{1B}[5~\u{1B}[6~")
            == [.home, .end, .home, .end, .delete, .pageUp, .pageDown])
        #expect(decode([0x0D, 0x0A, 0x7F, 0x08, 0x09]) == [.enter, .enter, .backspace, .backspace, .tab])
        #expect(decode([0x03, 0x04]) == [.ctrl("c"), .ctrl("d")])
    }

    @Test func decoderReadsLettersDigitsAndUTF8() {
        #expect(decode("hlHL19nxrbkeofq?") == "hlHL19nxrbkeofq?".map { .char($0) })
        #expect(decode("日é🚀") == [.char("日"), .char("é"), .char("🚀")])
    }

    @Test func loneEscapeAtTheEndOfAChunkIsTheEscapeKey() {
        #expect(decode([0x1B]) == [.escape])
        #expect(decode("\u{1B}x") == [.escape, .char("x")])
    }

    @Test func sequencesSplitAcrossChunksAreJoined() {
        var d = KeyDecoder()
        #expect(d.feed(Array("\u{1B}[1;".utf8)) == [])
        #expect(d.hasPending)
        #expect(d.feed(Array("2C".utf8)) == [.shiftRight])
        let rocket = Array("🚀".utf8)
        #expect(d.feed(rocket[0..<2]) == [])
        #expect(d.feed(rocket[2...]) == [.char("🚀")])
        #expect(!d.hasPending)
    }

    @Test func decoderNeverYieldsControlCharactersAsText() {
        // C1 controls encoded in UTF-8, stray continuation bytes and invalid leads are dropped.
        #expect(decode([0xC2, 0x9B, 0x41]) == [.char("A")])
        #expect(decode([0x80, 0xFF, 0x41]) == [.char("A")])
        var rng = SplitMix64(seed: 7)
        var d = KeyDecoder()
        for _ in 0..<500 {
            let bytes = (0..<Int(rng.next() % 16)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            for key in d.feed(bytes) {
                if case .char(let c) = key { #expect(TerminalText.isClean(String(c))) }
            }
        }
    }

    @Test func unknownSequencesAreConsumedWhole() {
        #expect(decode("\u{1B}[200~x") == [.unknown, .char("x")])
        #expect(decode("\u{1B}[?1;2cq") == [.unknown, .char("q")])
    }
}
