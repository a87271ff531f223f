import Foundation
import Testing
import TabsyncTestSupport
@testable import TabsyncStore

/// A schema of its own for one test, so tests on the shared cluster stay independent; dropped at
/// the end.
final class PostgresSchema: @unchecked Sendable {
    let url: String
    let name = "t_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")

    init(url: String? = nil) throws {
        self.url = try url ?? PostgresTestCluster.requireURL()
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
