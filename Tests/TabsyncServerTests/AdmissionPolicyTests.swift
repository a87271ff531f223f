import Testing
@testable import TabsyncServer

/// The pure admission rules: per-address counts and token buckets, the origin policy, and which
/// binds count as loopback.
@Suite("Admission policy")
struct AdmissionPolicyTests {
    let start = ContinuousClock.now

    @Test func eachAddressHoldsAtMostItsCapAndGetsSlotsBack() {
        var control = AdmissionControl(limits: .init(maxConnections: 3, handshakesPerSecond: 0, handshakeBurst: 0))
        let a = (0..<5).map { _ in control.admit("10.0.0.1", now: start) }
        #expect(a == [nil, nil, nil, .ipConnections, .ipConnections])
        #expect(control.admit("10.0.0.2", now: start) == nil, "another address is not affected")
        control.release("10.0.0.1")
        #expect(control.openConnections("10.0.0.1") == 2)
        #expect(control.admit("10.0.0.1", now: start) == nil)
        #expect(control.admit("10.0.0.1", now: start) == .ipConnections)
    }

    @Test func theHandshakeBucketAllowsTheBurstThenTheRate() {
        var control = AdmissionControl(limits: .init(maxConnections: 0, handshakesPerSecond: 4, handshakeBurst: 2))
        #expect(control.admit("a", now: start) == nil)
        #expect(control.admit("a", now: start) == nil)
        #expect(control.admit("a", now: start) == .ipHandshakeRate)
        #expect(control.admit("b", now: start) == nil, "another address has its own bucket")
        // 4 per second: one more after 250 ms, not before.
        #expect(control.admit("a", now: start + .milliseconds(200)) == .ipHandshakeRate)
        #expect(control.admit("a", now: start + .milliseconds(260)) == nil)
        // A long pause refills up to the burst only.
        let later = start + .seconds(60)
        #expect((0..<3).map { _ in control.admit("a", now: later) } == [nil, nil, .ipHandshakeRate])
    }

    @Test func overAnyIntervalAnAddressIsAdmittedAtMostBurstPlusRateTimesTime() {
        var control = AdmissionControl(limits: .init(maxConnections: 0, handshakesPerSecond: 10, handshakeBurst: 5))
        var admitted = 0
        // A flood: one attempt every millisecond for 2 s.
        for ms in 0..<2000 where control.admit("flood", now: start + .milliseconds(ms)) == nil { admitted += 1 }
        #expect(admitted <= 5 + 20)
        #expect(admitted >= 5 + 19)
    }

    @Test func idleAddressesAreForgottenAndNothingIsRecordedWithoutLimits() {
        var control = AdmissionControl(limits: .init(maxConnections: 2, handshakesPerSecond: 1, handshakeBurst: 1))
        _ = control.admit("a", now: start)
        _ = control.admit("b", now: start)
        control.release("b")
        control.prune(now: start + .milliseconds(100))
        #expect(control.trackedAddresses == 2, "b's bucket is not full yet")
        control.prune(now: start + .seconds(2))
        #expect(control.trackedAddresses == 1, "only a, which holds a connection, is left")

        var off = AdmissionControl(limits: .unlimited)
        #expect(!off.isActive)
        for _ in 0..<100 { #expect(off.admit("a", now: start) == nil) }
        #expect(off.trackedAddresses == 0)
    }

    @Test func originPolicyByConfiguration() {
        let loopback = OriginPolicy(allowed: [], authEnabled: false, loopbackBind: true)
        #expect(loopback.allows(nil))
        #expect(loopback.allows("http://localhost:3000"))
        #expect(loopback.allows("https://127.0.0.1"))
        #expect(loopback.allows("http://[::1]:8080"))
        #expect(!loopback.allows("http://localhost.evil.example"))
        #expect(!loopback.allows("http://127.0.0.1.evil.example"))
        #expect(!loopback.allows("https://evil.example"))
        #expect(!loopback.allows("null"))

        let exposed = OriginPolicy(allowed: [], authEnabled: false, loopbackBind: false)
        #expect(exposed.allows(nil))
        #expect(!exposed.allows("http://localhost:3000"))

        let authenticated = OriginPolicy(allowed: [], authEnabled: true, loopbackBind: false)
        #expect(authenticated.allows("https://anything.example"))

        let listed = OriginPolicy(allowed: ["https://tabs.example.com", "http://localhost:8080/"], authEnabled: true, loopbackBind: false)
        #expect(listed.allows("https://tabs.example.com"))
        #expect(listed.allows("https://Tabs.Example.com:443"))
        #expect(listed.allows("http://localhost:8080"))
        #expect(!listed.allows("http://localhost:8081"))
        #expect(!listed.allows("https://anything.example"), "a list replaces the default")
        #expect(OriginPolicy(allowed: ["*"], authEnabled: false, loopbackBind: false).allows("https://x.example"))
    }

    @Test func allowOriginEntriesAreValidated() {
        for good in ["*", "null", "https://a.example", "http://localhost:3000", "https://a.example/"] {
            #expect(OriginPolicy.isValidEntry(good), "\(good)")
        }
        for bad in ["a.example", "ftp://a.example", "https://a.example/path", "https://user@a.example", "https://", ""] {
            #expect(!OriginPolicy.isValidEntry(bad), "\(bad)")
        }
    }

    @Test func loopbackBinds() {
        func loopback(_ address: String) -> Bool {
            Server.isLoopback(Server.ResolvedHost(address: address, isIPv6: address.contains(":")))
        }
        #expect(loopback("127.0.0.1"))
        #expect(loopback("127.1.2.3"))
        #expect(loopback("::1"))
        #expect(loopback("::ffff:127.0.0.1"))
        #expect(!loopback("0.0.0.0"))
        #expect(!loopback("::"))
        #expect(!loopback("10.0.0.1"))
        #expect(!loopback("192.168.1.10"))
    }

    @Test func refusalsAreCountedInMetricsByReason() {
        var driver = DriverMetrics()
        driver.connectionsRefused[.ipHandshakeRate, default: 0] += 3
        let text = Metrics().render(.init(connections: 0, socketsOpen: 0, workspacesLoaded: 0, sendQueueBytes: 0), driver: driver)
        #expect(text.contains("tabsync_connections_refused_total{reason=\"ip_handshake_rate\"} 3"))
        #expect(text.contains("tabsync_connections_refused_total{reason=\"ip_connections\"} 0"))
        #expect(text.contains("tabsync_connections_refused_total{reason=\"origin\"} 0"))
        #expect(text.contains("# TYPE tabsync_connections_refused_total counter"))
    }
}
