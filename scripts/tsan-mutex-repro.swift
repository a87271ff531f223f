// ThreadSanitizer cannot see Synchronization.Mutex on Linux (Swift 6.3): this program reports a
// "Swift access race" inside withLock although every access holds the lock; the same program with
// NSLock reports nothing. Run: swiftc -sanitize=thread -O scripts/tsan-mutex-repro.swift -o /tmp/m && /tmp/m
// Why: a contended Mutex is handed over by the kernel (priority-inheritance futexes, called from the
// uninstrumented Synchronization library), so ThreadSanitizer sees no order between the two holders.
// The project therefore locks with TabsyncLock's `Lock` (Sources/TabsyncLock/Lock.swift): this Mutex
// plus ThreadSanitizer annotations; Tests/TabsyncLockTests runs this same program on it.
import Synchronization
import Foundation
final class Box: Sendable { let m = Mutex<[String: Int]>([:]) }
let box = Box()
let group = DispatchGroup()
for t in 0..<4 {
    DispatchQueue.global().async(group: group) {
        for i in 0..<20000 { box.m.withLock { $0["k\(i % 10)", default: 0] += t } }
    }
}
group.wait()
print(box.m.withLock { $0.count })
