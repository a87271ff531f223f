import Foundation

/// The churn bench's record of every Welcome (`--welcome-log`): one line `CLIENT UNIX_NANOS` each,
/// in the order received, for a script that restarts the server to tell when each client was back
/// (scripts/reconnect-storm).
///
/// Guarantees: a line is whole when it reaches the file (lines are buffered and written by
/// ``flush()``, which the churn tick calls every 5 ms, and at deinit); the time is the wall clock
/// (CLOCK_REALTIME), so another process can compare it with its own.
///
/// Thread rule: owned by the churn generator's thread.
final class WelcomeLog {
    private let file: UnsafeMutablePointer<FILE>
    private var buffer = ""

    /// Opens `path` for appending.
    /// - Throws: ``BenchError/cannotWrite(path:reason:)`` when it cannot be opened.
    init(path: String) throws(BenchError) {
        guard let file = fopen(path, "a") else {
            throw .cannotWrite(path: path, reason: String(cString: strerror(errno)))
        }
        self.file = file
    }

    deinit {
        flush()
        fclose(file)
    }

    /// Notes that `client` was welcomed now.
    func record(client: Int) {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        buffer += "\(client) \(UInt64(spec.tv_sec) * 1_000_000_000 + UInt64(spec.tv_nsec))\n"
    }

    /// Writes the lines recorded since the last flush.
    func flush() {
        guard !buffer.isEmpty else { return }
        fputs(buffer, file)
        fflush(file)
        buffer = ""
    }
}
