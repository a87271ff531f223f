/// Fractional position keys in the format of Rocicorp's fractional-indexing library.
///
/// A key is an *integer part* — a head char giving its length (`a`…`z`: 2…27 chars, non-negative;
/// `A`…`Z`: 27…2 chars, negative) followed by that many base-62 digits — and an optional *fraction*
/// of base-62 digits that does not end in `0`. Digits are `0-9A-Za-z` in ASCII order, so keys compare
/// bytewise (and Swift's `<` on these ASCII strings agrees). The smallest integer `A000…0` (26 zeros)
/// with no fraction is not a key: nothing could go before it.
///
/// Guarantees: for valid `a < b`, `between(a, b)` is valid and strictly between them; `between(a, nil)`
/// is after `a`, `between(nil, b)` before `b`; appending after `aN` gives `a(N+1)` (appends stay short).
/// Everything here is pure and deterministic.
public enum PositionKey {
    /// The key of the first tab of an empty list.
    public static let first = "a0"

    /// Longest key a client may submit (bytes); longer ones are `INVALID_ARGUMENT`.
    public static let maxSubmittedLength = 128
    /// Longest key the server stores; a longer one makes it rekey first (docs/design.md rule 7).
    public static let maxStoredLength = 64

    /// Whether `key` is a well-formed key (any length; callers apply the length limits).
    public static func isValid(_ key: String) -> Bool {
        isValid(Array(key.utf8))
    }

    /// A key strictly between `a` and `b` (`nil` = open end). Both must be valid and `a < b`.
    public static func between(_ a: String?, _ b: String?) -> String {
        let ka = a.map { Array($0.utf8) }
        let kb = b.map { Array($0.utf8) }
        precondition(ka.map(isValid) ?? true, "invalid key \(a!)")
        precondition(kb.map(isValid) ?? true, "invalid key \(b!)")
        if let ka, let kb { precondition(ka.lexicographicallyPrecedes(kb), "\(a!) is not before \(b!)") }
        return String(decoding: keyBetween(ka, kb), as: UTF8.self)
    }

    /// `count` ascending keys from `a0`, as appending them one by one gives (`a0`, `a1`, …): used by
    /// replace and rekey. 500 keys take at most 3 bytes each.
    public static func keys(count: Int) -> [String] {
        var result: [String] = []
        result.reserveCapacity(count)
        var last: [UInt8]? = nil
        for _ in 0..<count {
            let next = keyBetween(last, nil)
            result.append(String(decoding: next, as: UTF8.self))
            last = next
        }
        return result
    }

    /// Bytewise order of two keys.
    @inlinable
    public static func less(_ a: String, _ b: String) -> Bool {
        a.utf8.lexicographicallyPrecedes(b.utf8)
    }

    // MARK: - digits

    static let digits: [UInt8] = Array("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz".utf8)
    static let zero = UInt8(ascii: "0")
    static let smallestInteger: [UInt8] = [UInt8(ascii: "A")] + Array(repeating: zero, count: 26)

