import Foundation
import TabsyncCore
import TabsyncProto
import TabsyncTestSupport
import Testing

/// `tabsync-server backup` beside a `tabsync-server` serving the same data directory and taking
/// writes (docs/operating.md, "Backups"): the copy is checked, a server started on it serves every
/// workspace at a version no older than when the backup began, and the source server goes on.
@Suite("tabsync-server backup", .serialized)
struct BackupCommandTests {
    typealias Child = ServerExecutableTests.Child

    @Test func aBackupOfAServedStoreServesFromTheCopy() throws {
        let root = TemporaryDirectory(prefix: "tabsync-backup-cmd")
        let dataDir = root.path + "/data"
        let server = try Child(arguments: ["--port", "0", "--data-dir", dataDir, "--max-ops-per-second", "100000"])
        defer { server.kill() }
        _ = try server.waitForListening()
        let writer = try seed(ServerPort(port: server.port), workspace: "kept")
        for i in 0..<50 {
            try writer.submit(.update(TabUpdate(tabId: "t1", title: "title \(i)")))
            _ = try writer.nextApplied()
        }
        let before: UInt64 = 53
        // Ops keep coming while the backup runs: submitted without waiting, read after it.
        for i in 0..<200 { try writer.submit(.update(TabUpdate(tabId: "t2", title: "during \(i)"))) }
        let copy = root.path + "/copy.sqlite3"
        let run = try ToolRun.run(ServerExecutableTests.executable.path, ["backup", "--data-dir", dataDir, "--to", copy])
        #expect(run.status == 0, "\(run.output)")
        #expect(run.output.contains("integrity ok") && run.output.contains("1 workspaces"), "\(run.output)")
        for _ in 0..<200 { _ = try writer.nextApplied(timeout: 20) }

        // A second server on the copy.
        let restoredDir = root.path + "/restored"
        try FileManager.default.createDirectory(atPath: restoredDir, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: copy, toPath: restoredDir + "/tabsync.sqlite3")
        let restored = try Child(arguments: ["--port", "0", "--data-dir", restoredDir])
        defer { restored.kill() }
        _ = try restored.waitForListening()
        let (_, welcome) = try TestClient.joined(port: restored.port, workspace: "kept", clientId: "reader")
        #expect(welcome.snapshot.version >= before, "the copy is older than the backup's start")
        #expect(welcome.snapshot.version <= before + 200)
        #expect(welcome.snapshot.tabs.map(\.id) == ["t1", "t2", "t3"])
        #expect(welcome.snapshot.tabs.first?.title == "title 49")

        // Never over an existing file: exit 1, the file untouched.
        let again = try ToolRun.run(ServerExecutableTests.executable.path, ["backup", "--data-dir", dataDir, "--to", copy])
        #expect(again.status == 1)
        #expect(again.output.contains("already exists"), "\(again.output)")
        let missing = try ToolRun.run(ServerExecutableTests.executable.path, ["backup", "--data-dir", root.path + "/none", "--to", root.path + "/x"])
        #expect(missing.status == 1 && missing.output.contains("no tabsync store"), "\(missing.output)")
        let noTarget = try ToolRun.run(ServerExecutableTests.executable.path, ["backup", "--data-dir", dataDir])
        #expect(noTarget.status == 2, "\(noTarget.output)")
    }
}

extension BackupCommandTests {
    /// Issue 39's situation, end to end: a backup at version 1, three more ops (version 4), the
    /// server stopped, its data replaced by the backup, started again. A client resuming with the
    /// old epoch and version 4 gets a snapshot of the backup's state under a new epoch
    /// (`recovered: false`), never the missed ops of another history; a second start keeps it.
    @Test func aServerStartedOnABackupStartsANewEpoch() throws {
        let root = TemporaryDirectory(prefix: "tabsync-backup-epoch")
        let dataDir = root.path + "/data"
        var server = try Child(arguments: ["--port", "0", "--data-dir", dataDir])
        defer { server.kill() }
        _ = try server.waitForListening()
        let (writer, _) = try TestClient.joined(port: server.port, workspace: "team", clientId: "writer")
        try writer.submit(.add(tab: .named("t1"), place: .end, activate: true))
        let first = try writer.nextApplied()
        #expect(first.version == 1)
        let copy = root.path + "/copy.sqlite3"
        let run = try ToolRun.run(ServerExecutableTests.executable.path, ["backup", "--data-dir", dataDir, "--to", copy])
        #expect(run.status == 0, "\(run.output)")
        for i in 2...4 { try writer.submit(.add(tab: .named("t\(i)"), place: .end, activate: false)) }
        var last = first
        for _ in 2...4 { last = try writer.nextApplied() }
        #expect(last.version == 4)
        let (_, seen) = try TestClient.joined(port: server.port, workspace: "team", clientId: "reader")
        let oldEpoch = seen.snapshot.epoch
        #expect(!oldEpoch.isEmpty)
        server.kill()

        let files = FileManager.default
        for suffix in ["", "-wal", "-shm"] { try? files.removeItem(atPath: dataDir + "/tabsync.sqlite3" + suffix) }
        try files.copyItem(atPath: copy, toPath: dataDir + "/tabsync.sqlite3")
        var epochs: [String] = []
        for _ in 1...2 {
            server = try Child(arguments: ["--port", "0", "--data-dir", dataDir])
            _ = try server.waitForListening()
            let (_, welcome) = try TestClient.joined(
                port: server.port, workspace: "team", clientId: "reader", lastVersion: 4, epoch: oldEpoch)
            #expect(!welcome.recovered, "another history is never resumed")
            #expect(welcome.missed.isEmpty)
            #expect(welcome.snapshot.version == 1)
            #expect(welcome.snapshot.tabs.map(\.id) == ["t1"])
            #expect(welcome.epoch != oldEpoch && welcome.snapshot.epoch == welcome.epoch)
            epochs.append(welcome.epoch)
            server.kill()
        }
        #expect(epochs[0] == epochs[1], "the second start keeps the epoch the first gave")
    }
}

/// `seed` takes a server; a child process has only a port.
private struct ServerPort { let port: Int }

private func seed(_ server: ServerPort, workspace: String) throws -> TestClient {
    let (client, _) = try TestClient.joined(port: server.port, workspace: workspace, clientId: "seeder")
    for i in 1...3 { try client.submit(.add(tab: .named("t\(i)"), place: .end, activate: i == 1)) }
    for _ in 1...3 { _ = try client.nextApplied() }
    return client
}
