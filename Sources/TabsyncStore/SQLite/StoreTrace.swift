#if canImport(Glibc)
import Glibc
#endif
import Foundation
import TabsyncLock

/// A line-per-event trace of the SQLite store's commits and WAL checkpoints, appended to a file
/// (`tabsync-server --store-trace FILE`): the measurement behind the checkpoint policy.
///
/// Each line is `<ms since the store opened> <event> key=value …`:
/// - `commit records=R ops=O ms=T checkpoint_ms=C wal_frames=F`: one ``SQLiteStore/commit(_:)``,
///   its whole time on the store thread, the part of it a checkpoint took inside the commit (only
///   with ``SQLiteStore/Options/Checkpoint/inline``), and the WAL's frames after it.
/// - `checkpoint mode=passive|restart|truncate ms=T waited_ms=W wal_frames=F done_frames=D rc=N`:
///   one checkpoint of the background checkpointer; `waited_ms` is the time it waited for the
///   writer (restart and truncate pause commits: `ms` is how long).
///
/// Guarantees: lines from several threads never interleave (one `write` per line under a lock);
/// a trace that cannot be written is dropped silently (it never fails a commit).
final class StoreTrace: Sendable {
    private let fd: Lock<Int32>
    private let start = ContinuousClock.now

    /// Opens `path` for appending (created when missing); nil when it cannot be opened.
    init?(path: String) {
        let fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        guard fd >= 0 else { return nil }
        self.fd = Lock(fd)
    }

    deinit {
        fd.withLock { fd in
            if fd >= 0 { _ = Glibc.close(fd) }
            fd = -1
        }
    }

    /// Milliseconds since the trace started.
    func elapsedMilliseconds() -> Double { Self.milliseconds(ContinuousClock.now - start) }

    /// Appends `event` (without the timestamp and newline).
    func record(_ event: String) {
        let line = String(format: "%.3f ", elapsedMilliseconds()) + event + "\n"
        fd.withLock { fd in
            guard fd >= 0 else { return }
            var bytes = Array(line.utf8)
            _ = bytes.withUnsafeMutableBytes { write(fd, $0.baseAddress, $0.count) }
        }
    }

    static func milliseconds(_ duration: Duration) -> Double {
        let (seconds, attoseconds) = duration.components
        return Double(seconds) * 1_000 + Double(attoseconds) / 1e15
    }

    static func format(_ milliseconds: Double) -> String { String(format: "%.3f", milliseconds) }
}
