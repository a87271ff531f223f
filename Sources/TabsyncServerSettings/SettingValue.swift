import Foundation

/// The kinds of value settings take, each read from text and printed back the way `--help` shows a
/// default. Guarantees: what a printer writes, the matching parser reads back to the same value.
public enum SettingValue {
    /// A duration from plain seconds (`300`, `0.5`) or a number with a unit (`ms`, `s`, `m`, `h`),
    /// to the millisecond; nil when negative or not a number.
    public static func duration(_ text: String) -> Duration? {
        let trimmed = text.trimmingCharacters(in: .whitespaces).lowercased()
        let units: [(String, Double)] = [("ms", 0.001), ("s", 1), ("m", 60), ("h", 3600)]
        var number = Substring(trimmed)
        var scale = 1.0
        for (suffix, factor) in units where trimmed.hasSuffix(suffix) {
            number = trimmed.dropLast(suffix.count)
            scale = factor
            break
        }
        guard let value = Double(number), value >= 0, value.isFinite else { return nil }
        return milliseconds(value * scale * 1000, rounded: .toNearestOrAwayFromZero)
    }

    /// A duration in the largest unit it is a whole number of (`5m`, `15s`, `500ms`), else in
    /// seconds (`1.5s`).
    public static func durationText(_ duration: Duration) -> String {
        let count = milliseconds(duration)
        for (unit, size) in [("h", Int64(3_600_000)), ("m", 60_000), ("s", 1000)] where count != 0 && count % size == 0 {
            return "\(count / size)\(unit)"
        }
        return count < 1000 ? "\(count)ms" : "\(Double(count) / 1000)s"
    }

    /// Plain seconds (`10`, `0.5`) that `valid` accepts, to the millisecond (truncated).
    public static func seconds(_ text: String, valid: (Double) -> Bool) -> Duration? {
        guard let value = Double(text), value.isFinite, valid(value) else { return nil }
        return milliseconds(value * 1000, rounded: .towardZero)
    }

    /// A duration as plain seconds: `10.0`.
    public static func secondsText(_ duration: Duration) -> String {
        "\(Double(milliseconds(duration)) / 1000)"
    }

    /// A size from plain bytes (`1048576`) or a number with a binary unit (`K`, `M`, `G`, or `KiB`,
    /// `MiB`, `GiB`; any case).
    public static func size(_ text: String) -> Int64? {
        var trimmed = text.trimmingCharacters(in: .whitespaces).lowercased()
        if trimmed.hasSuffix("ib") { trimmed.removeLast(2) }
        let units: [(String, Int64)] = [("k", 1 << 10), ("m", 1 << 20), ("g", 1 << 30)]
        var scale: Int64 = 1
        for (suffix, factor) in units where trimmed.hasSuffix(suffix) {
            trimmed.removeLast()
            scale = factor
            break
        }
        guard let value = Int64(trimmed), value >= 0, value <= Int64.max / scale else { return nil }
        return value * scale
    }

    /// A size in the largest binary unit it is a whole number of: `64M`, `512K`, `1000`.
    public static func sizeText(_ bytes: Int64) -> String {
        for (unit, size) in [("G", Int64(1) << 30), ("M", 1 << 20), ("K", 1 << 10)] where bytes != 0 && bytes % size == 0 {
            return "\(bytes / size)\(unit)"
        }
        return "\(bytes)"
    }

    /// An integer in `range`.
    public static func integer(_ text: String, in range: PartialRangeFrom<Int>) -> Int? {
        Int(text).flatMap { range.contains($0) ? $0 : nil }
    }

    /// A switch's word: 1, true, yes, on or 0, false, no, off (any case).
    public static func switchWord(_ text: String) -> Bool? {
        switch text.lowercased() {
        case "1", "true", "yes", "on": true
        case "0", "false", "no", "off": false
        default: nil
        }
    }

    /// The text itself, unless empty (a host, a path).
    public static func nonEmpty(_ text: String) -> String? {
        text.isEmpty ? nil : text
    }

    /// A PostgreSQL URL: `postgres://` or `postgresql://` (any case) and something after it.
    public static func postgresURL(_ text: String) -> String? {
        let scheme = ["postgres://", "postgresql://"].first { text.lowercased().hasPrefix($0) }
        guard let scheme, text.count > scheme.count else { return nil }
        return text
    }

    /// A store URL safe to print: the scheme, user, host, port and database, never a password (in
    /// the user part or a parameter) nor the parameters. A value that is not a URL shows as
    /// itself, or `…` when it could hold a password.
    public static func redacted(_ url: String) -> String {
        guard let schemeEnd = url.range(of: "://") else {
            // Not a URL: shown unless it could hold a password (`password=…`, `user:secret@host`).
            return url.contains("=") || url.contains("@") || url.contains(":") ? "…" : url
        }
        let scheme = url[..<schemeEnd.lowerBound]
        var rest = url[schemeEnd.upperBound...]
        if let query = rest.firstIndex(where: { $0 == "?" || $0 == "#" }) { rest = rest[..<query] }
        var user = ""
        if let at = rest.lastIndex(of: "@") {
            user = String(rest[..<at].prefix(while: { $0 != ":" })) + "@"
            rest = rest[rest.index(after: at)...]
        }
        return "\(scheme)://\(user)\(rest)"
    }

    /// A count of milliseconds as a duration; nil when it does not fit (`1e300`).
    private static func milliseconds(_ count: Double, rounded rule: FloatingPointRoundingRule) -> Duration? {
        Int64(exactly: count.rounded(rule)).map { .milliseconds($0) }
    }

    private static func milliseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }
}
