import Testing
import TabsyncCore

/// Inputs on which the `keys` fuzz target (Fuzz/Sources/fuzz-keys) found `PositionKey` breaking its
/// guarantees, kept so the fixes stay fixed. Each names the fuzz input that found it.
@Suite struct PositionKeyFuzzRegressionTests {
    /// Fuzz input `A00000000000000000000000001 a0`: before the bare integer just after the smallest,
    /// `between(nil, _)` decremented to the smallest integer `A` + 26 zeros, which is no key (nothing
    /// could go before it). Rocicorp's fractional-indexing does the same; a fraction now follows it.
    @Test func beforeTheIntegerAfterTheSmallestIsAValidKey() {
        let b = "A" + String(repeating: "0", count: 25) + "1"
        #expect(PositionKey.isValid(b))
        let before = PositionKey.between(nil, b)
        #expect(PositionKey.isValid(before))
        #expect(PositionKey.less(before, b))
        #expect(before == "A" + String(repeating: "0", count: 26) + "V")
        // And the open end before that still exists.
        let first = PositionKey.between(nil, before)
        #expect(PositionKey.isValid(first) && PositionKey.less(first, before))
    }
}
