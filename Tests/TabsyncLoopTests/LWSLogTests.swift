import CLibwebsockets
import TabsyncLoop
import Testing

/// ``LWSLog``: one routing per process; levels combine as the most verbose asked.
@Suite("lws log routing")
struct LWSLogTests {
    /// Whatever the order of requests, the mask in force holds every bit asked, and a narrower
    /// request later does not take any away.
    @Test func levelsCombineAsTheUnionOfEveryRequest() {
        let errors = Int32(LLL_ERR)
        let notices = Int32(LLL_NOTICE)
        let afterNotices = LWSLog.request(notices)
        #expect(afterNotices & notices == notices)
        let afterErrors = LWSLog.request(errors)
        #expect(afterErrors & (errors | notices) == errors | notices)
        #expect(LWSLog.levels == afterErrors)
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
