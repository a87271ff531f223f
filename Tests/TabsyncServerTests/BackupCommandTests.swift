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

/// `seed` takes a server; a child process has only a port.
private struct ServerPort { let port: Int }

private func seed(_ server: ServerPort, workspace: String) throws -> TestClient {
    let (client, _) = try TestClient.joined(port: server.port, workspace: workspace, clientId: "seeder")
    for i in 1...3 { try client.submit(.add(tab: .named("t\(i)"), place: .end, activate: i == 1)) }
    for _ in 1...3 { _ = try client.nextApplied() }
    return client
}
