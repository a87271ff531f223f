/// A small deterministic random number generator: SplitMix64 (Steele, Lea and Flood, "Fast
/// splittable pseudorandom number generators", 2014). The project's one copy: the server core's
/// jitter, the load generator's workloads and the tests' seeded runs draw from it.
///
/// Guarantees: the same seed gives the same sequence on every run and every platform (the
/// arithmetic is fixed width and wrapping), so a run is replayed from the seed it prints. Not for
/// secrets: the sequence is predictable by design.
public struct SplitMix64: RandomNumberGenerator, Sendable {
    public private(set) var state: UInt64

    public init(seed: UInt64) {
        state = seed
    }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
