/// Times as the protocol, the HTTP API and the command line write them: RFC 3339
/// (docs/design.md, "History"), counted in seconds since 1970-01-01T00:00:00Z as `Date` counts
/// them (`Date(timeIntervalSince1970:)`, `date.timeIntervalSince1970`), so the core needs no
/// Foundation. The one parser and formatter of the project.
///
/// Guarantees: ``parse(_:)`` takes exactly RFC 3339's `date-time` (a fraction of any length, `Z`
/// or a numeric offset, `T`/`t` and `Z`/`z`; a leap second `60` is read as the second before the
/// next minute's start) and refuses anything else, impossible dates included; ``format(_:)``
/// writes UTC to the millisecond (the time rounded down), and what it writes parses back to that
/// same millisecond.
public enum RFC3339 {
    /// The time `text` names, in seconds since 1970 UTC (to the millisecond), or nil when it is
    /// not an RFC 3339 date-time.
    public static func parse(_ text: String) -> Double? {
        var s = Scanner(Array(text.utf8))
        guard let year = s.digits(4), s.take(UInt8(ascii: "-")), let month = s.digits(2), s.take(UInt8(ascii: "-")),
              let day = s.digits(2), s.take(UInt8(ascii: "T")) || s.take(UInt8(ascii: "t")),
              let hour = s.digits(2), s.take(UInt8(ascii: ":")), let minute = s.digits(2), s.take(UInt8(ascii: ":")),
              let second = s.digits(2)
        else { return nil }
        var millis: Int64 = 0
        if s.take(UInt8(ascii: ".")) {
            guard let fraction = s.fraction() else { return nil }
            millis = fraction
        }
        var offset: Int64 = 0
        if s.take(UInt8(ascii: "Z")) || s.take(UInt8(ascii: "z")) {
            offset = 0
        } else {
            let sign: Int64
            if s.take(UInt8(ascii: "+")) { sign = 1 } else if s.take(UInt8(ascii: "-")) { sign = -1 } else { return nil }
            guard let oh = s.digits(2), s.take(UInt8(ascii: ":")), let om = s.digits(2), oh <= 23, om <= 59 else { return nil }
            offset = sign * (oh * 60 + om) * 60
        }
        guard s.atEnd, (1...12).contains(month), day >= 1, day <= daysIn(month: month, year: year),
              hour <= 23, minute <= 59, second <= 60
        else { return nil }
        let seconds = daysSinceEpoch(year: year, month: month, day: day) * 86_400 + hour * 3_600 + minute * 60 + second - offset
        return Double(seconds * 1_000 + millis) / 1_000
    }

    /// The time `secondsSince1970` in UTC, to the millisecond: `2026-11-27T10:00:00.123Z`.
    public static func format(_ secondsSince1970: Double) -> String {
        // To the microsecond first, so a time made from whole milliseconds (x.814, stored as
        // x.81399999…) keeps its millisecond; then down to the millisecond.
        let millis = Int64(((secondsSince1970 * 1_000_000).rounded() / 1_000).rounded(.down))
        let (days, msOfDay) = floorDivide(millis, 86_400_000)
        let (year, month, day) = civil(daysSinceEpoch: days)
        let second = msOfDay / 1_000
        return "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2))T\(pad(second / 3_600, 2)):\(pad(second / 60 % 60, 2)):"
            + "\(pad(second % 60, 2)).\(pad(msOfDay % 1_000, 3))Z"
    }

    // MARK: the calendar (proleptic Gregorian, as RFC 3339 uses)

    private static func isLeap(_ year: Int64) -> Bool { year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) }

    private static func daysIn(month: Int64, year: Int64) -> Int64 {
        switch month {
        case 2: isLeap(year) ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// Days from 1970-01-01 to a date (negative before it): the days-from-civil count of a year
    /// that starts in March, so February's length comes last.
    private static func daysSinceEpoch(year: Int64, month: Int64, day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = floorDivide(y, 400).quotient
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// The date `days` after 1970-01-01: the inverse of ``daysSinceEpoch(year:month:day:)``.
    private static func civil(daysSinceEpoch days: Int64) -> (Int64, Int64, Int64) {
        let z = days + 719_468
        let era = floorDivide(z, 146_097).quotient
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1_460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }

    private static func floorDivide(_ a: Int64, _ b: Int64) -> (quotient: Int64, remainder: Int64) {
        let q = a / b - ((a % b != 0 && (a < 0) != (b < 0)) ? 1 : 0)
        return (q, a - q * b)
    }

    private static func pad(_ value: Int64, _ width: Int) -> String {
        let digits = String(value)
        return String(repeating: "0", count: max(0, width - digits.count)) + digits
    }

    /// Reads ASCII digits and marks from the front of a time's bytes.
    private struct Scanner {
        let bytes: [UInt8]
        var at = 0

        init(_ bytes: [UInt8]) { self.bytes = bytes }

        var atEnd: Bool { at == bytes.count }

        mutating func take(_ byte: UInt8) -> Bool {
            guard at < bytes.count, bytes[at] == byte else { return false }
            at += 1
            return true
        }

        /// Exactly `count` digits as a number.
        mutating func digits(_ count: Int) -> Int64? {
            guard at + count <= bytes.count else { return nil }
            var value: Int64 = 0
            for byte in bytes[at..<at + count] {
                guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
                value = value * 10 + Int64(byte - UInt8(ascii: "0"))
            }
            at += count
            return value
        }

        /// One or more digits of a fraction of a second, as whole milliseconds (the rest dropped).
        mutating func fraction() -> Int64? {
            var millis: Int64 = 0
            var count = 0
            while at < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[at]) {
                if count < 3 { millis = millis * 10 + Int64(bytes[at] - UInt8(ascii: "0")) }
                count += 1
                at += 1
            }
            guard count > 0 else { return nil }
            for _ in count..<max(count, 3) { millis *= 10 }
            return millis
        }
    }
}
