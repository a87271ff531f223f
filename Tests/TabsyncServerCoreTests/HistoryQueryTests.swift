import Foundation
import Testing
import TabsyncCore
import TabsyncProto
import TabsyncStore
@testable import TabsyncServerCore

/// docs/design.md, "History": a history read asked over HTTP and the same read asked over a session
/// are checked by one parser (``HistoryQuery``): the same defaults, the same bounds, the same
/// refusals, whichever door it came through.
@Suite struct HistoryQueryTests {
    /// One read asked both ways: an HTTP resource and query string, and a session's HistoryQuery.
    struct Case: Sendable, CustomTestStringConvertible {
        var http: (ServerCore.HistoryResource, String)
        var session: Tabsync_V1_HistoryQuery.OneOf_What?
        /// The read both ask for, or nil when both are refused with `problem`.
        var read: HistoryRead?
        var problem: String = ""
        var testDescription: String { "\(http.0)?\(http.1)" }
    }

    static func page(before: UInt64 = 0, limit: UInt32 = 0) -> Tabsync_V1_HistoryQuery.OneOf_What {
        var page = Tabsync_V1_HistoryPage()
        page.before = before
        page.limit = limit
        return .ops(page)
    }

    static let cases: [Case] = [
        Case(http: (.ops, ""), session: page(), read: .ops(before: nil, limit: 50)),
        Case(http: (.ops, "before=7&limit=3"), session: page(before: 7, limit: 3), read: .ops(before: 7, limit: 3)),
        Case(http: (.ops, "limit=1000"), session: page(limit: 1_000), read: .ops(before: nil, limit: 1_000)),
        Case(http: (.ops, "limit=1001"), session: page(limit: 1_001), problem: "limit must be a whole number from 1 to 1000"),
        Case(http: (.closed, ""), session: .closed(0), read: .closed(limit: 20)),
        Case(http: (.closed, "limit=100"), session: .closed(100), read: .closed(limit: 100)),
        // A session asking for more than 100 closed tabs was given 100; now both doors refuse it.
        Case(http: (.closed, "limit=101"), session: .closed(101), problem: "limit must be a whole number from 1 to 100"),
        Case(http: (.state, "version=4"), session: .version(4), read: .version(4)),
        Case(http: (.state, "at=2026-11-27T10%3A00%3A00Z"), session: .at("2026-11-27T10:00:00Z"),
             read: .time(Date(timeIntervalSince1970: 1_795_773_600))),
        Case(http: (.state, "at=yesterday"), session: .at("yesterday"), problem: "at must be an RFC 3339 time, e.g. 2026-11-27T10:00:00Z"),
    ]

    @Test(arguments: cases) func bothDoorsAgree(_ c: Case) {
        var query = Tabsync_V1_HistoryQuery()
        query.what = c.session
        let http = HistoryQuery.read(c.http.0, query: c.http.1)
        let session = HistoryQuery.read(query)
        if let read = c.read {
            #expect(http == .success(read))
            #expect(session == .success(read))
        } else {
            #expect(http == .failure(HistoryQuery.Problem(message: c.problem)))
            #expect(session == .failure(HistoryQuery.Problem(message: c.problem)))
        }
    }

    @Test func httpOnlyChecks() {
        #expect(HistoryQuery.read(.ops, query: "before=0") == .failure(HistoryQuery.Problem(message: "before must be a version of 1 or more")))
        #expect(HistoryQuery.read(.ops, query: "limit=many") == .failure(HistoryQuery.Problem(message: "limit must be a whole number from 1 to 1000")))
        #expect(HistoryQuery.read(.state, query: "version=x") == .failure(HistoryQuery.Problem(message: "version must be a whole number")))
        #expect(HistoryQuery.read(.state, query: "") == .failure(HistoryQuery.Problem(message: "at must be an RFC 3339 time, e.g. 2026-11-27T10:00:00Z")))
        #expect(HistoryQuery.read(Tabsync_V1_HistoryQuery()) == .failure(HistoryQuery.Problem(message: "a HistoryQuery with nothing asked")))
    }

    @Test func theNextPageStartsAtTheOldestOpShownAndEndsAtVersionOne() {
        func entry(_ v: UInt64) -> HistoryEntry {
            HistoryEntry(op: AppliedOp(version: v, op: .activate(.tabId("t")), clientId: "c", seq: v, activeTabId: "t"), author: "", committedAt: nil)
        }
        #expect(HistoryQuery.next(after: [entry(9), entry(8)]) == 8)
        #expect(HistoryQuery.next(after: [entry(2), entry(1)]) == nil)
        #expect(HistoryQuery.next(after: []) == nil)
    }
}
