import PropertyBased
import Testing
import TabsyncCore
import TabsyncTestSupport

/// Property tests of `PositionKey`: validity, strict betweenness with either end open, and how long
/// keys get (docs/design.md, "Position keys"; issue 3 item 3).
@Suite struct PositionKeyPropertyTests {
    /// A generator of random valid ordered pairs.
    static let pairs = Generator<(String, String), Shrink.None<(String, String)>> { rng in
        KeyGen.orderedPair(using: &rng)
    }

    /// A generator of single random well-formed keys.
    static let keys = Generator<String, Shrink.None<String>> { rng in
        KeyGen.wellFormed(using: &rng, maxFraction: 8)
    }

    @Test func betweenIsValidAndStrictlyBetweenForRandomWellFormedPairs() async {
        await propertyCheck(count: 3_000, input: Self.pairs) { pair in
            let (a, b) = pair
            let k = PositionKey.between(a, b)
            #expect(PositionKey.isValid(k), "between(\(a), \(b)) = \(k) is not valid")
            #expect(PositionKey.less(a, k) && PositionKey.less(k, b), "between(\(a), \(b)) = \(k) is not strictly between")
        }
    }

    @Test func betweenWithAnOpenEndIsValidAndOnTheRightSide() async {
        await propertyCheck(count: 2_000, input: Self.keys) { key in
            #expect(PositionKey.isValid(key))
            let after = PositionKey.between(key, nil)
            #expect(PositionKey.isValid(after) && PositionKey.less(key, after), "between(\(key), nil) = \(after)")
            let before = PositionKey.between(nil, key)
            #expect(PositionKey.isValid(before) && PositionKey.less(before, key), "between(nil, \(key)) = \(before)")
        }
        #expect(PositionKey.between(nil, nil) == PositionKey.first)
    }

    @Test func randomWalksOfBetweenStayValidAndStrictlyOrdered() async {
        let walks = Generator<UInt64, Shrink.None<UInt64>> { rng in rng.next() }
        await propertyCheck(count: 300, input: walks) { seed in
            var rng = SplitMix64(seed: seed)
            var list: [String] = rng.chance(0.5) ? PositionKey.keys(count: rng.int(0...4)) : []
            let favourite = rng.int(0...3)
            for _ in 0..<rng.int(1...120) {
                let gap = rng.chance(0.4) ? min(favourite, list.count) : rng.int(0...list.count)
                let a = gap > 0 ? list[gap - 1] : nil
                let b = gap < list.count ? list[gap] : nil
                let k = PositionKey.between(a, b)
                guard PositionKey.isValid(k), a.map({ PositionKey.less($0, k) }) ?? true,
                    b.map({ PositionKey.less(k, $0) }) ?? true
                else {
                    Issue.record("walk seed \(seed): between(\(a ?? "nil"), \(b ?? "nil")) = \(k)")
                    return
                }
                list.insert(k, at: gap)
            }
            #expect(zip(list, list.dropFirst()).allSatisfy { PositionKey.less($0, $1) })
        }
    }

    @Test func malformedKeysAreInvalid() async {
        await propertyCheck(count: 1_000, input: Self.keys) { key in
            // A fraction ending in 0 is not a key.
            #expect(!PositionKey.isValid(key + "0"), "\(key)0 accepted")
            // A char outside the digits (and an integer part cut short) is not a key.
            #expect(!PositionKey.isValid(key + "-"), "\(key)- accepted")
            #expect(!PositionKey.isValid(key + "~"), "\(key)~ accepted")
            let head = key.first!
            let intLength = KeyGen.integerLength(head: head)
            #expect(!PositionKey.isValid(String(key.prefix(intLength - 1))), "\(key.prefix(intLength - 1)) accepted")
        }
        #expect(!PositionKey.isValid(""))
        #expect(!PositionKey.isValid("0"))
        #expect(!PositionKey.isValid("a"))
        #expect(!PositionKey.isValid("A" + String(repeating: "0", count: 26)))
        #expect(PositionKey.isValid("A" + String(repeating: "0", count: 26) + "1"))
    }

    @Test func tenThousandAppendsKeepEveryKeyWithinEightBytes() {
        var last: String? = nil
        var appended: [String] = []
        for _ in 0..<10_000 {
            let k = PositionKey.between(last, nil)
            #expect(k.utf8.count <= 8, "append after \(last ?? "nil") gave \(k)")
            if let last { #expect(PositionKey.less(last, k)) }
            appended.append(k)
            last = k
        }
        #expect(PositionKey.keys(count: 10_000) == appended)
        // Prepends stay short too.
        var first: String? = nil
        for _ in 0..<10_000 {
            let k = PositionKey.between(nil, first)
            #expect(k.utf8.count <= 8, "prepend before \(first ?? "nil") gave \(k)")
            first = k
        }
    }

    /// Inserting over and over into one gap (always just after the previous insert, or always just
    /// before it) adds at most one byte per five inserts over the longer neighbour.
    @Test func repeatedInsertsIntoOneGapGrowAtMostOneBytePerFiveInserts() async {
        await propertyCheck(count: 200, input: Self.pairs, Gen.bool, Gen.int(in: 1...160)) { pair, towardsUpper, inserts in
            let (a, b) = pair
            let base = max(a.utf8.count, b.utf8.count)
            var lo = a
            var hi = b
            for n in 1...inserts {
                let k = PositionKey.between(lo, hi)
                let allowed = base + (n + 4) / 5
                guard PositionKey.less(lo, k), PositionKey.less(k, hi), k.utf8.count <= allowed else {
                    Issue.record("insert \(n) between \(a) and \(b): \(k) (\(k.utf8.count) bytes, allowed \(allowed))")
                    return
                }
                if towardsUpper { lo = k } else { hi = k }
            }
        }
    }

    @Test func fiveInsertsTowardTheUpperNeighbourAddExactlyOneByte() {
        // The worst direction of the algorithm, measured: a0V a0l a0t a0x a0z, then a0zV.
        var lo = "a0"
        var lengths: [Int] = []
        for _ in 0..<20 {
            lo = PositionKey.between(lo, "a1")
            lengths.append(lo.utf8.count)
        }
        #expect(lengths == [3, 3, 3, 3, 3, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 6, 6, 6, 6, 6])
    }
}
