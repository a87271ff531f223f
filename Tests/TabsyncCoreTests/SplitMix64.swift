/// A small deterministic random number generator for seeded test runs: SplitMix64 (Steele, Lea and
/// Flood, "Fast splittable pseudorandom number generators", 2014).
///
/// The same seed gives the same sequence on every run with the same standard library, so a failing
/// simulation run is reproduced from the seed it prints. Not for anything but tests.
struct SplitMix64: RandomNumberGenerator, Sendable {
    private(set) var state: UInt64

    init(seed: UInt64) {
        state = seed
    }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

extension RandomNumberGenerator {
    /// True with probability `p`.
    mutating func chance(_ p: Double) -> Bool {
        Double.random(in: 0..<1, using: &self) < p
    }

    /// A uniform integer in `range`.
    mutating func int(_ range: ClosedRange<Int>) -> Int {
        Int.random(in: range, using: &self)
    }

    /// A uniform element of a non-empty collection.
    mutating func pick<C: Collection>(_ c: C) -> C.Element {
        c.randomElement(using: &self)!
    }

    /// An index chosen with probability proportional to its weight (weights ≥ 0, sum > 0).
    mutating func weighted(_ weights: [Int]) -> Int {
        var r = Int.random(in: 0..<weights.reduce(0, +), using: &self)
        for (i, w) in weights.enumerated() {
            if r < w { return i }
            r -= w
        }
        return weights.count - 1
    }
}
