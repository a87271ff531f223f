/// A small deterministic random number generator for seeded test runs: SplitMix64 (Steele, Lea and
/// Flood, "Fast splittable pseudorandom number generators", 2014).
///
/// The same seed gives the same sequence on every run and every platform (the arithmetic is fixed
/// width and wrapping), so a failing run is reproduced from the seed it prints. Not for anything
/// but tests: the sequence is predictable by design. The bench's own copy (`BenchRandom` in
/// Sources/TabsyncBench/Workload.swift) is the same algorithm for the shipped load generator.
package struct SplitMix64: RandomNumberGenerator, Sendable {
    package private(set) var state: UInt64

    package init(seed: UInt64) {
        state = seed
    }

    package mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

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
