import Foundation

/// How long a store keeps history (docs/design.md, "History"): every op for ``opsFor``, then one
/// milestone (the workspace's state) per UTC day with activity for ``milestonesFor``. Off (both 0),
/// a store keeps only the resume window, as before history was kept.
///
/// Guarantees: ``milestonesFor`` is never shorter than ``opsFor``; a version is restorable when a
/// milestone at or before it is kept with every op after it up to it, or it is a milestone.
public struct HistoryRetention: Sendable, Equatable, CustomStringConvertible {
    /// Seconds every op is kept (0: history off).
    public let opsFor: TimeInterval
    /// Seconds one milestone per day is kept.
    public let milestonesFor: TimeInterval

    public static let off = HistoryRetention(opsFor: 0, milestonesFor: 0)
    /// Every op for 30 days, then one milestone per day for a year.
    public static let standard = HistoryRetention(opsFor: 30 * 86_400, milestonesFor: 365 * 86_400)

    public init(opsFor: TimeInterval, milestonesFor: TimeInterval) {
        self.opsFor = max(0, opsFor)
        self.milestonesFor = opsFor > 0 ? max(opsFor, milestonesFor) : 0
    }

    public var isOn: Bool { opsFor > 0 }

    /// Reads `0`, `OPS` or `OPS,MILESTONES`, each a number with a unit `s`, `m`, `h` or `d`
    /// (`30d,365d`). One duration keeps milestones as long as ops. Nil when malformed.
    public init?(parsing text: String) {
        let parts = text.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
        if parts == ["0"] { self = .off; return }
        guard (1...2).contains(parts.count) else { return nil }
        func seconds(_ part: String) -> TimeInterval? {
            guard let unit = part.last, let value = Double(part.dropLast()), value > 0, value.isFinite else { return nil }
            switch unit {
            case "s": return value
            case "m": return value * 60
            case "h": return value * 3_600
            case "d": return value * 86_400
            default: return nil
            }
        }
        guard let ops = seconds(parts[0]) else { return nil }
        let milestones = parts.count == 2 ? seconds(parts[1]) : ops
        guard let milestones, milestones >= ops else { return nil }
        self.init(opsFor: ops, milestonesFor: milestones)
    }

    public var description: String {
        guard isOn else { return "0" }
        func text(_ s: TimeInterval) -> String {
            if s.truncatingRemainder(dividingBy: 86_400) == 0 { return "\(Int(s / 86_400))d" }
            if s.truncatingRemainder(dividingBy: 3_600) == 0 { return "\(Int(s / 3_600))h" }
            if s.truncatingRemainder(dividingBy: 60) == 0 { return "\(Int(s / 60))m" }
            return "\(Int(s))s"
        }
        return "\(text(opsFor)),\(text(milestonesFor))"
    }

    /// The UTC day of a Unix time in milliseconds (milestones are kept one per such day).
    static func day(ofMilliseconds ms: Int64) -> Int64 {
        ms >= 0 ? ms / 86_400_000 : (ms - 86_399_999) / 86_400_000
    }

    /// What a commit at `nowMs` does to a workspace's history: whether it writes a milestone, and
    /// the cut-offs before which ops and milestones may go. `lastMilestoneMs`: the commit time of
    /// its newest milestone (nil: none); `writesSnapshot`: the retention plan writes a snapshot now.
    public func plan(nowMs: Int64, lastMilestoneMs: Int64?, writesSnapshot: Bool) -> Plan {
        guard isOn else { return Plan(writesMilestone: false, trims: false, opsBeforeMs: 0, milestonesBeforeMs: 0) }
        let newDay = lastMilestoneMs.map { Self.day(ofMilliseconds: $0) < Self.day(ofMilliseconds: nowMs) } ?? true
        return Plan(
            writesMilestone: writesSnapshot || newDay, trims: newDay,
            opsBeforeMs: nowMs - Int64(opsFor * 1000), milestonesBeforeMs: nowMs - Int64(milestonesFor * 1000))
    }

    /// See ``plan(nowMs:lastMilestoneMs:writesSnapshot:)``.
    public struct Plan: Sendable, Equatable {
        /// Store the workspace's state after the commit as a milestone.
        public let writesMilestone: Bool
        /// Run the day's trim (once per workspace per UTC day with activity): ops committed before
        /// ``opsBeforeMs`` go (a prefix, never past the resume window's horizon), milestones before
        /// it but the last of each day, and every milestone before ``milestonesBeforeMs``.
        public let trims: Bool
        public let opsBeforeMs: Int64
        public let milestonesBeforeMs: Int64
    }
}

/// The wall clock a store reads commit times from: the system's, or one a test turns. Any two are
/// equal (it is no part of what a store's options say about its data).
public struct CommitClock: Sendable, Equatable {
    let now: @Sendable () -> Date

    public init(_ now: @escaping @Sendable () -> Date = { Date() }) {
        self.now = now
    }

    /// Unix milliseconds now.
    public func milliseconds() -> Int64 { Int64((now().timeIntervalSince1970 * 1000).rounded(.down)) }

    public static func == (lhs: CommitClock, rhs: CommitClock) -> Bool { true }
}
