import Foundation
import Testing
import TabsyncCore
@testable import TabsyncStore
import TabsyncTestSupport

/// The webhook part of the store contract (``WebhookStore``'s doc comment) on the memory, SQLite and
/// PostgreSQL stores, and a file made by the release before webhooks, migrated.
@Suite("Store webhook contract")
struct StoreWebhookContractTests {
    static let created = Date(timeIntervalSince1970: 1_795_000_000.123)

    static func hook(_ id: String, workspaces: String = "team-*") -> WebhookRegistration {
        WebhookRegistration(
            id: id, url: "https://hooks.example.com/\(id)", workspaces: workspaces,
            secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", createdAt: created)
    }

    /// team-a at version 2, team-b at 1, other at 1.
    static func threeWorkspaces(_ store: any WorkspaceStore) throws {
        var driver = Driver(epoch: store.epoch)
        driver.submit("team-a", "c1", 1, .add(tab: Tab(id: "a"), place: .end, activate: true))
        driver.submit("team-a", "c1", 2, .add(tab: Tab(id: "b"), place: .end, activate: false))
        driver.submit("team-b", "c1", 1, .add(tab: Tab(id: "a"), place: .end, activate: true))
        driver.submit("other", "c1", 1, .add(tab: Tab(id: "a"), place: .end, activate: true))
        try store.commit(driver.takeBatch())
    }

    @Test(arguments: StoreKind.allCases)
    func aHookStartsAtTheMatchingWorkspacesPresentVersionsAndOutlivesARestart(kind: StoreKind) throws {
        let harness = try StoreHarness(kind)
        try Self.threeWorkspaces(harness.store)
        let hooks = try #require(harness.store as? any WebhookStore)
        try hooks.registerWebhook(Self.hook("wh_1"), matching: { $0.hasPrefix("team-") })
        var second = Self.hook("wh_2", workspaces: "*")
        second.disabledReason = "deliveries failed for 24 h"
        try hooks.registerWebhook(second, matching: { _ in true })
        try harness.restart()

        let again = try #require(harness.store as? any WebhookStore)
        #expect(try again.webhooks() == [Self.hook("wh_1"), second])
        #expect(try again.webhooks().map(\.isEnabled) == [true, false])
        #expect(try again.webhookCursors(hookId: "wh_1") == [
            WebhookCursor(hookId: "wh_1", workspace: "team-a", delivered: 2),
            WebhookCursor(hookId: "wh_1", workspace: "team-b", delivered: 1),
        ])
        #expect(try again.webhookCursors(hookId: "wh_2").map(\.workspace) == ["other", "team-a", "team-b"])
        #expect(try again.webhookCursors(hookId: "wh_none").isEmpty)
    }

    @Test(arguments: StoreKind.allCases)
    func aSecondHookWithTheSameIdIsRefusedAndChangesNothing(kind: StoreKind) throws {
        let harness = try StoreHarness(kind)
        try Self.threeWorkspaces(harness.store)
        let hooks = try #require(harness.store as? any WebhookStore)
        try hooks.addWebhook(Self.hook("wh_1"), cursors: ["team-a": 1])
        var clash = Self.hook("wh_1", workspaces: "other")
        clash.url = "https://elsewhere.example.com/"
        #expect(throws: StoreError.self) { try hooks.addWebhook(clash, cursors: ["other": 1]) }
        #expect(try hooks.webhooks() == [Self.hook("wh_1")])
        #expect(try hooks.webhookCursors(hookId: "wh_1").map(\.workspace) == ["team-a"])
    }

    @Test(arguments: StoreKind.allCases)
    func aCursorNeverMovesBackAndARemovedHookTakesItsCursorsAlong(kind: StoreKind) throws {
        let harness = try StoreHarness(kind)
        let hooks = try #require(harness.store as? any WebhookStore)
        try hooks.addWebhook(Self.hook("wh_1"), cursors: [:])
        try hooks.saveWebhookCursor(WebhookCursor(hookId: "wh_1", workspace: "team-a", delivered: 5))
        // An older save (a deliverer that lost a race) does not take the cursor back.
        try hooks.saveWebhookCursor(WebhookCursor(hookId: "wh_1", workspace: "team-a", delivered: 3))
        #expect(try hooks.webhookCursors(hookId: "wh_1").map(\.delivered) == [5])
        let failed = WebhookCursor(
            hookId: "wh_1", workspace: "team-a", delivered: 5, attempts: 2,
            firstFailure: Date(timeIntervalSince1970: 1_795_000_100.5), nextAttempt: Date(timeIntervalSince1970: 1_795_000_104.25))
        try hooks.saveWebhookCursor(failed)
        try harness.restart()

        let again = try #require(harness.store as? any WebhookStore)
        #expect(try again.webhookCursors(hookId: "wh_1") == [failed])
        try again.saveWebhookCursor(WebhookCursor(hookId: "wh_1", workspace: "team-a", delivered: 6))
        #expect(try again.webhookCursors(hookId: "wh_1") == [WebhookCursor(hookId: "wh_1", workspace: "team-a", delivered: 6)])

        #expect(try again.removeWebhook(id: "wh_1"))
        #expect(try again.webhooks().isEmpty)
        #expect(try again.webhookCursors(hookId: "wh_1").isEmpty)
        // A deliverer racing the removal does not bring the cursor back.
        try again.saveWebhookCursor(WebhookCursor(hookId: "wh_1", workspace: "team-a", delivered: 7))
        #expect(try again.webhookCursors(hookId: "wh_1").isEmpty)
        #expect(try !again.removeWebhook(id: "wh_1"))
    }

    @Test(arguments: StoreKind.allCases)
    func aDisabledHookKeepsItsReasonAndCursorsAndEnablingClearsThePendingAttempt(kind: StoreKind) throws {
        let harness = try StoreHarness(kind)
        let hooks = try #require(harness.store as? any WebhookStore)
        try hooks.addWebhook(Self.hook("wh_1"), cursors: [:])
        let failing = WebhookCursor(
            hookId: "wh_1", workspace: "team-a", delivered: 4, attempts: 9,
            firstFailure: Date(timeIntervalSince1970: 1_795_000_100.5), nextAttempt: Date(timeIntervalSince1970: 1_795_000_700.25))
        try hooks.saveWebhookCursor(failing)
        let at = Date(timeIntervalSince1970: 1_795_086_500.75)
        #expect(try hooks.disableWebhook(id: "wh_1", reason: "HTTP 500 since 2026-11-16T10:55:00Z", at: at))
        #expect(try !hooks.disableWebhook(id: "wh_1", reason: "again", at: at), "a disabled hook is not disabled again")
        #expect(try !hooks.disableWebhook(id: "wh_none", reason: "x", at: at))
        try harness.restart()

        let again = try #require(harness.store as? any WebhookStore)
        let disabled = try #require(try again.webhooks().first)
        #expect(!disabled.isEnabled)
        #expect(disabled.disabledReason == "HTTP 500 since 2026-11-16T10:55:00Z")
        #expect(disabled.disabledAt == at)
        #expect(try again.webhookCursors(hookId: "wh_1") == [failing])

        #expect(try again.enableWebhook(id: "wh_1"))
        #expect(try !again.enableWebhook(id: "wh_none"))
        #expect(try again.webhooks() == [Self.hook("wh_1")])
        #expect(try again.webhookCursors(hookId: "wh_1") == [WebhookCursor(hookId: "wh_1", workspace: "team-a", delivered: 4)])
    }

    // MARK: compaction and cursors

    /// How many ops after `version` the store's log still holds of `id`; nil: compacted past it.
    /// Asked both ways a reader asks: a catch-up's `changes(after:)` and the deliverer's
    /// `ops(workspaceId:after:limit:)` (which must read the log, not a load's window).
    static func opsHeld(_ store: any WorkspaceStore, _ id: String, after version: UInt64) throws -> Int? {
        let read = try store.ops(workspaceId: id, after: version, limit: 1_000)
        guard case .changes(let ops, _)? = try store.changes(after: [id: version])[id] else {
            #expect(read == nil, "changes(after:) and ops(after:) disagree after \(version)")
            return nil
        }
        #expect(read?.count == ops.count, "changes(after:) and ops(after:) disagree after \(version)")
        return ops.count
    }

    /// Commits `count` ops to `id` in batches of 6 (a log of 10 ops, a snapshot every 5).
    static func commit(_ count: Int, to id: String, _ driver: inout Driver, _ store: any WorkspaceStore) throws {
        var done = 0
        while done < count {
            let n = min(6, count - done)
            for _ in 0..<n {
                let seq = driver.sequencer(id).lastSeq(of: "c1") + 1
                driver.submit(id, "c1", seq, .add(tab: Tab(id: "t\(seq)"), place: .end, activate: false))
            }
            try store.commit(driver.takeBatch())
            done += n
        }
    }

    /// A store of `kind` (a log of 10 ops, a snapshot every 5, loads of 10 ops) with `first` ops in `id`, and hook
    /// `wh_1` with its cursor of `id` at `first`.
    static func hooked(_ kind: StoreKind, _ id: String, first: Int) throws -> (StoreHarness, Driver) {
        // A load reads the retention's window, as the server sets it.
        var options = SQLiteStore.Options(snapshotInterval: 5)
        options.loadWindow = 10
        let harness = try StoreHarness(kind, options: options)
        var driver = Driver(epoch: harness.store.epoch, limits: Limits(logRetention: 10))
        try commit(first, to: id, &driver, harness.store)
        let hooks = try #require(harness.store as? any WebhookStore)
        try hooks.addWebhook(hook("wh_1"), cursors: [id: UInt64(first)])
        return (harness, driver)
    }

    /// Compaction keeps every op after the lowest cursor of an enabled hook (docs/design.md,
    /// "Webhooks", "Compaction and cursors"): a receiver down while five times `logRetention` ops
    /// are committed still gets each of them; a disabled hook holds nothing, and the next
    /// compaction after its hook is disabled trims what it held.
    @Test(arguments: StoreKind.allCases)
    func compactionKeepsWhatAnEnabledHookHasNotDelivered(kind: StoreKind) throws {
        var (harness, driver) = try Self.hooked(kind, "team-a", first: 3)
        let store = harness.store
        let hooks = try #require(store as? any WebhookStore)
        var off = Self.hook("wh_off")
        off.disabledReason = "deliveries failed for 24 h"
        try hooks.addWebhook(off, cursors: ["team-a": 0])

        try Self.commit(50, to: "team-a", &driver, store)
        let version = driver.sequencer("team-a").workspace.version
        #expect(version == 53)
        #expect(try Self.opsHeld(store, "team-a", after: 3) == Int(version - 3), "the hook's undelivered ops are kept")
        #expect(try Self.opsHeld(store, "team-a", after: 0) == nil, "a disabled hook holds nothing")
        try harness.restart()
        let again = try #require(harness.store as? any WebhookStore)
        #expect(try Self.opsHeld(harness.store, "team-a", after: 3) == Int(version - 3), "kept across a restart")

        // Delivered up to 40: the next compaction trims below it, not past it.
        try again.saveWebhookCursor(WebhookCursor(hookId: "wh_1", workspace: "team-a", delivered: 40))
        try Self.commit(6, to: "team-a", &driver, harness.store)
        #expect(try Self.opsHeld(harness.store, "team-a", after: 3) == nil)
        #expect(try Self.opsHeld(harness.store, "team-a", after: 40) != nil)

        // Disabled: released at the next compaction.
        #expect(try again.disableWebhook(id: "wh_1", reason: "gave up", at: Self.created))
        try Self.commit(6, to: "team-a", &driver, harness.store)
        let now = driver.sequencer("team-a").workspace.version
        #expect(try Self.opsHeld(harness.store, "team-a", after: 40) == nil, "the floor went with the hook")
        #expect(try Self.opsHeld(harness.store, "team-a", after: now - 10) == 10, "the retention still holds")
    }

    /// A stuck hook cannot grow the log without bound: it holds at most
    /// `RetentionPlan.hookBacklogFactor` × `logRetention` ops (the hook then gets a `snapshot`).
    @Test(arguments: StoreKind.allCases)
    func aStuckHookHoldsAtMostTenTimesTheRetention(kind: StoreKind) throws {
        var (harness, driver) = try Self.hooked(kind, "team-b", first: 1)
        let store = harness.store
        try Self.commit(130, to: "team-b", &driver, store)
        let version = driver.sequencer("team-b").workspace.version
        let bound = UInt64(10 * RetentionPlan.hookBacklogFactor)
        #expect(try Self.opsHeld(store, "team-b", after: 1) == nil, "trimmed past a hook more than the bound behind")
        #expect(try Self.opsHeld(store, "team-b", after: version - bound) == Int(bound))
    }

    // MARK: the cursor lease (several nodes)

    /// The lease on a hook's cursor (``WebhookStore/claimWebhookCursors``; docs/design.md,
    /// "Webhooks", "Several nodes"), on PostgreSQL with two nodes on one schema: taken by one node,
    /// refused to another until it runs out, renewed by its holder, taken over once run out; a
    /// workspace a live node holds is leased only to that node until it releases it; a removed hook
    /// leases nothing. A store of one writer (memory, SQLite) grants every workspace of a registered
    /// hook to whoever asks.
    @Test(arguments: StoreKind.allCases)
    func theCursorLeaseIsTakenRefusedRenewedTakenOverAndReleased(kind: StoreKind) throws {
        let harness = try StoreHarness(kind)
        let a = try #require(harness.store as? any WebhookStore)
        try a.addWebhook(Self.hook("wh_1"), cursors: ["team-a": 0])
        let t0 = Self.created
        func at(_ seconds: Double) -> Date { t0.addingTimeInterval(seconds) }
        guard let first = a as? PostgresStore else {
            #expect(try a.claimWebhookCursors(hookId: "wh_1", workspaces: ["team-a", "team-b"], node: "x", until: at(30), now: t0)
                == ["team-a", "team-b"])
            #expect(try a.claimWebhookCursors(hookId: "wh_1", workspaces: ["team-a"], node: "y", until: at(31), now: at(1))
                == ["team-a"])
            #expect(try a.claimWebhookCursors(hookId: "wh_none", workspaces: ["team-a"], node: "x", until: at(30), now: t0).isEmpty)
            return
        }
        let second = try #require(try harness.secondWriter() as? PostgresStore)
        defer { second.close() }
        func claim(_ store: PostgresStore, _ workspace: String, until: Double, now: Double) throws -> Bool {
            try store.claimWebhookCursors(
                hookId: "wh_1", workspaces: [workspace], node: store.node, until: at(until), now: at(now)) == [workspace]
        }
        #expect(try claim(first, "team-a", until: 30, now: 0), "taken by the first node to ask")
        #expect(try !claim(second, "team-a", until: 31, now: 1), "refused to another while it runs")
        #expect(try claim(first, "team-a", until: 60, now: 20), "renewed by its holder")
        #expect(try !claim(second, "team-a", until: 75, now: 45), "still refused: the renewal moved its end")
        #expect(try claim(second, "team-a", until: 91, now: 61), "taken over once run out")
        #expect(try !claim(first, "team-a", until: 92, now: 62), "the first node lost it")
        #expect(try second.webhookCursors(hookId: "wh_1").map(\.workspace) == ["team-a"], "one cursor, whoever holds the lease")

        // A workspace a live node holds is leased to that node only, until it releases it.
        _ = try first.hold(workspaceId: "team-b")
        #expect(try !claim(second, "team-b", until: 30, now: 0), "not the holder of team-b")
        try first.release(workspaceIds: ["team-b"])
        #expect(try claim(second, "team-b", until: 30, now: 0), "released: any node may take it")
        #expect(try second.webhookCursors(hookId: "wh_1").first { $0.workspace == "team-b" }?.delivered == 0,
                "a cursor not yet stored is made at 0")

        // A removed hook's cursors go with it, and nothing is leased of it any more.
        #expect(try first.removeWebhook(id: "wh_1"))
        #expect(try !claim(second, "team-a", until: 200, now: 150))
        #expect(try second.webhookCursors(hookId: "wh_1").isEmpty)
    }

    /// The file of the release before groups (schema 5, Fixtures/store-schema5.sqlite3) migrates
    /// through every step to this build's schema and keeps webhooks like a new file.
    @Test func aStoreMadeBeforeWebhooksIsMigratedAndKeepsThem() throws {
        let directory = TemporaryDirectory()
        let path = try fixtureCopy("store-schema5.sqlite3", in: directory)
        var store = try SQLiteStore(path: path)
        #expect(try store.rawQueryForTesting("PRAGMA user_version") == "\(SQLiteStore.schemaVersion)")
        try store.registerWebhook(Self.hook("wh_1", workspaces: "fix*"), matching: { $0.hasPrefix("fix") })
        store.close()
        store = try SQLiteStore(path: path)
        defer { store.close() }
        #expect(try store.webhooks() == [Self.hook("wh_1", workspaces: "fix*")])
        #expect(try store.webhookCursors(hookId: "wh_1") == [WebhookCursor(hookId: "wh_1", workspace: "fixture", delivered: 6)])
    }
}
