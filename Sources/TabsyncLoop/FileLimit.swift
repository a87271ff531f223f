#if canImport(Glibc)
import Glibc
#endif

/// The process' open-file limit (`RLIMIT_NOFILE`), which caps lws' connections: lws sizes its fd
/// table from the soft limit when a context is created (one fd per connection), and past it 4.1.6
/// spins on `accept()`. Raise it before creating a context.
public enum FileLimit {
    /// The soft limit is never raised past this: lws allocates a table entry per possible fd, so an
    /// unbounded hard limit (seen in containers) would cost gigabytes.
    public static let ceiling = 1 << 20

    /// Raises the soft limit to the hard one (at most ``ceiling``) when it is lower; never lowers
    /// it. Returns the soft limit now in force (0 when it cannot be read).
    @discardableResult
    public static func raise() -> Int {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 0 }
        let target = min(limit.rlim_max, rlim_t(ceiling))
        if limit.rlim_cur < target {
            limit.rlim_cur = target
            _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
            _ = getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        }
        return Int(clamping: limit.rlim_cur)
    }
}
