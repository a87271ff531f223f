import Foundation
import TabsyncCore
import TabsyncProto
import TabsyncStore

/// A history read as a client asks for it, over HTTP (`/history`, `/closed`, `?version=`, `?at=`)
/// or over a session (`HistoryQuery`): the one place its fields are checked and its defaults and
/// limits applied (docs/design.md, "History").
///
/// Guarantees: both doors take the same reads with the same defaults and refuse the same values
/// with the same messages (``Limits``); a refused query asks nothing of the store.
enum HistoryQuery {
    /// The defaults and bounds of a history read, for both doors.
    enum Limits {
        /// Ops in one page: 50 when none is asked, at most 1,000.
        static let ops = 1...1_000, opsDefault = 50
        /// Recently closed tabs in one answer: 20 when none is asked, at most 100.
        static let closed = 1...100, closedDefault = 20
    }

    /// Why a query is refused: a message for people (HTTP 400, or `INVALID_ARGUMENT` in the answer).
    struct Problem: Error, Equatable {
        var message: String
    }

    /// The read an HTTP query string asks of `resource`.
    static func read(_ resource: ServerCore.HistoryResource, query: String) -> Result<HistoryRead, Problem> {
        let fields = fields(of: query)
        switch resource {
        case .ops:
            var before: UInt64?
            if let text = fields["before"] {
                guard let value = UInt64(text), value > 0 else { return .failure(Problem(message: "before must be a version of 1 or more")) }
                before = value
            }
            return ops(before: before, limit: fields["limit"].map { Int($0) ?? -1 })
        case .closed:
            return closed(limit: fields["limit"].map { Int($0) ?? -1 })
        case .state:
            if let text = fields["version"] {
                guard let value = UInt64(text) else { return .failure(Problem(message: "version must be a whole number")) }
                return .success(.version(value))
            }
            return time(fields["at"])
        }
    }

    /// The read a session's `HistoryQuery` asks (0 in a limit or `before`: the default).
    static func read(_ query: Tabsync_V1_HistoryQuery) -> Result<HistoryRead, Problem> {
        switch query.what {
        case .ops(let page)?:
            return ops(before: page.before == 0 ? nil : page.before, limit: page.limit == 0 ? nil : Int(page.limit))
        case .version(let version)?:
            return .success(.version(version))
        case .at(let text)?:
            return time(text)
        case .closed(let limit)?:
            return closed(limit: limit == 0 ? nil : Int(limit))
        case nil:
            return .failure(Problem(message: "a HistoryQuery with nothing asked"))
        }
    }

    /// The `before` of the page after `entries` (newest first): nil at the oldest stored op.
    static func next(after entries: [HistoryEntry]) -> UInt64? {
        guard let oldest = entries.last?.op.version, oldest > 1 else { return nil }
        return oldest
    }

    // MARK: the checks both doors share

    private static func ops(before: UInt64?, limit: Int?) -> Result<HistoryRead, Problem> {
        let limit = limit ?? Limits.opsDefault
        guard Limits.ops.contains(limit) else { return .failure(Problem(message: "limit must be a whole number from 1 to 1000")) }
        return .success(.ops(before: before, limit: limit))
    }

    private static func closed(limit: Int?) -> Result<HistoryRead, Problem> {
        let limit = limit ?? Limits.closedDefault
        guard Limits.closed.contains(limit) else { return .failure(Problem(message: "limit must be a whole number from 1 to 100")) }
        return .success(.closed(limit: limit))
    }

    private static func time(_ text: String?) -> Result<HistoryRead, Problem> {
        guard let text, let seconds = RFC3339.parse(text) else {
            return .failure(Problem(message: "at must be an RFC 3339 time, e.g. 2026-11-27T10:00:00Z"))
        }
        return .success(.time(Date(timeIntervalSince1970: seconds)))
    }

    /// An HTTP query string's fields, percent-decoded (a field without `=` is skipped).
    private static func fields(of query: String) -> [String: String] {
        var fields: [String: String] = [:]
        for pair in query.split(separator: "&") {
            let kv = pair.split(separator: "=", maxSplits: 1).map(String.init)
            guard kv.count == 2 else { continue }
            fields[kv[0]] = kv[1].removingPercentEncoding ?? kv[1]
        }
        return fields
    }
}
