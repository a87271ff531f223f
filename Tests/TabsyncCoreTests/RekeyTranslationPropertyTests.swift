import PropertyBased
import Testing
import TabsyncCore
import TabsyncTestSupport

/// Rule 7's translation: a key computed before a rekey keeps its neighbours through it
/// (`RekeyRecord.translate`), for random key lists, random rekeys and random keys.
@Suite struct RekeyTranslationPropertyTests {
    /// One rekey's old and new keys (both ascending, same count) and keys to translate through it.
    struct Case: Sendable, CustomTestStringConvertible {
        var oldKeys: [String]
        var newKeys: [String]
        var probes: [String]
        var testDescription: String { "old \(oldKeys) new \(newKeys) probes \(probes)" }
    }

    /// Ascending distinct keys, from a random walk of `between` or from random well-formed keys.
    static func ascendingKeys<R: RandomNumberGenerator>(count: Int, using rng: inout R) -> [String] {
        if rng.chance(0.5) {
            var keys = Set<String>()
            while keys.count < count { keys.insert(KeyGen.wellFormed(using: &rng)) }
            return keys.sorted(by: PositionKey.less)
        }
        var keys = KeyGen.walk(steps: count, using: &rng)
        while keys.count > count { keys.remove(at: rng.int(0...(keys.count - 1))) }
        return keys
    }

    /// Keys to translate: old keys themselves, keys between two adjacent old keys, before the first,
    /// after the last, and random well-formed keys.
    static func probes<R: RandomNumberGenerator>(around old: [String], using rng: inout R) -> [String] {
        (0..<12).map { _ in
            switch rng.int(0...4) {
            case 0 where !old.isEmpty: return rng.pick(old)
            case 1, 2:
                let gap = rng.int(0...old.count)
                return PositionKey.between(gap > 0 ? old[gap - 1] : nil, gap < old.count ? old[gap] : nil)
            default: return KeyGen.wellFormed(using: &rng)
            }
        }
    }

    static let cases = Generator<Case, Shrink.None<Case>> { rng in
        let count = rng.int(0...40)
        let old = ascendingKeys(count: count, using: &rng)
        // What a server rekey makes, or any other ascending keys.
        let new = rng.chance(0.6) ? PositionKey.keys(count: count) : ascendingKeys(count: count, using: &rng)
        return Case(oldKeys: old, newKeys: new, probes: probes(around: old, using: &rng))
    }

    /// How many of `keys` (ascending) are less than `key`.
    static func rank(_ key: String, in keys: [String]) -> Int {
        keys.firstIndex(where: { !PositionKey.less($0, key) }) ?? keys.count
    }

    /// Checks that `translated` sits among `new` where `key` sat among `old`; nil when it does.
    static func neighbourProblem(_ key: String, _ translated: String, old: [String], new: [String]) -> String? {
        guard PositionKey.isValid(translated) else { return "\(key) -> \(translated) is not valid" }
        if let j = old.firstIndex(of: key) {
            return translated == new[j] ? nil : "\(key) is old key #\(j) but became \(translated), not \(new[j])"
        }
        let before = rank(key, in: old)
        let after = rank(translated, in: new)
        if after != before || new.contains(translated) {
            return "\(key) sat after \(before) old keys; \(translated) sits after \(after) new keys"
        }
        return nil
    }

    @Test func translationNeverChangesWhichNeighboursAKeySatBetween() async {
        await propertyCheck(count: 1_500, input: Self.cases) { c in
            let record = RekeyRecord(version: 7, oldKeys: c.oldKeys, newKeys: c.newKeys)
            for key in c.probes {
                let problem = Self.neighbourProblem(key, record.translate(key), old: c.oldKeys, new: c.newKeys)
                #expect(problem == nil, "\(problem ?? "")")
            }
        }
    }

    /// Through several rekeys in a row (as rule 7 translates "through each rekey since baseVersion").
    @Test func translationThroughAChainOfRekeysKeepsNeighbours() async {
        let chains = Generator<UInt64, Shrink.None<UInt64>> { rng in rng.next() }
        await propertyCheck(count: 300, input: chains) { seed in
            var rng = SplitMix64(seed: seed)
            var keys = Self.ascendingKeys(count: rng.int(1...30), using: &rng)
            var probes = Self.probes(around: keys, using: &rng)
            for step in 0..<rng.int(2...4) {
                let new = rng.chance(0.5) ? PositionKey.keys(count: keys.count) : Self.ascendingKeys(count: keys.count, using: &rng)
                let record = RekeyRecord(version: UInt64(step + 1), oldKeys: keys, newKeys: new)
                for i in probes.indices {
                    let t = record.translate(probes[i])
                    if let problem = Self.neighbourProblem(probes[i], t, old: keys, new: new) {
                        Issue.record("seed \(seed) step \(step): \(problem)")
                        return
                    }
                    probes[i] = t
                }
                keys = new
            }
        }
    }

    @Test func translationThroughARekeyOfNoTabsGivesTheFirstKey() {
        let record = RekeyRecord(version: 1, oldKeys: [], newKeys: [])
        #expect(record.translate("Zz") == PositionKey.first)
    }
}