    /// The digit's value 0…61, or nil when `c` is not a base-62 digit.
    static func value(_ c: UInt8) -> Int? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): Int(c - UInt8(ascii: "0"))
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): Int(c - UInt8(ascii: "A")) + 10
        case UInt8(ascii: "a")...UInt8(ascii: "z"): Int(c - UInt8(ascii: "a")) + 36
        default: nil
        }
    }

    /// Length of the integer part that starts with `head`, or nil when `head` is no head.
    static func integerLength(head: UInt8) -> Int? {
        switch head {
        case UInt8(ascii: "a")...UInt8(ascii: "z"): Int(head - UInt8(ascii: "a")) + 2
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): Int(UInt8(ascii: "Z") - head) + 2
        default: nil
        }
    }

    static func isValid(_ key: [UInt8]) -> Bool {
        guard let head = key.first, let n = integerLength(head: head), key.count >= n else { return false }
        guard key.dropFirst().allSatisfy({ value($0) != nil }) else { return false }
        if key == smallestInteger { return false }
        if key.count > n && key.last == zero { return false }
        return true
    }

    // MARK: - the algorithm

    static func keyBetween(_ a: [UInt8]?, _ b: [UInt8]?) -> [UInt8] {
        switch (a, b) {
        case (nil, nil):
            return Array(first.utf8)
        case (nil, let b?):
            let ib = Array(b.prefix(integerLength(head: b[0])!))
            let fb = Array(b.dropFirst(ib.count))
            if ib == smallestInteger { return ib + midpoint([], fb) }
            if ib.count < b.count { return ib }
            // b is a bare integer: the integer before it (exists, since b is not the smallest). When
            // that is the smallest integer, which alone is no key, a fraction goes after it.
            let before = decrement(ib)!
            return before == smallestInteger ? before + midpoint([], nil) : before
        case (let a?, nil):
            let ia = Array(a.prefix(integerLength(head: a[0])!))
            let fa = Array(a.dropFirst(ia.count))
            if let next = increment(ia) { return next }
            return ia + midpoint(fa, nil)
        case (let a?, let b?):
            let ia = Array(a.prefix(integerLength(head: a[0])!))
            let fa = Array(a.dropFirst(ia.count))
            let ib = Array(b.prefix(integerLength(head: b[0])!))
            let fb = Array(b.dropFirst(ib.count))
            if ia == ib { return ia + midpoint(fa, fb) }
            // ia < ib: the next integer if it is still before b, else extend a's fraction.
            if let next = increment(ia), next.lexicographicallyPrecedes(b) { return next }
            return ia + midpoint(fa, nil)
        }
    }

    /// A fraction strictly between fractions `a` and `b` (`nil` = 1), neither ending in `0`, `a < b`.
    static func midpoint(_ a: [UInt8], _ b: [UInt8]?) -> [UInt8] {
        var prefix: [UInt8] = []
        var a = a[...]
        var b = b?[...]
        if let bb = b {
            // Drop the common prefix, reading a past its end as zeros.
            var n = 0
            while n < bb.count, (n < a.count ? a[a.startIndex + n] : zero) == bb[bb.startIndex + n] { n += 1 }
            if n > 0 {
                prefix.append(contentsOf: bb.prefix(n))
                a = a.count > n ? a.dropFirst(n) : []
                b = bb.dropFirst(n)
            }
        }
        let digitA = a.first.map { value($0)! } ?? 0
        let digitB = b.map { $0.first.map { value($0)! } ?? 0 } ?? digits.count
        if digitB - digitA > 1 {
            let mid = (digitA + digitB + 1) / 2 // round half up, as Math.round
            return prefix + [digits[mid]]
        }
        if let bb = b, bb.count > 1 {
            return prefix + [bb.first!]
        }
        return prefix + [digits[digitA]] + midpoint(Array(a.dropFirst()), nil)
    }

    /// The next integer part, or nil past the largest (`z` + 26 × `z`).
    static func increment(_ x: [UInt8]) -> [UInt8]? {
        let head = x[0]
        var digs = Array(x.dropFirst())
        var carry = true
        var i = digs.count - 1
        while carry && i >= 0 {
            let d = value(digs[i])! + 1
            if d == digits.count { digs[i] = zero } else { digs[i] = digits[d]; carry = false }
            i -= 1
        }
        if !carry { return [head] + digs }
        if head == UInt8(ascii: "Z") { return [UInt8(ascii: "a"), zero] }
        if head == UInt8(ascii: "z") { return nil }
        let h = head + 1
        if h > UInt8(ascii: "a") { digs.append(zero) } else { digs.removeLast() }
        return [h] + digs
    }

    /// The previous integer part, or nil before the smallest.
    static func decrement(_ x: [UInt8]) -> [UInt8]? {
        let head = x[0]
        var digs = Array(x.dropFirst())
        var borrow = true
        var i = digs.count - 1
        while borrow && i >= 0 {
            let d = value(digs[i])! - 1
            if d == -1 { digs[i] = digits[digits.count - 1] } else { digs[i] = digits[d]; borrow = false }
            i -= 1
        }
        if !borrow { return [head] + digs }
        if head == UInt8(ascii: "a") { return [UInt8(ascii: "Z"), digits[digits.count - 1]] }
        if head == UInt8(ascii: "A") { return nil }
        let h = head - 1
        if h < UInt8(ascii: "Z") { digs.append(digits[digits.count - 1]) } else { digs.removeLast() }
        return [h] + digs
    }
}
