import Dispatch
import Foundation
import Testing
import TabsyncCore
@testable import TabsyncStore

/// What only the PostgreSQL store does: migration under a lock, NOTIFY to other nodes' listeners,
/// parameterised binary-safe statements. The contract itself runs in the Store contract suites.
@Suite("PostgreSQL store", .enabled(if: PostgresTestDatabase.isEnabled, PostgresTestDatabase.skipReason))
struct PostgresStoreTests {
    @Test func nodesMigratingAtOnceCreateOneSchemaAndAgreeOnTheEpoch() throws {
        let schema = try PostgresSchema()
        let epochs = Inbox<Result<String, PostgresStore.OpenError>>()
        DispatchQueue.concurrentPerform(iterations: 4) { index in
            do throws(PostgresStore.OpenError) {
                if index == 0 {
                    try PostgresStore.migrate(url: schema.url, options: schema.options())
                } else {
                    let store = try PostgresStore(url: schema.url, options: schema.options())
                    epochs.append(.success(store.epoch))
                    store.close()
                }
            } catch {
                epochs.append(.failure(error))
            }
        }
        let results = epochs.all
        #expect(results.count == 3)
        let values = try results.map { try $0.get() }
        #expect(Set(values).count == 1)
        #expect(try schema.scalar("SELECT value FROM tabsync_meta WHERE key = 'schema_version'") == "\(PostgresStore.schemaVersion)")
        #expect(try schema.scalar("SELECT value FROM tabsync_meta WHERE key = 'epoch'") == values.first)
        #expect(try schema.scalar("SELECT count(*)::text FROM pg_tables WHERE schemaname = $1 AND tablename LIKE 'tabsync_%'",
                                  [.text(schema.name)]) == "7")
    }

    @Test func aNewerSchemaIsRefusedAndLeftAlone() throws {
        let schema = try PostgresSchema()
        _ = try PostgresStore(url: schema.url, options: schema.options())
        try schema.scalar("UPDATE tabsync_meta SET value = '99' WHERE key = 'schema_version'")
        #expect(throws: PostgresStore.OpenError.newerSchema(found: 99, supported: PostgresStore.schemaVersion)) {
            _ = try PostgresStore(url: schema.url, options: schema.options())
        }
        #expect(try schema.scalar("SELECT value FROM tabsync_meta WHERE key = 'schema_version'") == "99")
    }

    @Test func anUnreachableServerFailsTheOpenQuickly() throws {
        let started = ContinuousClock.now
        // Port 1 on loopback: nothing listens there.
        #expect(throws: PostgresStore.OpenError.self) {
            _ = try PostgresStore(url: "postgres://postgres@127.0.0.1:1/postgres")
        }
        #expect(ContinuousClock.now - started < .seconds(5))
    }

    @Test func valuesTravelAsParametersAndBytesRoundTrip() throws {
        let schema = try PostgresSchema()
        let store = try PostgresStore(url: schema.url, options: schema.options())
        let id = "w'); DROP TABLE tabsync_ops; --\"ü🙂:1"
        var driver = Driver(epoch: store.epoch)
        let title = "quote ' backslash \\ dollar $1 emoji 🙂 percent %s"
        driver.submit(id, "client 'x'", 1, .add(tab: Tab(id: "t.1:x", title: title, url: "https://e.com/?q='a'"), place: .end, activate: true))
        try store.commit(driver.takeBatch())
        let stored = try #require(try store.load(workspaceId: id))
        #expect(stored.workspace == driver.sequencer(id).workspace)
        #expect(stored.workspace.tabs.first?.title == title)
        #expect(stored.lastSeqs == ["client 'x'": 1])
    }

    @Test func everyCommitNotifiesOncePerWorkspaceAndTheListenerReceivesIt() throws {
        let schema = try PostgresSchema()
        let store = try PostgresStore(url: schema.url, options: schema.options())
        let events = Inbox<PostgresListener.Event>()
        let listener = PostgresListener(url: schema.url, store: schema.options()) { events.append($0) }
        listener.start()
        defer { listener.stop() }
        #expect(events.wait { $0.contains(.listening(reconnected: false)) })

        var driver = Driver(epoch: store.epoch)
        for seq in UInt64(1)...5 { driver.submit("w", "c", seq, .add(tab: Tab(id: "t\(seq)"), place: .end, activate: false)) }
        driver.submit("v", "c", 1, .add(tab: Tab(id: "a"), place: .end, activate: false))
        driver.submit("v", "c", 2, .remove(tabId: "ghost"))
        try store.commit(driver.takeBatch())
        driver.submit("w", "c", 6, .remove(tabId: "t1"))
        try store.commit(driver.takeBatch())

        // One notification per workspace per batch, in commit order (never one per op).
        #expect(events.wait { $0.contains(.committed(workspaceId: "w", version: 6)) })
        #expect(events.all.filter { if case .committed = $0 { true } else { false } } == [
            .committed(workspaceId: "v", version: 1), .committed(workspaceId: "w", version: 5),
            .committed(workspaceId: "w", version: 6),
        ])
    }

    @Test func aListenerWhoseConnectionIsKilledReconnectsAndListensAgain() throws {
        let schema = try PostgresSchema()
        let store = try PostgresStore(url: schema.url, options: schema.options())
        let application = "tabsync-test-" + schema.name
        let events = Inbox<PostgresListener.Event>()
        let listener = PostgresListener(
            url: schema.url, store: schema.options(applicationName: application),
            options: .init(keepaliveSeconds: 0.5, keepaliveTimeoutSeconds: 2)
        ) { events.append($0) }
        listener.start()
        defer { listener.stop() }
        #expect(events.wait { $0.contains(.listening(reconnected: false)) })

        let killed = try schema.scalar(
            "SELECT count(pg_terminate_backend(pid))::text FROM pg_stat_activity WHERE application_name = $1",
            [.text(application + " listener")])
        #expect(killed == "1")
        #expect(events.wait { $0.contains(.listening(reconnected: true)) })
        #expect(events.all.contains { if case .disconnected = $0 { true } else { false } })

        var driver = Driver(epoch: store.epoch)
        driver.submit("w", "c", 1, .add(tab: Tab(id: "x"), place: .end, activate: true))
        try store.commit(driver.takeBatch())
        #expect(events.wait { $0.contains(.committed(workspaceId: "w", version: 1)) })
    }

    /// The commit round trip on loopback (BEGIN, version row, dedup row, op, COMMIT with fsync),
    /// printed for BENCHMARKS.md: median and p90 of 300 one-op commits.
    @Test func commitRoundTripOnLoopback() throws {
        let schema = try PostgresSchema()
        let store = try PostgresStore(url: schema.url, options: schema.options())
        var driver = Driver(epoch: store.epoch)
        var durations: [Duration] = []
        for seq in UInt64(1)...300 {
            driver.submit("w", "c", seq, .update(TabUpdate(tabId: "t", title: "x")))
            if seq == 1 { driver.submit("w", "setup", 1, .add(tab: Tab(id: "t"), place: .end, activate: true)) }
            var batch = driver.takeBatch()
            batch.baseVersions = ["w": seq == 1 ? 0 : driver.sequencer("w").workspace.version - 1]
            let started = ContinuousClock.now
            try store.commit(batch)
            durations.append(ContinuousClock.now - started)
        }
        durations.sort()
        print("PostgreSQL commit round trip, 300 one-op commits: median \(durations[150]), p90 \(durations[270])")
        #expect(try store.load(workspaceId: "w")?.workspace.version == 300)
    }

    @Test func payloadsParseWithColonsInTheWorkspaceId() {
        #expect(PostgresListener.parse("a:b:12") == .committed(workspaceId: "a:b", version: 12))
        #expect(PostgresListener.parse("nothing") == nil)
        #expect(PostgresListener.parse("w:x") == nil)
    }
}
