import Foundation
import TabsyncCore
import TabsyncProto
@testable import TabsyncStore
import TabsyncTestSupport
import Testing

/// Restarts of the real `tabsync-server` on a data dir: a killed server's client resumes (the
/// end-to-end resume test; the rules, a snapshot from before the retained log included, are
/// `ResumeRuleTests` in the core tests), and a data file that is not a tabsync store (exit
/// non-zero, the file named and untouched).
@Suite("tabsync-server restarts on its data dir", .serialized)
struct ServerRestartTests {
    typealias Child = ServerExecutableTests.Child

    static func start(_ dir: TemporaryDirectory, _ extra: [String] = []) throws -> Child {
        let child = try Child(arguments: ["--port", "0", "--data-dir", dir.path, "--log-level", "error"] + extra)
        _ = try child.waitForListening()
        try #require(child.port > 0, "the server did not start")
        return child
    }

    /// Submits `count` adds from one client and waits for each ack; the last Applied.
    @discardableResult
    static func addTabs(_ client: TestClient, count: Int, prefix: String = "t") throws -> AppliedOp {
        var last: AppliedOp?
        for i in 1...count { try client.submit(.add(tab: .named("\(prefix)\(i)"), place: .end, activate: i == 1)) }
        for _ in 1...count { last = try client.nextApplied() }
        return try #require(last)
    }

    @Test func aClientResumesAfterAKilledServerWithTheMissedOpsAndDedup() throws {
        let dir = TemporaryDirectory(prefix: "tabsync-restart")
        var child = try Self.start(dir)
        let (writer, welcome) = try TestClient.joined(port: child.port, workspace: "rs", clientId: "w")
        let epoch = welcome.epoch
        #expect(!epoch.isEmpty)
        try Self.addTabs(writer, count: 3)
        let (reader, _) = try TestClient.joined(port: child.port, workspace: "rs", clientId: "r")
        try writer.submit(.move(tabId: "t1", place: .index(2)))
        try writer.submit(.remove(tabId: "ghost"))  // refused, seq 5 consumed
        let moved = try writer.nextApplied()
        #expect(moved.version == 4)
        #expect(try writer.nextRejected().code == .tabGone)
        #expect(try reader.nextApplied() == moved)
        kill(child.process.processIdentifier, SIGKILL)
        #expect(child.waitForExit(timeout: 5) != nil)

        child = try Self.start(dir)
        defer { child.kill() }
        // The reader saw version 3 before the crash: only version 4 is missed.
        let (resumed, again) = try TestClient.joined(
            port: child.port, workspace: "rs", clientId: "r", lastVersion: 3, epoch: epoch)
        #expect(again.recovered)
        #expect(again.epoch == epoch)
        #expect(try again.missed.map { try AppliedOp($0) } == [moved])
        // The writer's seqs were kept: its resubmissions are answered again, never applied twice.
        let (writer2, writerWelcome) = try TestClient.joined(port: child.port, workspace: "rs", clientId: "w")
        #expect(writerWelcome.lastSeq == 5)
        #expect(writerWelcome.snapshot.version == 4)
        #expect(writerWelcome.snapshot.tabs.map(\.id) == ["t2", "t3", "t1"])
        try writer2.submit(.move(tabId: "t1", place: .index(2)), seq: 4)
        #expect(try writer2.nextApplied() == moved)
        try writer2.submit(.remove(tabId: "ghost"), seq: 5)
        let refusal = try writer2.nextRejected()
        #expect(refusal.seq == 5 && refusal.code == .tabGone)
        // New ops go on at the next version and reach the resumed reader.
        try writer2.submit(.remove(tabId: "t2"), seq: 6)
        let next = try writer2.nextApplied()
        #expect(next.version == 5)
        #expect(try resumed.nextApplied() == next)
    }

    @Test func aCorruptDataFileStopsTheServerNamingTheFileAndLeavesItUntouched() throws {
        let dir = TemporaryDirectory(prefix: "tabsync-restart")
        try FileManager.default.createDirectory(atPath: dir.path, withIntermediateDirectories: true)
        let file = dir.path + "/" + SQLiteStore.fileName
        let garbage = Data((0..<8192).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) })
        try garbage.write(to: URL(fileURLWithPath: file))
        let child = try Child(arguments: ["--port", "0", "--data-dir", dir.path])
        defer { child.kill() }
        let status = child.waitForExit(timeout: 10)
        #expect(status != nil && status != 0)
        let stderr = String(decoding: child.stderr.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(stderr.contains(file), "stderr does not name the file: \(stderr)")
        let stdout = String(decoding: child.stdout.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(!stdout.contains("listening on"))
        #expect(try Data(contentsOf: URL(fileURLWithPath: file)) == garbage)
        let others = try FileManager.default.contentsOfDirectory(atPath: dir.path)
        #expect(others == [SQLiteStore.fileName], "no WAL or other file was made: \(others)")
    }

    /// A bad `--sync` value is refused in process (`ServerSettingsTests`).
    @Test func syncFullIsAcceptedAndItsCommitsAreStored() throws {
        let dir = TemporaryDirectory(prefix: "tabsync-restart")
        let child = try Self.start(dir, ["--sync", "full"])
        let (client, _) = try TestClient.joined(port: child.port, workspace: "f", clientId: "c")
        try Self.addTabs(client, count: 2)
        child.process.terminate()
        #expect(child.waitForExit(timeout: 5) == 0)
        let store = try SQLiteStore(dataDirectory: dir.path)
        defer { store.close() }
        #expect(try store.load(workspaceId: "f")?.workspace.version == 2)
    }
}
