import Foundation
import TabsyncCore
import TabsyncProto
@testable import TabsyncStore
import TabsyncTestServer
import Testing

@Suite("Store path", .serialized)
struct ServerStoreTests {
    /// docs/design.md ('Durability'): a store unable to write → ops refused UNAVAILABLE, never acknowledged; reads go
    /// on; writes resume when the disk does.
    @Test func aFailingStoreRefusesOpsUnavailableAndWritesResumeAfter() throws {
        let store = MemoryStore()
        let server = try TestServer(store: store)
        defer { server.stop() }
        let writer = try seed(server, workspace: "st")
        let (watcher, _) = try TestClient.joined(port: server.port, workspace: "st", clientId: "w", format: .proto)
        store.failCommits(with: .writeFailed("disk full"))
        let seq = try writer.submit(.add(tab: .named("t4"), place: .end, activate: true))
        let rejected = try writer.nextRejected()
        #expect(rejected.seq == seq)
        #expect(rejected.code == .unavailable)
        // Reads go on: HTTP and a new session see the stored state. The failed commit started a
        // reload of the workspace before the refusal went out, and a Hello waits for that reload:
        // once this Welcome is in, the workspace is the stored state again.
        #expect(try server.snapshot("st")?.version == 3)
        let (_, welcome) = try TestClient.joined(port: server.port, workspace: "st", clientId: "late")
        #expect(welcome.snapshot.version == 3)
        #expect(welcome.snapshot.tabs.map(\.id) == ["t1", "t2", "t3"])
        // The disk comes back: the next op is applied on the stored state, and reaches everyone.
        store.failCommits(with: nil)
        try writer.submit(.add(tab: .named("t4"), place: .end, activate: false))
        let applied = try writer.nextApplied()
        #expect(applied.version == 4)
        #expect(try watcher.nextApplied() == applied)
        #expect(try server.snapshot("st")?.tabs.map(\.id) == ["t1", "t2", "t3", "t4"])
    }

    @Test func aRestartedServerOnTheSameStoreResumesWithDedup() throws {
        let store = MemoryStore()
        let first = try TestServer(store: store)
        let writer = try seed(first, workspace: "rs")
        try writer.submit(.remove(tabId: "gone"))
        #expect(try writer.nextRejected().code == .tabGone)
        first.stop()
        let second = try TestServer(store: store)
        defer { second.stop() }
        let (client, welcome) = try TestClient.joined(
            port: second.port, workspace: "rs", clientId: "seeder", lastVersion: 2, epoch: store.epoch)
        #expect(welcome.recovered)
        #expect(welcome.missed.map(\.version) == [3])
        #expect(welcome.lastSeq == 4)
        // seq 1 again: answered from the restored log, not applied twice.
        try client.submit(.add(tab: .named("t1"), place: .end, activate: true), seq: 1)
        #expect(try client.nextApplied().version == 1)
        #expect(try second.snapshot("rs")?.version == 3)
    }

    @Test func memoryStoreCommitsAllOrNothingAndKeepsTheRetention() throws {
        let store = MemoryStore()
        #expect(try store.load(workspaceId: "x") == nil)
        var workspace = Workspace(id: "x", epoch: store.epoch)
        var records: [CommitRecord] = []
        for i in 1...30 {
            let op = try workspace.apply(.add(tab: .named("t\(i)"), place: .end, activate: i == 1), limits: .default)
            records.append(CommitRecord(workspaceId: "x", clientId: "c", seq: UInt64(i), outcome: .applied([
                AppliedOp(version: workspace.version, op: op, clientId: "c", seq: UInt64(i), activeTabId: workspace.activeTabId),
            ])))
        }
        records.append(CommitRecord(workspaceId: "x", clientId: "d", seq: 9, outcome: .rejected(.tabGone("q"))))
        store.failCommits(with: .writeFailed("read-only"))
        #expect(throws: StoreError.writeFailed("read-only")) {
            try store.commit(CommitBatch(records: records, workspaces: ["x": workspace], logRetention: 10))
        }
        #expect(try store.load(workspaceId: "x") == nil)
        store.failCommits(with: nil)
        try store.commit(CommitBatch(records: records, workspaces: ["x": workspace], logRetention: 10))
        let stored = try #require(try store.load(workspaceId: "x"))
        #expect(stored.workspace == workspace)
        #expect(stored.lastSeqs == ["c": 30, "d": 9])
        #expect(stored.log.count >= 10 && stored.log.count <= 13)
        #expect(stored.log.last?.version == 30)
        #expect(zip(stored.log, stored.log.dropFirst()).allSatisfy { $0.version + 1 == $1.version })
    }
}
