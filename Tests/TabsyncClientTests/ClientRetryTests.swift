import Testing
import TabsyncClient
import TabsyncCore
import TabsyncStore
import TabsyncTestServer
import TabsyncTestSupport

/// docs/design.md, 'Transient refusals are retried': against the real server over real sockets, a
/// store that is down answers `UNAVAILABLE` and a connection over its rate `RATE_LIMITED`; the
/// client holds those ops (still shown), sends them again with back-off under new seqs, and each
/// lands exactly once once the server can take it. Nothing is rolled back, nothing doubled.
@Suite(.serialized) struct ClientRetryTests {
    @Test func editsRefusedWhileTheStoreIsDownLandOnceItIsBack() async throws {
        let store = FaultyStore(MemoryStore())
        let server = try TestServer(store: store) { $0.limits.maxOpsPerSecond = 100_000 }
        defer { server.stop() }
        let client = try server.client("editor", workspace: "retry")
        let watcher = try server.client("watcher", workspace: "retry")
        client.start()
        watcher.start()
        try await client.waitUntil { $0.connection == .ready }
        try await watcher.waitUntil { $0.connection == .ready }
        client.submit(.add(tab: Tab(id: "before"), place: .end, activate: true))
        try await client.waitUntil { $0.isSettled }

        store.failing = true
        let first = try #require(client.submit(.add(tab: Tab(id: "a", title: "A"), place: .end, activate: false)))
        let second = try #require(client.submit(.update(TabUpdate(tabId: "before", title: "renamed"))))
        // Both refused (UNAVAILABLE) and held, still shown; retried at least once more while down.
        let held = try await client.waitUntil(timeout: scaled(.seconds(10))) { $0.retries >= 3 }
        #expect(held.rejections.isEmpty, "a transient refusal became a final one: \(held.rejections)")
        #expect(held.optimistic.tabs.map(\.id) == ["before", "a"])
        #expect(held.optimistic.tab("before")?.title == "renamed")
        #expect(held.lastTransientRefusal?.code == .unavailable)

        store.failing = false
        let settled = try await client.waitUntil(timeout: scaled(.seconds(15))) { $0.isSettled }
        #expect(settled.rejections.isEmpty)
        #expect(!settled.isWaiting(firstSeq: first) && !settled.isWaiting(firstSeq: second))
        #expect(settled.confirmed.tabs.map(\.id) == ["before", "a"])
        #expect(settled.confirmed.tab("before")?.title == "renamed")
        // The others see each op once: an add and an update, in the order they were made.
        let seen = try await watcher.waitUntil(timeout: scaled(.seconds(10))) {
            $0.confirmed.version == settled.confirmed.version
        }
        #expect(seen.confirmed == settled.confirmed)
        #expect(settled.confirmed.version == 3, "an op was applied twice or lost: version \(settled.confirmed.version)")
        client.close()
        watcher.close()
    }

    @Test func opsOverTheRateLimitAreSentAgainNotDropped() async throws {
        let server = try TestServer { $0.limits.maxOpsPerSecond = 5 }
        defer { server.stop() }
        let client = try server.client("burst", workspace: "rate")
        client.start()
        try await client.waitUntil { $0.connection == .ready }
        for i in 0..<12 { client.submit(.add(tab: Tab(id: "t\(i)"), place: .end, activate: false)) }
        let settled = try await client.waitUntil(timeout: scaled(.seconds(30))) { $0.isSettled }
        #expect(settled.retries > 0, "the burst was never over the limit: the test proves nothing")
        #expect(settled.rejections.isEmpty, "\(settled.rejections)")
        #expect(Set(settled.confirmed.tabs.map(\.id)) == Set((0..<12).map { "t\($0)" }))
        #expect(settled.confirmed.tabs.count == 12)
        client.close()
    }
}
