import TabsyncCore
@testable import TabsyncServerCore
import Testing

/// The core's keepalive on the virtual clock (ServerCore+Keepalive.swift; docs/design.md,
/// "Liveness"): a silent session is pinged, then closed within the idle timeout + 10%; one that
/// sends frames or answers pings, even late, never is; pings of sessions opened together spread.
@Suite struct KeepaliveRuleTests {
    static let idle: Duration = .seconds(60)

    static func harness() -> CoreHarness {
        CoreHarness {
            $0.idleTimeout = idle
            $0.jitterSeed = 42
        }
    }

    /// What the keepalive did to one session: when it was pinged and when it was closed, counted
    /// from the start.
    struct Seen {
        var pings: [Duration] = []
        var closed: (at: Duration, reason: CloseReason)?
    }

    /// Runs the core from deadline to deadline until `end`, calling `between` at every step (to let
    /// the session speak) and `onPing` for each ping (to answer it, or not).
    static func run(
        _ h: inout CoreHarness, _ id: ConnectionID, until end: Duration,
        onPing: (inout CoreHarness, Duration) -> Void = { _, _ in }
    ) -> Seen {
        var seen = Seen()
        while let next = h.core.nextDeadline, next <= h.start + end, seen.closed == nil {
            h.advance(h.now.duration(to: next))
            for action in h.handle(.timeout) {
                switch action {
                case .ping(let pinged) where pinged == id:
                    seen.pings.append(h.elapsed)
                    onPing(&h, h.elapsed)
                case .close(let closed, let reason, _) where closed == id:
                    seen.closed = (h.elapsed, reason)
                default: break
                }
            }
        }
        return seen
    }

