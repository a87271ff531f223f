import Testing
import TabsyncCore

/// `PositionKey` gives exactly what Rocicorp's fractional-indexing gives, so clients in other languages
/// can use that library. The vectors are the base-62 cases of its own test suite
/// (rocicorp/fractional-indexing, `src/test.js`, the `test(a, b, exp)` calls), copied as data.
@Suite struct PositionKeyCompatibilityTests {
    struct Vector: Sendable, CustomTestStringConvertible {
        var a: String?
        var b: String?
        var expected: String
        var testDescription: String { "between(\(a ?? "nil"), \(b ?? "nil")) = \(expected)" }
    }

    static let vectors: [Vector] = [
        Vector(a: nil, b: nil, expected: "a0"),
        Vector(a: nil, b: "a0", expected: "Zz"),
        Vector(a: nil, b: "Zz", expected: "Zy"),
        Vector(a: "a0", b: nil, expected: "a1"),
        Vector(a: "a1", b: nil, expected: "a2"),
        Vector(a: "a0", b: "a1", expected: "a0V"),
        Vector(a: "a1", b: "a2", expected: "a1V"),
        Vector(a: "a0V", b: "a1", expected: "a0l"),
        Vector(a: "Zz", b: "a0", expected: "ZzV"),
        Vector(a: "Zz", b: "a1", expected: "a0"),
        Vector(a: nil, b: "Y00", expected: "Xzzz"),
        Vector(a: "bzz", b: nil, expected: "c000"),
        Vector(a: "a0", b: "a0V", expected: "a0G"),
        Vector(a: "a0", b: "a0G", expected: "a08"),
        Vector(a: "b125", b: "b129", expected: "b127"),
        Vector(a: "a0", b: "a1V", expected: "a1"),
        Vector(a: "Zz", b: "a01", expected: "a0"),
        Vector(a: nil, b: "a0V", expected: "a0"),
        Vector(a: nil, b: "b999", expected: "b99"),
        Vector(a: nil, b: "A000000000000000000000000001", expected: "A000000000000000000000000000V"),
        Vector(a: "zzzzzzzzzzzzzzzzzzzzzzzzzzy", b: nil, expected: "zzzzzzzzzzzzzzzzzzzzzzzzzzz"),
        Vector(a: "zzzzzzzzzzzzzzzzzzzzzzzzzzz", b: nil, expected: "zzzzzzzzzzzzzzzzzzzzzzzzzzzV"),
    ]

    @Test(arguments: vectors)
    func betweenMatchesFractionalIndexing(_ v: Vector) {
        #expect(PositionKey.between(v.a, v.b) == v.expected)
    }

    /// The keys that suite expects to be refused ("invalid order key", "invalid order key head").
    @Test(arguments: ["A00000000000000000000000000", "a00", "0", "1"])
    func keysThatFractionalIndexingRefusesAreInvalid(_ key: String) {
        #expect(!PositionKey.isValid(key))
    }

    /// Its `generateNKeysBetween(null, null, n)` appends one by one, as `keys(count:)` does; with the
    /// default digits the first keys are a0, a1, … az, then b00.
    @Test func keysCountAppendsLikeGenerateNKeysBetween() {
        let keys = PositionKey.keys(count: 63)
        #expect(keys.prefix(3) == ["a0", "a1", "a2"])
        #expect(keys[61] == "az")
        #expect(keys[62] == "b00")
    }
}
