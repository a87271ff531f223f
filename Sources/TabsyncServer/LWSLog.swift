import CLibwebsockets
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Routes libwebsockets' own log lines to stderr, at most `linesPerSecond` a second.
///
/// lws 4.1.6 can log a line per failed `accept()` in a tight loop (EMFILE); past the budget lines
/// are counted and dropped, and one line says how many were dropped. The lws log level is process
/// wide, so this is too: the last ``install(verbose:)`` wins.
enum LWSLog {
    static let linesPerSecond = 20

    private struct Budget {
        var windowStart: UInt64 = 0
        var used = 0
        var dropped = 0
    }

    private static let budget = Mutex(Budget())

    /// Sets lws's log mask (errors and warnings; notices too when `verbose`) and the emitter.
    static func install(verbose: Bool) {
        var levels = Int32(LLL_ERR) | Int32(LLL_WARN)
        if verbose { levels |= Int32(LLL_NOTICE) }
        lws_set_log_level(levels, lwsLogEmit)
    }

    fileprivate static func emit(_ level: Int32, _ line: UnsafePointer<CChar>?) {
        guard let line else { return }
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        let second = UInt64(ts.tv_sec)
        let (allowed, dropped): (Bool, Int) = budget.withLock { b in
            var droppedBefore = 0
            if b.windowStart != second {
                droppedBefore = b.dropped
                b = Budget(windowStart: second, used: 0, dropped: 0)
            }
            if b.used < linesPerSecond {
                b.used += 1
                return (true, droppedBefore)
            }
            b.dropped += 1
            return (false, droppedBefore)
        }
        if dropped > 0 { writeStderr("lws: \(dropped) log lines dropped (rate limit)\n") }
        if allowed { writeStderr("lws: " + String(cString: line)) }
    }
}

/// Writes to file descriptor 2 directly (no shared `FILE *`).
func writeStderr(_ text: String) {
    var bytes = Array(text.utf8)
    if bytes.last != 0x0A { bytes.append(0x0A) }
    bytes.withUnsafeBytes { raw in
        var offset = 0
        while offset < raw.count {
            let n = write(2, raw.baseAddress! + offset, raw.count - offset)
            if n <= 0 { return }
            offset += n
        }
    }
}

/// lws's log emitter (a C function pointer).
private func lwsLogEmit(_ level: Int32, _ line: UnsafePointer<CChar>?) {
    LWSLog.emit(level, line)
}
