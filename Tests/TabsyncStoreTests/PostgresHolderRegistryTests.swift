import Foundation
import Testing
import TabsyncTestSupport
import TabsyncCore
@testable import TabsyncStore

/// The holder registry (``HolderRegistry``) in PostgreSQL: a commit notifies only when another live
/// node holds the workspace; holds end by release, by leaving, or when a node's heartbeat stops.
@Suite("PostgreSQL store: holder registry", .enabled(if: PostgresTestCluster.isEnabled, PostgresTestCluster.skipReason))
struct PostgresHolderRegistryTests {
    /// Two nodes on one schema, committing through drivers of their own.
    struct Nodes {
        let schema: PostgresSchema
        let a: PostgresStore
        let b: PostgresStore
        var driver: Driver
        var version: UInt64 = 0
        var seq: UInt64 = 0

        init(holderTimeoutSeconds: Double = 10) throws {
            schema = try PostgresSchema()
            var options = schema.options()
            options.holderTimeoutSeconds = holderTimeoutSeconds
            a = try PostgresStore(url: schema.url, options: options)
            b = try PostgresStore(url: schema.url, options: options)
            driver = Driver(epoch: a.epoch)
        }

        /// A commits one op to "w" and returns how many notifications it sent: the first adds a tab,
        /// the rest rename it, so a test may commit as often as it likes (adds would pass the tab
        /// limit, whose refusal does not advance the version, after 500 commits on a fast machine).
        mutating func commitOnA() throws -> UInt64 {
            let before = a.notificationsSent
            seq += 1
            let op: TabsyncCore.Operation = seq == 1
                ? .add(tab: Tab(id: "t"), place: .end, activate: false) : .update(TabUpdate(tabId: "t", title: "title \(seq)"))
            driver.submit("w", "alice", seq, op)
            var batch = driver.takeBatch()
            batch.baseVersions = ["w": version]
            try a.commit(batch)
            version += 1
            return a.notificationsSent - before
        }
    }

    @Test func aCommitNotifiesOnlyWhileAnotherNodeHoldsTheWorkspace() throws {
        var nodes = try Nodes()
        #expect(try nodes.a.hold(workspaceId: "w") == 0)
        #expect(try nodes.commitOnA() == 0)  // nobody else holds it: no notification
        #expect(try nodes.b.hold(workspaceId: "w") == 1)  // split: A holds it too
        #expect(try nodes.commitOnA() == 1)
        #expect(try nodes.a.hold(workspaceId: "w") == 1)  // holding again changes nothing
        try nodes.b.release(workspaceIds: ["w"])
        #expect(try nodes.commitOnA() == 0)
        try nodes.b.release(workspaceIds: ["w"])  // releasing twice is harmless
        #expect(try nodes.b.hold(workspaceId: "w") == 1)
        nodes.b.leave()
        #expect(try nodes.commitOnA() == 0)
        #expect(try nodes.schema.scalar("SELECT count(*)::text FROM tabsync_holders WHERE node = $1", [.text(nodes.b.node)]) == "0")
    }

    @Test func aNodeWhoseHeartbeatStopsHoldsNothingAndIsPrunedLater() throws {
        var nodes = try Nodes(holderTimeoutSeconds: 0.3)
        #expect(try nodes.b.hold(workspaceId: "w") == 0)
        #expect(try nodes.commitOnA() == 1)
        // B stops beating: within its timeout A's commits stop notifying it (polled, not slept).
        let deadline = Date().addingTimeInterval(10)
        var notified: UInt64 = 1
        while notified > 0 && Date() < deadline { notified = try nodes.commitOnA() }
        #expect(notified == 0)
        #expect(try nodes.a.hold(workspaceId: "w") == 0)  // B is not counted as a holder either
        // A's heartbeats prune B once it has been silent three timeouts.
        var left = "1"
        while left != "0" && Date() < deadline {
            try nodes.a.heartbeat()
            left = try nodes.schema.scalar("SELECT count(*)::text FROM tabsync_holders WHERE node = $1", [.text(nodes.b.node)]) ?? "?"
        }
        #expect(left == "0")
        // A node that beats stays: A's own hold is still there.
        #expect(try nodes.schema.scalar("SELECT count(*)::text FROM tabsync_holders WHERE node = $1", [.text(nodes.a.node)]) == "1")
    }

    @Test func aNewWorkspaceHeldBeforeItsFirstCommitIsNotifiedOfIt() throws {
        var nodes = try Nodes()
        // B holds "w" before anything of it is stored (its version row is made at 0); A's first
        // commit, on base version 0, is told to B.
        #expect(try nodes.b.hold(workspaceId: "w") == 0)
        #expect(try nodes.b.load(workspaceId: "w") == nil)
        #expect(try nodes.commitOnA() == 1)
        #expect(try nodes.b.load(workspaceId: "w")?.workspace.version == 1)
    }
}

/// A node stopped in the middle of a commit (SIGSTOP, a frozen VM) holds its workspace rows
/// locked; PostgreSQL ends its transaction after the store's `idleInTransactionSeconds`, so the
/// other nodes' commits to those rows go on instead of waiting for it to wake.
@Suite("PostgreSQL store: a stalled transaction", .enabled(if: PostgresTestCluster.isEnabled, PostgresTestCluster.skipReason))
struct PostgresStalledTransactionTests {
    @Test func aTransactionStalledHoldingAWorkspaceRowIsEndedAndTheOthersCommitGoesOn() throws {
        let schema = try PostgresSchema()
        let store = try PostgresStore(url: schema.url, options: schema.options())
        var driver = Driver(epoch: store.epoch)
        driver.submit("w", "c", 1, .add(tab: Tab(id: "a"), place: .end, activate: true))
        try store.commit(driver.takeBatch())

        // The stalled node: its transaction locked w's row and then its process stopped.
        let stalled = try PGConnection(url: schema.url, schema: schema.name, idleInTransactionSeconds: 0.5)
        defer { stalled.close() }
        try stalled.execute("BEGIN")
        try stalled.execute("SELECT version FROM tabsync_workspaces WHERE workspace = 'w' FOR UPDATE")

        // Another node's commit to w waits for that lock, then goes through once it is freed.
        let done = Inbox<Result<Void, StoreError>>()
        driver.submit("w", "c", 2, .add(tab: Tab(id: "b"), place: .end, activate: false))
        var pending = driver.takeBatch()
        pending.baseVersions = ["w": 1]
        let batch = pending
        let other = try PostgresStore(url: schema.url, options: schema.options())
        Thread.detachNewThread {
            done.append(Result { () throws(StoreError) in try other.commit(batch) })
        }
        #expect(done.wait(seconds: 10) { !$0.isEmpty })
        if case .failure(let error)? = done.all.first { Issue.record("the commit failed: \(error)") }
        #expect(try store.load(workspaceId: "w")?.workspace.version == 2)
        #expect(throws: PGError.self) { try stalled.execute("COMMIT") }  // its transaction was ended
    }
}