    @Test func aSilentSessionIsPingedOnceThenClosedWithinTheIdleTimeoutAndATenth() {
        var h = Self.harness()
        h.hello(1, client: "c1")
        h.handle(.loaded(workspaceId: "w", .success(nil)))
        let heardAt = h.elapsed  // the Hello: its last frame
        let seen = Self.run(&h, 1, until: .seconds(600))
        #expect(seen.pings.count == 1)
        let ping = seen.pings.first ?? .zero
        let window = ServerCore.pingWindow
        #expect(ping - heardAt >= Self.idle * window.lowerBound
            && ping - heardAt <= Self.idle * window.upperBound + .milliseconds(100))
        let closed = try! #require(seen.closed)
        #expect(closed.reason == .idleTimeout && closed.reason.code == 1006 && !closed.reason.flushesQueue)
        #expect(closed.at - heardAt >= Self.idle && closed.at - heardAt <= Self.idle * 1.1)
        #expect(h.core.metrics.idleTimeouts == 1 && h.core.metrics.pingsSent == 1)
    }

    @Test func aSessionThatAnswersPingsIsNeverClosed() {
        var h = Self.harness()
        h.hello(1, client: "c1")
        let seen = Self.run(&h, 1, until: Self.idle * 20) { h, _ in h.handle(.pong(1)) }
        #expect(seen.closed == nil)
        #expect(seen.pings.count >= 20)  // one per ping interval (0.75 to 0.9 of the idle timeout)
    }

    @Test func aSessionThatSendsFramesIsNeverPingedNorClosed() {
        var h = Self.harness()
        h.hello(1, client: "c1")
        var seen = Seen()
        for _ in 0..<40 {
            // A focus change every 0.3 of the idle timeout: always heard from before its ping.
            let target = h.elapsed + Self.idle * 0.3
            let step = Self.run(&h, 1, until: target)
            seen.pings += step.pings
            seen.closed = seen.closed ?? step.closed
            h.advance(target - h.elapsed)
            h.send(1, .init(focus: .init(tabId: "")))
        }
        #expect(seen.closed == nil && seen.pings.isEmpty)
    }

    @Test func aLatePongKeepsTheSessionAndALostOneDoesNot() {
        // Late: the pong comes just before the hangup.
        var late = Self.harness()
        late.hello(1, client: "c1")
        var lateSeen = Self.run(&late, 1, until: Self.idle * 0.99) { _, _ in }
        #expect(lateSeen.pings.count == 1 && lateSeen.closed == nil)
        late.advance(late.start + Self.idle * 0.99 - late.now)
        late.handle(.pong(1))
        let heardAt = late.elapsed
        lateSeen = Self.run(&late, 1, until: Self.idle * 3)
        #expect(lateSeen.pings.count == 1)  // the next silence's ping
        #expect((lateSeen.closed?.at ?? .zero) - heardAt >= Self.idle)

        // Lost: the ping goes out, nothing comes back; an unasked pong before the ping does not
        // count for the silence after it.
        var lost = Self.harness()
        lost.hello(1, client: "c1")
        lost.advance(.seconds(10))
        lost.handle(.pong(1))
        let lostSeen = Self.run(&lost, 1, until: Self.idle * 3)
        #expect(lostSeen.pings.count == 1)
        let closed = try! #require(lostSeen.closed)
        #expect(closed.at - .seconds(10) >= Self.idle && closed.at - .seconds(10) <= Self.idle * 1.1)
    }

    @Test func hearingFromASessionMovesNoDeadline() {
        var h = Self.harness()
        h.hello(1, client: "c1")
        let before = h.core.nextDeadline
        h.advance(.seconds(5))
        #expect(h.handle(.pong(1)).isEmpty && h.core.nextDeadline == before)
        // The first answer after a ping moves the deadline (then the hangup) to the next ping,
        // and the core's next deadline with it when that is earlier.
        let pingAfter = h.core.sessions[1]!.pingAfter
        var pinged = false
        while !pinged, let next = h.core.nextDeadline, next < h.start + Self.idle * 2 {
            h.advance(h.now.duration(to: next))
            pinged = h.handle(.timeout).contains { if case .ping(1) = $0 { true } else { false } }
        }
        #expect(pinged)
        let hangup = h.core.nextDeadline!
        h.advance(.milliseconds(10))
        h.handle(.pong(1))
        let next = h.core.deadlines.deadline(1, .keepalive)!
        #expect(next >= h.now + pingAfter && next < h.now + pingAfter + .milliseconds(100) && next != hangup)
        #expect(h.core.nextDeadline == min(next, hangup))
    }

    /// Sessions opened in one instant ping apart: 2,000 at once ping over at least a sixth of the
    /// idle timeout, no 100 ms holding more than 2% of them.
    @Test func pingsOfSessionsOpenedTogetherSpread() {
        var h = Self.harness()
        for id in 1...2_000 { h.handle(.connected(id, format: .proto, echo: true)) }
        var pings: [Duration: Int] = [:]
        let window = ServerCore.pingWindow
        while let next = h.core.nextDeadline, next <= h.start + Self.idle * (window.upperBound + 0.05) {
            h.advance(h.now.duration(to: next))
            for case .ping(let id) in h.handle(.timeout) {
                pings[h.elapsed, default: 0] += 1
                h.handle(.pong(id))
            }
        }
        #expect(pings.values.reduce(0, +) == 2_000)
        let times = pings.keys.sorted()
        // Spread over (nearly) the whole window, and no grain holds much more than its share: the
        // window is 9 s of 100 ms grains, 22 pings each on average.
        let width = window.upperBound - window.lowerBound
        #expect(times.last! - times.first! >= Self.idle * (width * 0.9))
        let grains = width * Double(Self.idle / ServerCore.keepaliveGrain(Self.idle))
        #expect(Double(pings.values.max()!) <= 2.5 * 2_000 / grains)
    }

    @Test func withoutAnIdleTimeoutNothingIsPinged() {
        var h = CoreHarness()
        h.handle(.connected(1, format: .proto, echo: true))
        #expect(h.core.nextDeadline == nil)
    }
}
