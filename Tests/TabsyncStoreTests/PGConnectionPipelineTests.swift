import Foundation
import Testing
import TabsyncTestSupport
@testable import TabsyncStore

/// ``PGConnection/pipeline(_:)``: several statements in one round trip behave as if sent one by one
/// (each its own result, in order; each later statement sees what an earlier one wrote), and a
/// failure stops the rest without leaving the connection in pipeline mode.
@Suite("PostgreSQL connection: pipelines", .enabled(if: PostgresTestCluster.isEnabled, PostgresTestCluster.skipReason))
struct PGConnectionPipelineTests {
    /// A connection on a schema of the test's own with a table `t (k text primary key, n int8)`.
    private func connection(_ schema: PostgresSchema) throws -> PGConnection {
        let db = try PGConnection(url: schema.url)
        try db.execute("CREATE SCHEMA " + PGConnection.quoteIdentifier(schema.name))
        db.close()
        let inSchema = try PGConnection(url: schema.url, schema: schema.name)
        try inSchema.execute("CREATE TABLE t (k text PRIMARY KEY, n int8 NOT NULL)")
        return inSchema
    }

    @Test func statementsRunInOrderEachWithItsOwnResult() throws {
        let schema = try PostgresSchema()
        let db = try connection(schema)
        defer { db.close() }
        let insert = "INSERT INTO t (k, n) VALUES ($1, $2)"
        let results = try db.pipeline([
            .begin,
            PGStatement(insert, [.text("a"), .int64(1)]),
            PGStatement(insert, [.text("b"), .int64(2)]),
            PGStatement("SELECT k, n FROM t ORDER BY k"),
            PGStatement("UPDATE t SET n = n + 10 RETURNING n"),
            .commit,
        ])
        #expect(results.count == 6)
        #expect(results[3].rowCount == 2)  // the SELECT saw both inserts before it
        #expect(results[3].text(1, 0) == "b")
        #expect(try results[4].int64(1, 0) == 12)
        #expect(!db.inTransaction)
        // The same texts again: prepared statements are reused, the results are the new ones.
        let again = try db.pipeline([PGStatement(insert, [.text("c"), .int64(3)]), PGStatement("SELECT count(*) FROM t")])
        #expect(try again[1].int64(0, 0) == 3)
    }

    @Test func aFailureThrowsTheFirstErrorSkipsTheRestAndLeavesTheConnectionUsable() throws {
        let schema = try PostgresSchema()
        let db = try connection(schema)
        defer { db.close() }
        try db.execute("INSERT INTO t (k, n) VALUES ('a', 1)")
        let insert = "INSERT INTO t (k, n) VALUES ($1, $2)"
        do {
            _ = try db.pipeline([
                .begin,
                PGStatement(insert, [.text("b"), .int64(2)]),
                PGStatement(insert, [.text("a"), .int64(3)]),  // unique violation
                PGStatement(insert, [.text("c"), .int64(4)]),
                .commit,
            ])
            Issue.record("the pipeline did not fail")
        } catch {
            guard case .statement(let state, _, _) = error else {
                Issue.record("expected a statement error, got \(error)")
                return
            }
            #expect(state == "23505")
        }
        // The transaction failed (its COMMIT skipped): still open until ROLLBACK.
        #expect(db.isUsable)
        #expect(db.inTransaction)
        try db.execute("ROLLBACK")
        #expect(!db.inTransaction)
        let rows = try db.execute("SELECT string_agg(k, ',' ORDER BY k) FROM t")
        #expect(rows.text(0, 0) == "a")  // b rolled back, c never ran
        // The connection is out of pipeline mode: plain statements and new pipelines work.
        let results = try db.pipeline([PGStatement(insert, [.text("d"), .int64(5)]), PGStatement("SELECT count(*) FROM t")])
        #expect(try results[1].int64(0, 0) == 2)
    }

    @Test func aBrokenConnectionThrowsConnectionLostAndIsNotReused() throws {
        let schema = try PostgresSchema()
        let db = try connection(schema)
        defer { db.close() }
        // The server ends this connection's backend in the middle of the pipeline.
        let killer = try PGConnection(url: schema.url)
        defer { killer.close() }
        do {
            _ = try db.pipeline([
                PGStatement("SELECT pg_terminate_backend(pg_backend_pid())"),
                PGStatement("SELECT 1"),
            ])
            Issue.record("the pipeline did not fail")
        } catch {
            #expect(error.isConnectionLost, "got \(error)")
        }
        #expect(!db.isUsable)
    }
}
