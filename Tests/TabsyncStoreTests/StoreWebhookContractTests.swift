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
