import Dispatch
import Foundation
import Testing
import TabsyncTestSupport
import TabsyncCore
@testable import TabsyncStore

/// What only the PostgreSQL store does: migration under a lock, NOTIFY to other nodes' listeners,
/// parameterised binary-safe statements. The contract itself runs in the Store contract suites.
@Suite("PostgreSQL store", .enabled(if: PostgresTestCluster.isEnabled, PostgresTestCluster.skipReason))
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
                                  [.text(schema.name)]) == "13")  // with tabsync_admin_log, tabsync_milestones and the two of webhooks
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

    /// A store on a fresh schema (dropped when `schema` goes) and a listener on its channel,
    /// listening (its events in the inbox). `heldElsewhere`: workspaces another node holds, so
    /// commits to them notify (``HolderRegistry``: a commit notifies only then).
    static func storeAndListener(heldElsewhere: [String] = ["v", "w"]) throws
        -> (schema: PostgresSchema, store: PostgresStore, listener: PostgresListener, events: Inbox<PostgresListener.Event>) {
        let schema = try PostgresSchema()
        let store = try PostgresStore(url: schema.url, options: schema.options())
        try holdElsewhere(heldElsewhere, schema)
        let events = Inbox<PostgresListener.Event>()
        let listener = PostgresListener(url: schema.url, store: schema.options()) { events.append($0) }
        listener.start()
        #expect(events.wait { $0.contains(.listening(reconnected: false)) })
        return (schema, store, listener, events)
    }

    /// Another node, registered as holding `workspaces` (its store then closed; its heartbeat
    /// stays fresh for the holder timeout, longer than any of these tests).
    static func holdElsewhere(_ workspaces: [String], _ schema: PostgresSchema) throws {
        let other = try PostgresStore(url: schema.url, options: schema.options())
        defer { other.close() }
        for id in workspaces { _ = try other.hold(workspaceId: id) }
    }

    @Test func everyCommitNotifiesOncePerWorkspaceAndTheListenerReceivesIt() throws {
        let (schema, store, listener, events) = try Self.storeAndListener()
        defer { listener.stop(); withExtendedLifetime(schema) {} }

        var driver = Driver(epoch: store.epoch)
        for seq in UInt64(1)...5 { driver.submit("w", "c", seq, .add(tab: Tab(id: "t\(seq)"), place: .end, activate: false)) }
        driver.submit("v", "c", 1, .add(tab: Tab(id: "a"), place: .end, activate: false))
        driver.submit("v", "c", 2, .remove(tabId: "ghost"))
        try store.commit(driver.takeBatch())
        driver.submit("w", "c", 6, .remove(tabId: "t1"))
        try store.commit(driver.takeBatch())

        // One notification per workspace per batch, in commit order (never one per op).
        let committed = { (all: [PostgresListener.Event]) in all.compactMap { if case .committed(let n) = $0 { n } else { nil } } }
        #expect(events.wait { committed($0).contains { $0.workspaceId == "w" && $0.version == 6 } })
        let notifications = committed(events.all)
        #expect(notifications.map { "\($0.workspaceId):\($0.version)" } == ["v:1", "w:5", "w:6"])
        // Each carries its batch, as the store has it: what a node at the base version needs.
        guard notifications.count == 3 else { return }
        guard case .changes(let storedW, _)? = try store.changes(after: ["w": 0])["w"] else {
            Issue.record("no stored changes of w")
            return
        }
        #expect(notifications[1].changes?.base == 0)
        #expect(notifications[1].changes?.ops == Array(storedW.prefix(5)))
        #expect(notifications[1].changes?.lastSeqs == ["c": 5])
        #expect(notifications[2].changes?.base == 5)
        #expect(notifications[2].changes?.ops == [storedW[5]])
        #expect(notifications[0].changes?.ops.map(\.version) == [1])
        #expect(notifications[0].changes?.refusals == [Sequencer.Rejection(clientId: "c", seq: 2, error: .tabGone("ghost"))])
        #expect(notifications[0].changes?.lastSeqs == ["c": 2])
    }

    /// A node's listener skips its own store connection's notifications (it knows its commits from
    /// their results) and still gets every other writer's.
    @Test func aListenerSkipsItsOwnStoresNotificationsOnly() throws {
        let schema = try PostgresSchema()
        let mine = try PostgresStore(url: schema.url, options: schema.options())
        let other = try PostgresStore(url: schema.url, options: schema.options())
        try Self.holdElsewhere(["v", "w"], schema)
        let events = Inbox<PostgresListener.Event>()
        let listener = PostgresListener(url: schema.url, store: schema.options(), ownBackend: { mine.backendPID }) {
            events.append($0)
        }
        listener.start()
        defer { listener.stop() }
        #expect(events.wait { $0.contains(.listening(reconnected: false)) })
        var driver = Driver(epoch: mine.epoch)
        driver.submit("w", "c", 1, .add(tab: Tab(id: "a"), place: .end, activate: true))
        try mine.commit(driver.takeBatch())
        #expect(mine.backendPID != 0)
        var otherDriver = Driver(epoch: other.epoch)
        otherDriver.submit("v", "d", 1, .add(tab: Tab(id: "b"), place: .end, activate: true))
        try other.commit(otherDriver.takeBatch())
        // Notifications arrive in commit order: once v's is here, w's would have been too.
        let committed = { (all: [PostgresListener.Event]) in all.compactMap { if case .committed(let n) = $0 { n.workspaceId } else { nil } } }
        #expect(events.wait { committed($0).contains("v") })
        #expect(committed(events.all) == ["v"])
    }

    /// A batch too big for a notification's 8,000 bytes announces its version only (the other
    /// nodes read it): the payload is never refused, and the commit goes through.
    @Test func aBatchTooBigForItsNotificationAnnouncesItsVersionOnly() throws {
        let (schema, store, listener, events) = try Self.storeAndListener(heldElsewhere: ["big"])
        defer { listener.stop(); withExtendedLifetime(schema) {} }
        var driver = Driver(epoch: store.epoch)
        let long = "https://example.com/" + String(repeating: "x", count: 1_900)
        for seq in UInt64(1)...4 {
            driver.submit("big", "c", seq, .add(tab: Tab(id: "t\(seq)", url: long), place: .end, activate: false))
        }
        try store.commit(driver.takeBatch())
        let committed = { (all: [PostgresListener.Event]) in all.compactMap { if case .committed(let n) = $0 { n } else { nil } } }
        #expect(events.wait { committed($0).contains { $0.workspaceId == "big" } })
        #expect(committed(events.all).map { "\($0.workspaceId):\($0.version)" } == ["big:4"])
        #expect(committed(events.all).first?.changes == nil)
        #expect(try store.load(workspaceId: "big")?.workspace.version == 4)
    }

    @Test func aListenerWhoseConnectionIsKilledReconnectsAndListensAgain() throws {
        let schema = try PostgresSchema()
        let store = try PostgresStore(url: schema.url, options: schema.options())
        try Self.holdElsewhere(["w"], schema)
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
        #expect(events.wait { $0.contains { if case .committed(let n) = $0 { n.workspaceId == "w" && n.version == 1 } else { false } } })
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

    @Test func payloadsParseBackToWhatTheyWereMadeFromOrToTheVersionAlone() throws {
        let op = AppliedOp(version: 8, op: .add(tab: Tab(id: "t", title: "🙂 \"q\" :"), place: .end, activate: true),
                           clientId: "c:1", seq: 3, activeTabId: "t")
        let changes = CommitNotification.Changes(
            base: 7, ops: [op], refusals: [Sequencer.Rejection(clientId: "d", seq: 9, error: .locked("u"))], lastSeqs: ["c:1": 3, "d": 9])
        let full = CommitNotification(workspaceId: "w.1", version: 8, changes: changes)
        #expect(PostgresListener.parse(full.payload()) == .committed(full))
        #expect(full.payload().hasPrefix("w.1:8:{"))
        // Version only: an older node's payload, or changes that do not fit.
        #expect(PostgresListener.parse("w:12") == .committed(CommitNotification(workspaceId: "w", version: 12)))
        var huge = changes
        huge.ops = (8...60).map { AppliedOp(version: $0, op: .update(TabUpdate(tabId: "t", title: String(repeating: "y", count: 200))),
                                            clientId: "c", seq: $0, activeTabId: "t") }
        huge.base = 7
        let big = CommitNotification(workspaceId: "w", version: 60, changes: huge)
        #expect(big.payload() == "w:60")
        // Changes that are not whole (a gap, a count that misses the version, bad JSON) are dropped.
        let gap = CommitNotification(workspaceId: "w", version: 9, changes: changes)  // one op for two versions
        #expect(PostgresListener.parse(gap.payload()) == .committed(CommitNotification(workspaceId: "w", version: 9)))
        #expect(PostgresListener.parse("w:8:{not json") == .committed(CommitNotification(workspaceId: "w", version: 8)))
        #expect(PostgresListener.parse("nothing") == nil)
        #expect(PostgresListener.parse("w:x") == nil)
        #expect(PostgresListener.parse(":5") == nil)
    }
}
