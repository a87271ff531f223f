import TabsyncCore
import TabsyncTestSupport

/// Random position keys for the property tests, built from the format itself (not from
/// `PositionKey.between`) so the tests do not only see keys the implementation likes to make.
///
/// Digits are biased towards the edges (`0`, `1`, `y`, `z`) and heads towards short integer parts,
/// because carries, borrows and shared prefixes are where key arithmetic goes wrong.
enum KeyGen {
    static let digits = Array("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
    static let heads = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")

    /// One base-62 digit, edge digits more often than the others.
    static func digit<R: RandomNumberGenerator>(using rng: inout R, nonZero: Bool = false) -> Character {
        let edges: [Character] = nonZero ? ["1", "2", "y", "z", "V"] : ["0", "0", "1", "y", "z", "V"]
        if rng.chance(0.5) { return rng.pick(edges) }
        return rng.pick(nonZero ? digits.dropFirst() : digits[...])
    }

    /// A head char: mostly `a`, `b`, `Z`, `Y` (integer parts of 2–3 chars), sometimes any, including
    /// the extremes `A` and `z` (27 chars).
    static func head<R: RandomNumberGenerator>(using rng: inout R) -> Character {
        switch rng.int(0...9) {
        case 0...5: rng.pick(["a", "a", "b", "Z", "Z", "Y"])
        case 6: rng.pick(["A", "z"])
        default: rng.pick(heads)
        }
    }

    /// The number of chars of the integer part starting with `head` (the head included).
    static func integerLength(head: Character) -> Int {
        let v = Int(head.asciiValue!)
        return v >= 97 ? v - 97 + 2 : 90 - v + 2
    }

    /// A random integer part: a head and its digits (never the smallest integer alone: callers
    /// add a fraction or use ``wellFormed(using:maxFraction:)``).
    static func integerPart<R: RandomNumberGenerator>(using rng: inout R) -> String {
        let h = head(using: &rng)
        var s = String(h)
        for _ in 1..<integerLength(head: h) { s.append(digit(using: &rng)) }
        return s
    }

    /// A random fraction of `count` digits that does not end in `0` (empty when `count` is 0).
    static func fraction<R: RandomNumberGenerator>(count: Int, using rng: inout R) -> String {
        guard count > 0 else { return "" }
        var s = ""
        for _ in 1..<count { s.append(digit(using: &rng)) }
        s.append(digit(using: &rng, nonZero: true))
        return s
    }

    /// A random well-formed key: integer part plus a fraction of 0…`maxFraction` digits.
    static func wellFormed<R: RandomNumberGenerator>(using rng: inout R, maxFraction: Int = 6) -> String {
        while true {
            let key = integerPart(using: &rng) + fraction(count: rng.int(0...maxFraction), using: &rng)
            if PositionKey.isValid(key) { return key } // only the bare smallest integer is refused
        }
    }

    /// A random pair `a < b` of valid keys. Half the pairs are close: a shared integer part, one key
    /// a prefix of the other, or fractions sharing a long prefix.
    static func orderedPair<R: RandomNumberGenerator>(using rng: inout R) -> (String, String) {
        while true {
            var a: String
            var b: String
            switch rng.int(0...4) {
            case 0, 1:
                a = wellFormed(using: &rng)
                b = wellFormed(using: &rng)
            case 2:
                // Same integer part, different fractions.
                let i = integerPart(using: &rng)
                a = i + fraction(count: rng.int(0...5), using: &rng)
                b = i + fraction(count: rng.int(0...5), using: &rng)
            case 3:
                // b extends a: a is a prefix of b.
                a = wellFormed(using: &rng)
                b = a + String(repeating: "0", count: rng.int(0...3)) + fraction(count: rng.int(1...4), using: &rng)
            default:
                // A long shared fraction prefix, then different tails.
                let p = integerPart(using: &rng) + String((0..<rng.int(1...8)).map { _ in digit(using: &rng) })
                a = p + fraction(count: rng.int(0...3), using: &rng)
                b = p + fraction(count: rng.int(0...3), using: &rng)
            }
            if PositionKey.less(b, a) { swap(&a, &b) }
            if a != b && PositionKey.isValid(a) && PositionKey.isValid(b) { return (a, b) }
        }
    }

    /// Ascending distinct keys made by a random walk of `between` calls on random gaps (sometimes
    /// the same gap over and over), starting from `keys(count:)` or from nothing.
    static func walk<R: RandomNumberGenerator>(steps: Int, using rng: inout R) -> [String] {
        var list = rng.chance(0.5) ? PositionKey.keys(count: rng.int(0...5)) : []
        let favourite = rng.int(0...3)
        for _ in 0..<steps {
            let gap = rng.chance(0.3) ? min(favourite, list.count) : rng.int(0...list.count)
            let key = PositionKey.between(gap > 0 ? list[gap - 1] : nil, gap < list.count ? list[gap] : nil)
            list.insert(key, at: gap)
        }
        return list
    }
}
