@testable import TabsyncBench
import Testing

@Suite("the bench's schedule")
struct ScheduleTests {
    static let second: UInt64 = 1_000_000_000
    /// An arbitrary monotonic start.
    static let start: UInt64 = 5 * second

    @Test("open loop: op n is intended at start + n/rate, and only the window's ops are measured")
    func openLoopSendTimes() {
        var schedule = Schedule(ramp: 1000, timeLimit: nil)
        schedule.startLoad(rate: 1000, warmup: 1, duration: 2, now: Self.start)
        // 10 ms in: ops 1...10, one per millisecond, whatever the lateness of the caller.
        var intended: [UInt64] = []
        while let time = schedule.nextSend(now: Self.start + 10_000_000) { intended.append(time) }
        #expect(intended.count == 10)
        for (index, time) in intended.enumerated() {
            // Within a nanosecond of start + n ms (the product is computed in floating point).
            #expect(abs(Int64(time) - Int64(Self.start + UInt64(index + 1) * 1_000_000)) <= 1)
        }
        #expect(!schedule.isMeasured(intended[0]))
        // Long after the end: the rest, up to the window's end and no further.
        while let time = schedule.nextSend(now: Self.start + 60 * Self.second) { intended.append(time) }
        #expect(intended.count == 3000)
        #expect(intended.last == Self.start + 3 * Self.second)
        #expect(intended.filter { schedule.isMeasured($0) }.count == 2000)
        #expect(schedule.measuredSeconds == 2)
        #expect(schedule.loadEnded(now: Self.start + 3 * Self.second))
        #expect(!schedule.loadEnded(now: Self.start + 3 * Self.second - 1))
    }

    @Test("rate 0 sends nothing; the window still opens once")
    func idleLoad() {
        var schedule = Schedule(ramp: 1000, timeLimit: nil)
        schedule.startLoad(rate: 0, warmup: 1, duration: 1, now: Self.start)
        let sent = schedule.nextSend(now: Self.start + 2 * Self.second)
        #expect(sent == nil)
        let opened = [-1, 0, 1].map { schedule.windowOpened(now: Self.start + Self.second &+ UInt64(bitPattern: Int64($0))) }
        #expect(opened == [false, true, false])
        #expect(schedule.phaseName(now: Self.start) == "warmup")
        #expect(schedule.phaseName(now: Self.start + Self.second) == "measuring")
    }

    @Test("connections open at the ramp rate, the first at once, each once")
    func ramp() {
        var schedule = Schedule(ramp: 1000, timeLimit: nil)
        schedule.startConnecting(now: Self.start, connections: 50)
        let handedOut = [0, 0, 5_000_000, Self.second].map { schedule.connectionsToOpen(now: Self.start + $0, of: 50) }
        #expect(handedOut == [0..<1, 1..<1, 1..<6, 6..<50])
        // The deadline: the ramp's length (0.05 s) + 20 s.
        #expect(!schedule.connectDeadlinePassed(now: Self.start + 20 * Self.second))
        #expect(schedule.connectDeadlinePassed(now: Self.start + 20 * Self.second + 50_000_000))
    }

    @Test("--time-limit stops the load once and cuts the measured window there")
    func timeLimit() {
        var schedule = Schedule(ramp: 1000, timeLimit: 3)
        schedule.startConnecting(now: Self.start, connections: 1)
        schedule.phase = .idle
        schedule.startLoad(rate: 10, warmup: 1, duration: 10, now: Self.start + Self.second)
        let stopped = [3 * Self.second - 1, 3 * Self.second, 4 * Self.second].map { schedule.stopIfTimeUp(now: Self.start + $0) }
        #expect(stopped == [nil, .load, nil])
        #expect(schedule.timeUp && schedule.phase == .idle)
        #expect(schedule.measuredSeconds == 1)
    }

    @Test("--max doubles while trials pass, bisects after a failure, and stops within 10%")
    func rateSearchConverges() {
        var search = Schedule.RateSearch(start: 100)
        var rates: [Double] = []
        func run(_ verdict: Schedule.RateSearch.Verdict) -> Bool {
            rates.append(search.rate)
            return search.record(verdict)
        }
        #expect(run(.passed))               // 100
        #expect(run(.passed))               // 200
        #expect(run(.failed))               // 400
        #expect(run(.missedOnlyTheBound))   // 300, tried again
        #expect(run(.missedOnlyTheBound))   // 300 again: now a failure
        #expect(run(.passed))               // 250
        #expect(!run(.passed))              // 275: within 10% of 300
        #expect(rates == [100, 200, 400, 300, 300, 250, 275])
        #expect(search.low == 275 && search.high == 300)
    }

    @Test("--max halves from a failing start until under 1 op/s")
    func rateSearchGivesUp() {
        var search = Schedule.RateSearch(start: 10)
        var trials = 0
        while trials < Schedule.RateSearch.maxTrials {
            trials += 1
            if !search.record(.failed) { break }
        }
        #expect(trials == 4)  // 10, 5, 2.5, 1.25 → 0.625
        #expect(search.low == 0)
    }
}
