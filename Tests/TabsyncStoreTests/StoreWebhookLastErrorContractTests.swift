import Foundation
import Testing
@testable import TabsyncStore

/// A cursor's last error (``WebhookCursor/lastError``, what the admin list shows of a failing
/// delivery) on the memory, SQLite and PostgreSQL stores: kept with the pending attempt across a
/// restart, replaced by the next save (gone once delivered), cleared when the hook is enabled.
@Suite("Store webhook last error contract")
struct StoreWebhookLastErrorContractTests {
    static let failedAt = Date(timeIntervalSince1970: 1_795_000_100.250)

    static func failing(_ attempts: Int, at version: UInt64, _ error: String) -> WebhookCursor {
        WebhookCursor(
            hookId: "wh_1", workspace: "team-a", delivered: version, attempts: attempts, firstFailure: failedAt,
            nextAttempt: failedAt.addingTimeInterval(Double(attempts)), lastError: error)
    }

    @Test(arguments: StoreKind.allCases)
    func aFailedAttemptsErrorIsKeptUntilTheNextSaveOrAnEnable(kind: StoreKind) throws {
        let harness = try StoreHarness(kind)
        let hooks = try #require(harness.store as? any WebhookStore)
        try hooks.addWebhook(StoreWebhookContractTests.hook("wh_1"), cursors: ["team-a": 0])
        let certificate = Self.failing(1, at: 0, "no answer: SSL certificate problem: unable to get local issuer certificate (team-a:1)")
        try hooks.saveWebhookCursor(certificate)
        try harness.restart()

        let again = try #require(harness.store as? any WebhookStore)
        #expect(try again.webhookCursors(hookId: "wh_1") == [certificate])
        let refused = Self.failing(2, at: 0, "refused: loopback (127.0.0.0/8) (team-a:1)")
        try again.saveWebhookCursor(refused)
        #expect(try again.webhookCursors(hookId: "wh_1") == [refused])

        let delivered = WebhookCursor(hookId: "wh_1", workspace: "team-a", delivered: 1)
        try again.saveWebhookCursor(delivered)
        #expect(try again.webhookCursors(hookId: "wh_1") == [delivered])

        try again.saveWebhookCursor(Self.failing(3, at: 1, "HTTP 500 (team-a:2)"))
        #expect(try again.disableWebhook(id: "wh_1", reason: "HTTP 500 (team-a:2, attempt 3)", at: Self.failedAt))
        #expect(try again.enableWebhook(id: "wh_1"))
        #expect(try again.webhookCursors(hookId: "wh_1") == [delivered])
    }
}
