import CLibwebsockets
import Foundation
import TabsyncLoop
import Testing

/// ``LWSLog``: one routing per process; levels combine as the most verbose asked.
@Suite("lws log routing")
struct LWSLogTests {
    /// Whatever the order of requests, the mask in force holds every bit asked, and a narrower
    /// request later does not take any away.
    ///
    /// In a child process of its own: lws' mask is process wide and never narrows, so asking for
    /// notices here would make every lws context of the test process (servers and clients of the
    /// other suites) log its notices for the rest of the run.
    @Test func levelsCombineAsTheUnionOfEveryRequest() async {
        await #expect(processExitsWith: .success) {
            let errors = Int32(LLL_ERR)
            let notices = Int32(LLL_NOTICE)
            let afterNotices = LWSLog.request(notices)
            let afterErrors = LWSLog.request(errors)
            let holds = afterNotices & notices == notices
                && afterErrors & (errors | notices) == errors | notices
                && LWSLog.levels == afterErrors
            exit(holds ? 0 : 1)
        }
    }

    /// A ceiling keeps the mask within it whatever is requested after, and the union comes back
    /// when the ceiling is lifted. In a child process too (the mask is process wide).
    @Test func aCeilingKeepsTheMaskWithinIt() async {
        await #expect(processExitsWith: .success) {
            let errors = Int32(LLL_ERR)
            let notices = Int32(LLL_NOTICE)
            let capped = LWSLog.limit(to: errors)
            let asked = LWSLog.request(errors | notices)
            let lifted = LWSLog.limit(to: ~0)
            exit(capped & notices == 0 && asked == errors && lifted & (errors | notices) == errors | notices ? 0 : 1)
        }
    }

    /// At most `linesPerSecond` lines a second; the first line of the next second reports how many
    /// were dropped, once.
    @Test func theRateLimitAdmitsABudgetPerSecondAndReportsTheDropped() {
        var limit = LWSLog.RateLimit()
        var answers: [String] = []
        func admit(_ second: UInt64) {
            let (allowed, dropped) = limit.admit(second: second)
            answers.append("\(second):\(allowed ? "write" : "drop"):\(dropped)")
        }
        for _ in 0..<LWSLog.linesPerSecond { admit(7) }
        admit(7)
        admit(7)
        admit(8)
        admit(8)
        admit(9)
        #expect(answers == Array(repeating: "7:write:0", count: LWSLog.linesPerSecond)
            + ["7:drop:0", "7:drop:0", "8:write:2", "8:write:0", "9:write:0"])
    }
}
