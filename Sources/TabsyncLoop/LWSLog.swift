import CLibwebsockets
import TabsyncLock

#if canImport(Glibc)
import Glibc
#endif

/// Routes libwebsockets' own log lines to stderr (prefixed `lws: `), at most
/// ``linesPerSecond`` a second.
///
/// lws' log level and emitter are process wide, and a process may run several lws users (the
/// client tests run a server and clients). So they are set here only, and levels combine: the mask
/// in force is the union of every mask ``request(_:)`` was given in this process, i.e. the most
/// verbose asked wins, whatever the order. It never narrows again.
///
/// A process may also set a ceiling (``limit(to:)``): the mask in force is then the union within
/// it. Test processes set one, so that one in-process server made with a debug logger does not make
/// every lws context of the run log its notices (Debian's lws 4.1.6 logs each socket event of its
/// libev loop as a notice: hundreds of `elops_io_ev` lines).
///
/// lws 4.1.6 can log a line per failed `accept()` in a tight loop (EMFILE); past the budget lines
/// are counted and dropped, and one line says how many were dropped.
///
/// Thread rule: any thread.
public enum LWSLog {
    /// Lines written per second at most.
    public static let linesPerSecond = 20

    /// lws' mask for errors and warnings (what every lws user here asks at least, by default).
    public static var errorsAndWarnings: Int32 { Int32(LLL_ERR) | Int32(LLL_WARN) }
    /// lws' notice lines (connection-level events): for debug logging.
    public static var notices: Int32 { Int32(LLL_NOTICE) }

    private struct Routing {
        /// The union of every request.
        var levels: Int32 = 0
        /// The bits that may be in force at most (every bit until ``limit(to:)``).
        var ceiling: Int32 = ~0
        var limit = RateLimit()

        var inForce: Int32 { levels & ceiling }
    }

    private static let routing = Lock(Routing())

    /// Adds `levels` (`LLL_*` bits) to the process' lws log mask and routes lws' lines here.
    /// Returns the mask now in force.
    @discardableResult
    public static func request(_ levels: Int32) -> Int32 {
        routing.withLock { routing in
            routing.levels |= levels
            // Set every time, not only when the mask grows: lws' emitter may have been replaced by
            // a direct `lws_set_log_level` call elsewhere in the process.
            lws_set_log_level(routing.inForce, lwsLogEmit)
            return routing.inForce
        }
    }

    /// Keeps the mask in force within `ceiling` (`LLL_*` bits) from now on, whatever is requested;
    /// the last call wins. Returns the mask now in force. For test processes (see the type's comment).
    @discardableResult
    public static func limit(to ceiling: Int32) -> Int32 {
        routing.withLock { routing in
            routing.ceiling = ceiling
            lws_set_log_level(routing.inForce, lwsLogEmit)
            return routing.inForce
        }
    }

    /// The mask in force (the union of every request so far, within the ceiling).
    public static var levels: Int32 { routing.withLock { $0.inForce } }

    /// The per-second line budget. Pure: the caller gives the clock.
    public struct RateLimit: Sendable, Equatable {
        var second: UInt64 = 0
        var used = 0
        var dropped = 0

        public init() {}

        /// Counts one line at `second` (a monotonic second): whether it may be written, and how many
        /// lines the previous second dropped (reported once, by the first line of a new second).
        public mutating func admit(second now: UInt64) -> (allowed: Bool, droppedBefore: Int) {
            var droppedBefore = 0
            if second != now {
                droppedBefore = dropped
                self = RateLimit()
                second = now
            }
            if used < LWSLog.linesPerSecond {
                used += 1
                return (true, droppedBefore)
            }
            dropped += 1
            return (false, droppedBefore)
        }
    }

    fileprivate static func emit(_ level: Int32, _ line: UnsafePointer<CChar>?) {
        guard let line else { return }
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        let (allowed, dropped) = routing.withLock { $0.limit.admit(second: UInt64(ts.tv_sec)) }
        if dropped > 0 { writeStderr("lws: \(dropped) log lines dropped (rate limit)\n") }
        if allowed { writeStderr("lws: " + String(cString: line)) }
    }

    /// Writes to file descriptor 2 directly (no shared `FILE *`), ending with one newline.
    private static func writeStderr(_ text: String) {
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
}

/// lws' log emitter (a C function pointer).
private func lwsLogEmit(_ level: Int32, _ line: UnsafePointer<CChar>?) {
    LWSLog.emit(level, line)
}
