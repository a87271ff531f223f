import Foundation
import Testing
import TabsyncCore
import TabsyncTestSupport

/// The one RFC 3339 parser and formatter (docs/design.md, "History"): it agrees with Foundation's
/// ISO 8601 formatter on every time it is given, what it writes parses back to the same
/// millisecond, and anything that is not an RFC 3339 date-time is refused.
@Suite struct RFC3339Tests {
    static func foundation(_ text: String) -> Double? {
        let plain = ISO8601DateFormatter()
        if let date = plain.date(from: text) { return date.timeIntervalSince1970 }
        let fractional = ISO8601DateFormatter()
        fractional.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return fractional.date(from: text)?.timeIntervalSince1970
    }

    @Test func aFormattedTimeParsesBackToTheSameMillisecondAndAgreesWithFoundation() throws {
        var rng = SplitMix64(seed: 3339)
        let fixed: [Int64] = [0, 1, 999, -1, -86_400_000, 951_782_400_000, 1_764_237_600_123, 4_107_542_399_999]
        let random = (0..<2_000).map { _ in Int64(bitPattern: rng.next() % 8_000_000_000_000) - 2_000_000_000_000 }
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        for millis in fixed + random {
            let seconds = Double(millis) / 1000
            let text = RFC3339.format(seconds)
            #expect(text == formatter.string(from: Date(timeIntervalSince1970: seconds)), "\(millis)")
            let back = try #require(RFC3339.parse(text), "\(text)")
            #expect(Int64((back * 1000).rounded()) == millis, "\(text)")
        }
    }

    @Test(arguments: [
        "2026-11-27T10:00:00Z", "2026-11-27T11:00:00+01:00", "2026-11-27T04:30:00-05:30",
        "2026-11-27T10:00:00.250Z", "2026-11-27T10:00:00.1234567Z", "2024-02-29T23:59:59.999+00:00", "1969-12-31T23:59:59.5Z",
    ])
    func timesAreReadAsFoundationReadsThem(_ text: String) throws {
        let ours = try #require(RFC3339.parse(text))
        let theirs = try #require(Self.foundation(text))
        #expect(abs(ours - theirs) < 0.0005, "\(text): \(ours) against \(theirs)")
    }

    @Test func offsetsNameTheSameInstant() {
        #expect(RFC3339.parse("2026-11-27T11:00:00+01:00") == RFC3339.parse("2026-11-27T10:00:00Z"))
        // RFC 3339 allows `t` and `z` in lower case (Foundation's formatter does not read them).
        #expect(RFC3339.parse("2026-11-27t10:00:00z") == RFC3339.parse("2026-11-27T10:00:00Z"))
        #expect(RFC3339.parse("2026-11-27T10:00:00.250Z")! - RFC3339.parse("2026-11-27T10:00:00Z")! == 0.25)
    }

    @Test(arguments: [
        "", "now", "2026-11-27", "2026-11-27 10:00:00Z", "10:00:00Z", "2026-13-27T10:00:00Z", "2025-02-29T10:00:00Z",
        "2026-11-31T10:00:00Z", "2026-11-27T24:00:00Z", "2026-11-27T10:60:00Z", "2026-11-27T10:00:00", "2026-11-27T10:00:00.Z",
        "2026-11-27T10:00:00+0100", "1764237600", "2026-11-27T10:00:00Zjunk", "+2026-11-27T10:00:00Z",
    ])
    func anythingElseIsRefused(_ text: String) {
        #expect(RFC3339.parse(text) == nil)
    }
}
