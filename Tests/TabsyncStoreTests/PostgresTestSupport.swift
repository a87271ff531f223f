import Foundation
import Testing
@testable import TabsyncStore

/// The test cluster `scripts/test` starts (`scripts/postgres start`): its URL is in
/// `TABSYNC_TEST_POSTGRES_URL`. scripts/test also sets `TABSYNC_TEST_POSTGRES_REQUIRED=1`, so a
/// missing URL fails the PostgreSQL tests there; a plain `swift test` without it skips them.
enum PostgresTestDatabase {
    static let url = ProcessInfo.processInfo.environment["TABSYNC_TEST_POSTGRES_URL"].flatMap { $0.isEmpty ? nil : $0 }
    static let required = ProcessInfo.processInfo.environment["TABSYNC_TEST_POSTGRES_REQUIRED"] == "1"
    /// Run the PostgreSQL tests (they fail with a clear message when required and unconfigured).
    static let isEnabled = url != nil || required
    static let skipReason: Comment =
        "TABSYNC_TEST_POSTGRES_URL is unset: PostgreSQL store tests skipped (scripts/test starts a cluster and sets it)"

    struct Unconfigured: Error, CustomStringConvertible {
        var description: String {
            "TABSYNC_TEST_POSTGRES_URL is unset but TABSYNC_TEST_POSTGRES_REQUIRED=1: start a cluster with "
                + "`eval \"$(scripts/postgres start)\"` (scripts/test does) so the PostgreSQL store tests run"
        }
    }

    static func requireURL() throws -> String {
        guard let url else { throw Unconfigured() }
        return url
    }

    /// scripts/postgres in this checkout.
    static var script: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("scripts/postgres").path
    }
}

/// A schema of its own for one test, so tests on the shared cluster stay independent; dropped at
/// the end.
final class PostgresSchema: @unchecked Sendable {
    let url: String
    let name = "t_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")

    init(url: String? = nil) throws {
        self.url = try url ?? PostgresTestDatabase.requireURL()
    }

    func options(snapshotInterval: Int = 256, applicationName: String = "tabsync-test") -> PostgresStore.Options {
        PostgresStore.Options(snapshotInterval: snapshotInterval, schema: name, applicationName: applicationName)
    }

    /// Runs `sql` in this schema and returns the first column of the first row.
    @discardableResult
    func scalar(_ sql: String, _ parameters: [PGValue] = []) throws -> String? {
        let db = try PGConnection(url: url, schema: name)
        defer { db.close() }
        let result = try db.execute(sql, parameters)
        return result.rowCount > 0 && !result.isNull(0, 0) ? result.text(0, 0) : nil
    }

    deinit {
        if let db = try? PGConnection(url: url) {
            _ = try? db.execute("DROP SCHEMA IF EXISTS " + PGConnection.quoteIdentifier(name) + " CASCADE")
            db.close()
        }
    }
}

/// Collects events from another thread; tests wait on a condition with a deadline.
final class Inbox<Event: Sendable>: @unchecked Sendable {
    private let condition = NSCondition()
    private var events: [Event] = []

    func append(_ event: Event) {
        condition.lock()
        events.append(event)
        condition.broadcast()
        condition.unlock()
    }

    var all: [Event] {
        condition.lock()
        defer { condition.unlock() }
        return events
    }

    /// Waits until `predicate` holds for the events so far (true), or `seconds` pass (false).
    @discardableResult
    func wait(seconds: Double = 20, until predicate: ([Event]) -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        condition.lock()
        defer { condition.unlock() }
        while !predicate(events) {
            if !condition.wait(until: deadline) { return predicate(events) }
        }
        return true
    }
}
