import Foundation
import Testing
import TabsyncCore
import TabsyncTestSupport
@testable import TabsyncStore

/// PostgreSQL going down and coming back, on a cluster of the test's own (stopping the shared one
/// would fail the tests running beside it).
@Suite("PostgreSQL store: server restart", .enabled(if: PostgresTestCluster.isEnabled, PostgresTestCluster.skipReason))
struct PostgresStoreRestartTests {
    /// A cluster of its own made by scripts/postgres; destroyed at the end.
    final class Cluster {
        let directory = NSTemporaryDirectory() + "tabsync-pg-restart-" + UUID().uuidString
        private(set) var url = ""

        init() throws {
            _ = try PostgresTestCluster.requireURL()  // required and configured alike
            try start()
        }

        func start() throws {
            let output = try Self.run(["start", directory])
            guard let line = output.split(separator: "\n").first(where: { $0.contains("TABSYNC_TEST_POSTGRES_URL=") }),
                let found = line.split(separator: "=", maxSplits: 1).last
            else { throw PostgresTestCluster.Failure("scripts/postgres start printed no URL: \(output)") }
            url = String(found)
        }

        func stop() throws { _ = try Self.run(["stop", directory]) }

        deinit { _ = try? Self.run(["destroy", directory]) }

        static func run(_ arguments: [String]) throws -> String { try PostgresTestCluster.runScript(arguments) }
    }

    @Test func commitsFailQuicklyWhileTheServerIsDownAndResumeByThemselves() throws {
        let cluster = try Cluster()
        // Another node holds "w" (so commits to it notify), and its hold outlives the restart.
        let store = try PostgresStore(url: cluster.url, options: .init(connectTimeoutSeconds: 2, holderTimeoutSeconds: 3_600))
        let holder = try PostgresStore(url: cluster.url, options: .init(connectTimeoutSeconds: 2))
        #expect(try holder.hold(workspaceId: "w") == 0)
        holder.close()
        let events = Inbox<PostgresListener.Event>()
        let listener = PostgresListener(url: cluster.url, options: .init(keepaliveSeconds: 0.5, keepaliveTimeoutSeconds: 2)) {
            events.append($0)
        }
        listener.start()
        defer { listener.stop() }
        #expect(events.wait { $0.contains(.listening(reconnected: false)) })

        var driver = Driver(epoch: store.epoch)
        var acknowledged = driver
        /// One op per commit; a failed batch is dropped as the server drops unacknowledged ops.
        func commitNext(_ seq: UInt64) -> Result<Void, StoreError> {
            driver.submit("w", "c", seq, .add(tab: Tab(id: "t\(seq)"), place: .end, activate: false))
            do throws(StoreError) {
                try store.commit(StoreMultiWriterContractTests.based(
                    driver.takeBatch(), on: ["w": acknowledged.sequencer("w").workspace.version]))
                acknowledged = driver
                return .success(())
            } catch {
                driver = acknowledged
                return .failure(error)
            }
        }
        for seq in UInt64(1)...5 {
            let result = commitNext(seq)
            #expect(throws: Never.self) { try result.get() }
        }

        try cluster.stop()
        for seq in UInt64(6)...8 {
            let started = ContinuousClock.now
            let result = commitNext(seq)
            #expect(ContinuousClock.now - started < .seconds(3))
            guard case .failure(.writeFailed) = result else {
                Issue.record("commit \(seq) with PostgreSQL down: \(result)")
                return
            }
        }
        #expect(throws: StoreError.self) { try store.load(workspaceId: "w") }
        #expect(events.wait { $0.contains { if case .disconnected = $0 { true } else { false } } })

        try cluster.start()
        // The first call after the restart reconnects by itself.
        for seq in UInt64(6)...7 {
            let result = commitNext(seq)
            #expect(throws: Never.self) { try result.get() }
        }
        let stored = try #require(try store.load(workspaceId: "w"))
        #expect(stored.workspace == acknowledged.sequencer("w").workspace)
        #expect(stored.log.map(\.seq) == Array(1...7))
        // The listener is back (commits before this may have gone unnoticed: that is what
        // `reconnected` tells the server, which then catches up); later commits reach it again.
        #expect(events.wait { $0.contains(.listening(reconnected: true)) })
        let result = commitNext(8)
        #expect(throws: Never.self) { try result.get() }
        #expect(events.wait { $0.contains { if case .committed(let n) = $0 { n.workspaceId == "w" && n.version == 8 } else { false } } })
    }
}
