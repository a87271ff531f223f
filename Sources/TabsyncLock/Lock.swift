import CThreadSanitizer
import Synchronization

/// A `Synchronization.Mutex` that ThreadSanitizer can see: the same `init` and `withLock`, with each
/// critical section announced to ThreadSanitizer as an acquire (after locking) and a release (before
/// unlocking) of the mutex's address. Use it wherever a `Mutex` would do.
///
/// Why: on Linux, `Mutex` hands a contended lock from thread to thread inside the kernel (priority
/// inheritance futexes, called from the uninstrumented Synchronization library), so ThreadSanitizer
/// sees no order between two critical sections and reports races inside `withLock` that cannot
/// happen (`scripts/tsan-mutex-repro.swift`). The annotations give it that order back.
///
/// Guarantees: `Mutex`'s, unchanged: mutual exclusion; not reentrant (`withLock` from inside `body`
/// deadlocks). Like a `Mutex`, keep it in a `let` (a class property or a global) and never move it:
/// ThreadSanitizer names the lock by its address. ThreadSanitizer sees ordering only, not a mutex:
/// it reports no lock-order inversions between these locks.
///
/// Cost: outside a `-sanitize=thread` build the annotations are weak symbols left null, so each
/// `withLock` adds two well-predicted branches to `Mutex`'s. Uncontended `withLock` in an `-O`
/// whole-module build, median of 15 runs of 10 million: 6.1 ns for `Mutex` and for this lock alike;
/// 8 to 12 ns for a `pthread_mutex_t` lock, which is why this wraps `Mutex` rather than replacing it.
/// A compile-time switch to a pthread lock in sanitizer builds was the other choice: two lock
/// implementations, and a flag every ThreadSanitizer build would have to remember.
public struct Lock<Value: ~Copyable>: ~Copyable {
    @usableFromInline let mutex: Mutex<Value>

    @inlinable
    public init(_ initialValue: consuming sending Value) {
        mutex = Mutex(initialValue)
    }

    /// Runs `body` with exclusive access to the value; other threads' `withLock` wait meanwhile.
    @inlinable
    public borrowing func withLock<Result: ~Copyable, E: Error>(
        _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result {
        // Only a name for ThreadSanitizer, never dereferenced: the mutex's own address, which is
        // stable for as long as the lock is not moved (taking it is no access ThreadSanitizer checks).
        let name = withUnsafePointer(to: mutex) { UnsafeMutableRawPointer(mutating: $0) }
        return try mutex.withLock { (value: inout sending Value) throws(E) -> sending Result in
            ctsan_acquire(name)
            defer { ctsan_release(name) }
            return try body(&value)
        }
    }
}

extension Lock: Sendable where Value: ~Copyable {}
