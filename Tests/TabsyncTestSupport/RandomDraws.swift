import TabsyncCore

/// Draws for seeded test runs, on any generator (the tests' is ``SplitMix64`` from TabsyncCore: the
/// same seed gives the same run, so a failing run is reproduced from the seed it prints).
extension RandomNumberGenerator {
    /// True with probability `p`.
    package mutating func chance(_ p: Double) -> Bool {
        Double.random(in: 0..<1, using: &self) < p
    }

    /// A uniform integer in `range`.
    package mutating func int(_ range: ClosedRange<Int>) -> Int {
        Int.random(in: range, using: &self)
    }

    /// A uniform element of a non-empty collection.
    package mutating func pick<C: Collection>(_ c: C) -> C.Element {
        c.randomElement(using: &self)!
    }

    /// An index chosen with probability proportional to its weight (weights ≥ 0, sum > 0).
    package mutating func weighted(_ weights: [Int]) -> Int {
        var r = Int.random(in: 0..<weights.reduce(0, +), using: &self)
        for (i, w) in weights.enumerated() {
            if r < w { return i }
            r -= w
        }
        return weights.count - 1
    }
}
