import Foundation
import Testing
import TabsyncCore
import TabsyncTestSupport
@testable import TabsyncStore

/// The connection breaking during `COMMIT`, made to happen by a proxy between the store and the
/// real PostgreSQL (``TCPFaultProxy``): the store must find out how the transaction ended instead of
/// guessing. "Refused" for a batch that is in the log was the bug the cluster test found.
@Suite("PostgreSQL store: a COMMIT whose answer is lost", .enabled(if: PostgresTestCluster.isEnabled, PostgresTestCluster.skipReason))
struct PostgresStoreLostCommitTests {
    /// A store through a proxy on a schema of the test's own, with one batch already stored.
    struct Setup {
        let schema: PostgresSchema
        let proxy: TCPFaultProxy
        let store: PostgresStore
        var driver: Driver

        init(resolveTimeout: Double = 15) throws {
            schema = try PostgresSchema()
            proxy = try TCPFaultProxy(forURL: schema.url)
            var options = schema.options()
            options.connectTimeoutSeconds = 2
            options.commitResolveTimeoutSeconds = resolveTimeout
            store = try PostgresStore(url: proxy.url(schema.url), options: options)
            driver = Driver(epoch: store.epoch)
            driver.submit("w", "alice", 1, .add(tab: Tab(id: "t1", title: "one"), place: .end, activate: true))
            try store.commit(driver.takeBatch())
        }

        /// The next batch: one add from alice with seq 2.
        mutating func nextBatch() -> CommitBatch {
            driver.submit("w", "alice", 2, .add(tab: Tab(id: "t2", title: "two"), place: .end, activate: false))
            return driver.takeBatch()
        }

        /// The log as a connection of its own (not through the proxy) reads it.
        func storedVersion() throws -> UInt64 {
            let reader = try PostgresStore(url: schema.url, options: schema.options())
            defer { reader.close() }
            return try reader.load(workspaceId: "w")?.workspace.version ?? 0
        }

        func close() {
            store.close()
            proxy.close()
        }
    }

    @Test func aCommitThatTookEffectIsReportedStoredThoughItsAnswerWasLost() throws {
        var setup = try Setup()
        defer { setup.close() }
        let batch = setup.nextBatch()
        setup.proxy.arm(on: "COMMIT", .afterAnswer)
        // Before the fix this threw writeFailed ("refused") for a batch that was in the log.
        #expect(throws: Never.self) { try setup.store.commit(batch) }
        #expect(setup.proxy.cuts == 1)
        #expect(try setup.storedVersion() == 2)
        // The store goes on on a new connection.
        setup.driver.submit("w", "alice", 3, .activate(.tabId("t2")))
        try setup.store.commit(setup.driver.takeBatch())
        #expect(try setup.storedVersion() == 3)
    }

    @Test func aCommitPostgreSQLNeverReceivedIsRefusedAndNothingIsStored() throws {
        var setup = try Setup()
        defer { setup.close() }
        let batch = setup.nextBatch()
        setup.proxy.arm(on: "COMMIT", .beforeForwarding)
        let error = try #require(throws: StoreError.self) { try setup.store.commit(batch) }
        guard case .writeFailed(let why) = error else {
            Issue.record("expected writeFailed (rolled back), got \(error)")
            return
        }
        #expect(why.contains("rolled"))
        #expect(setup.proxy.cuts == 1)
        #expect(try setup.storedVersion() == 1)
    }

    @Test func aCommitWhoseEndCannotBeLearnedIsOutcomeUnknownNotRefused() throws {
        var setup = try Setup(resolveTimeout: 1)
        defer { setup.close() }
        let batch = setup.nextBatch()
        setup.proxy.arm(on: "COMMIT", .afterAnswer)
        setup.proxy.refusing = true  // PostgreSQL cannot be asked again
        let error = try #require(throws: StoreError.self) { try setup.store.commit(batch) }
        guard case .outcomeUnknown = error else {
            Issue.record("expected outcomeUnknown, got \(error)")
            return
        }
        #expect(error.code == .unavailable)
        // It did take effect: exactly what "unknown" must allow for.
        #expect(try setup.storedVersion() == 2)
        setup.proxy.refusing = false
        setup.driver.submit("w", "alice", 3, .activate(.tabId("t2")))
        try setup.store.commit(setup.driver.takeBatch())
        #expect(try setup.storedVersion() == 3)
    }
}
