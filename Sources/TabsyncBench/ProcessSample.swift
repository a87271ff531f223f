import Foundation

/// CPU time and resident memory of a process, read from `/proc/PID/stat` and `/proc/PID/status`.
struct ProcessSample: Sendable {
    /// User + system CPU seconds since the process started.
    var cpuSeconds: Double
    /// `VmRSS`, in bytes.
    var rssBytes: Int

    /// nil when the process does not exist or its files cannot be read.
    static func read(pid: Int32) -> ProcessSample? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
              let close = stat.lastIndex(of: ")")
        else { return nil }
        // Fields after the command name (which may hold spaces): state is field 3; utime 14, stime 15.
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        var rss = 0
        for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            rss = (Int(line.split(separator: " ").dropFirst().first ?? "0") ?? 0) * 1024
        }
        return ProcessSample(cpuSeconds: (user + system) / ticks, rssBytes: rss)
    }

    /// Several processes at once, by pid (those that cannot be read are absent).
    static func read(pids: [Int32]) -> [Int32: ProcessSample] {
        var samples: [Int32: ProcessSample] = [:]
        for pid in pids { samples[pid] = read(pid: pid) }
        return samples
    }

    /// CPU seconds used from `start` to `end` by the processes sampled at both.
    static func cpuSeconds(from start: [Int32: ProcessSample], to end: [Int32: ProcessSample]) -> Double {
        start.reduce(0) { sum, entry in sum + (end[entry.key].map { $0.cpuSeconds - entry.value.cpuSeconds } ?? 0) }
    }

    /// Summed RSS.
    static func rssBytes(_ samples: [Int32: ProcessSample]) -> Int { samples.values.reduce(0) { $0 + $1.rssBytes } }

    /// This process's CPU seconds (every thread).
    static func ownCPUSeconds() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6
            + Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
    }

    /// The 1, 5 and 15 minute load averages.
    static func loadAverage() -> [Double] {
        guard let text = try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8) else { return [] }
        return text.split(separator: " ").prefix(3).compactMap { Double($0) }
    }
}

/// Monotonic nanoseconds (one clock for every connection in the process).
@inline(__always)
func monotonicNanos() -> UInt64 {
    var spec = timespec()
    clock_gettime(CLOCK_MONOTONIC, &spec)
    return UInt64(spec.tv_sec) * 1_000_000_000 + UInt64(spec.tv_nsec)
}
