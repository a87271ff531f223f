import Foundation
import TabsyncLock
import TabsyncTestSupport
import Testing

/// ``Lock``: `Mutex`'s exclusion, seen by ThreadSanitizer. Under `scripts/sanitize thread` these
/// tests are the check that the annotations reach the runtime: a report inside them means
/// ThreadSanitizer lost sight of the lock (`scripts/tsan-mutex-repro.swift` is the same program
/// on a bare `Mutex`, and is reported).
@Suite("Lock")
struct LockTests {
    private struct Tally {
        var count = 0
        var inside = false
        var overlaps = 0
        var keys: [String: Int] = [:]
    }

    private final class Shared: Sendable {
        let tally = Lock(Tally())
    }

    /// Four threads update one value 20,000 times each, contending all the while: no update is
    /// lost and no two critical sections overlap.
    @Test func writersOnSeveralThreadsNeverOverlap() {
        let shared = Shared()
        let threads = 4
        let rounds = 20_000
        let done = DispatchGroup()
        for t in 0..<threads {
            done.enter()
            Thread {
                for i in 0..<rounds {
                    shared.tally.withLock { tally in
                        if tally.inside { tally.overlaps += 1 }
                        tally.inside = true
                        tally.count += 1
                        tally.keys["k\(i % 10)", default: 0] += t
                        tally.inside = false
                    }
                }
                done.leave()
            }.start()
        }
        let finished = done.wait(timeout: .now() + scaled(.seconds(60)).seconds) == .success
        #expect(finished, "the writers did not finish in time")
        let tally = shared.tally.withLock { $0 }
        #expect(tally.count == threads * rounds)
        #expect(tally.overlaps == 0)
        #expect(tally.keys.values.reduce(0, +) == (0..<threads).reduce(0, +) * rounds)
    }

    private struct Refusal: Error, Equatable {}

    /// An error thrown by the body reaches the caller with its type; the lock is released and what
    /// the body changed before throwing is kept.
    @Test func anErrorThrownInsideReleasesTheLock() {
        let shared = Shared()
        #expect(throws: Refusal()) {
            try shared.tally.withLock { (tally) throws(Refusal) in
                tally.count = 7
                throw Refusal()
            }
        }
        #expect(shared.tally.withLock { $0.count } == 7)
    }
}
