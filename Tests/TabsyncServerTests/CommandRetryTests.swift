import Foundation
import TabsyncCore
import TabsyncStore
import TabsyncTestServer
import TabsyncTestSupport
import Testing

/// The one-shot commands of `tabsync` against a store that is down (docs/design.md, 'Transient
/// refusals are retried'): a change refused `UNAVAILABLE` is sent again until it lands within
/// `--retry-for` (exit 0), or the command gives up after it with exit 1 and says why; only a
/// permanent refusal exits 3.
@Suite("tabsync one-shot commands retry what passes", .serialized)
struct CommandRetryTests {
    static var tabsync: String {
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("tabsync").path
    }

    func arguments(_ server: TestServer, _ command: [String]) -> [String] {
        command + ["--server", "ws://127.0.0.1:\(server.port)", "--workspace", "down", "--client-id", "cli-retry"]
    }

    /// Starts `tabsync` with `arguments`; its combined output is read once it exits.
    func start(_ arguments: [String]) throws -> (Process, Pipe) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Self.tabsync)
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        return (process, output)
    }

    func finish(_ process: Process, _ output: Pipe) -> (status: Int32, output: String) {
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    @Test func aChangeRefusedWhileTheStoreIsDownLandsWhenItComesBack() throws {
        let store = FaultyStore(MemoryStore())
        let server = try TestServer(store: store)
        defer { server.stop() }
        let writer = try seed(server, workspace: "down")
        _ = writer
        store.failing = true
        let (process, output) = try start(arguments(server, ["rm", "t2"]))
        // Refused at least twice (the first answer and one retry), then the store is back.
        let refusals = try server.waitForMetric(
            "tabsync_ops_rejected_total{code=\"UNAVAILABLE\"}", atLeast: 2, timeout: 20)
        #expect(refusals >= 2)
        store.failing = false
        let run = finish(process, output)
        #expect(run.status == 0, "tabsync rm exited \(run.status): \(run.output)")
        let snapshot = try #require(try server.snapshot("down"))
        #expect(snapshot.tabs.map(\.id) == ["t1", "t3"])
    }

    @Test func itGivesUpAfterRetryForWithExit1AndAPermanentRefusalIsExit3() throws {
        let store = FaultyStore(MemoryStore())
        let server = try TestServer(store: store)
        defer { server.stop() }
        let writer = try seed(server, workspace: "down")
        try writer.submit(.update(TabUpdate(tabId: "t3", locked: true)))
        _ = try writer.nextApplied()
        store.failing = true
        let (process, output) = try start(arguments(server, ["rename", "t1", "never", "--retry-for", "1"]))
        let run = finish(process, output)
        #expect(run.status == 1, "\(run.output)")
        #expect(run.output.contains("UNAVAILABLE") && run.output.contains("--retry-for"), "\(run.output)")
        #expect(run.output.contains("not applied"), "\(run.output)")
        store.failing = false
        #expect(try #require(try server.snapshot("down")).tabs.first?.title == "t1")
        // A refusal no retry can change: exit 3 at once.
        let locked = try start(arguments(server, ["rm", "t3"]))
        let refused = finish(locked.0, locked.1)
        #expect(refused.status == 3, "\(refused.output)")
        #expect(refused.output.contains("LOCKED"), "\(refused.output)")
    }
}
