import Foundation
import TabsyncCore
import TabsyncStore
import TabsyncTestServer
import TabsyncTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `tabsync feed`, run as a process against a real server (docs/terminal-client.md): a snapshot
/// line, then one line per op as it is made, through a server restart without a gap or a repeat,
/// the JSON form, Ctrl-C exits 0; a server that is not there exits 1, and so does a plain server asked for TLS.
@Suite("tabsync feed", .serialized)
struct CommandFeedTests {
    static var tabsync: String {
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("tabsync").path
    }

    /// A `tabsync feed` process on a plain server; its stdout read line by line.
    func start(_ port: Int, _ arguments: [String]) throws -> (Process, Pipe) {
        try Self.feed(arguments + ["--server", "ws://127.0.0.1:\(port)"])
    }

    /// A `tabsync feed` process with these arguments; its stdout read line by line.
    static func feed(_ arguments: [String]) throws -> (Process, Pipe) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: tabsync)
        process.arguments = ["feed"] + arguments
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try process.run()
        return (process, out)
    }

    @Test func linesForASnapshotAndEachOpThroughARestartThenCtrlCExitsZero() throws {
        let server = try TestServer(.sqlite)
        defer { server.stop() }
        var writer = try seed(server, workspace: "fd")
        let (process, out) = try start(server.port, ["fd"])
        defer { if process.isRunning { process.terminate() } }
        #expect(out.firstLine(within: .seconds(20)) == "3\tsnapshot\t3 tabs, active “t1”")

        try writer.submit(.remove(tabId: "t2"))
        _ = try writer.nextApplied()
        #expect(out.firstLine(within: .seconds(20)) == "4\tseeder\tclosed t2")
        try server.restart()
        (writer, _) = try TestClient.joined(port: server.port, workspace: "fd", clientId: "seeder2", format: .json)
        try writer.submit(.add(tab: .named("t9"), place: .end, activate: false))
        _ = try writer.nextApplied()
        #expect(out.firstLine(within: .seconds(30)) == "5\tseeder2\tadded \"t9\"")

        kill(process.processIdentifier, SIGINT)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
    }

    @Test func jsonAfterAVersionIsTheAppliedAsSent() throws {
        let server = try TestServer(store: MemoryStore())
        defer { server.stop() }
        _ = try seed(server, workspace: "fj")
        let (process, out) = try start(server.port, ["fj", "--after", "2", "--json"])
        defer { if process.isRunning { process.terminate() } }
        let line = out.firstLine(within: .seconds(20))
        let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        #expect(object["version"] as? String == "3")
        #expect((object["op"] as? [String: Any])?["add"] != nil)
        kill(process.processIdentifier, SIGINT)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
    }

    @Test func noServerExitsOneAndAPlainServerAskedForTLSExitsOne() throws {
        let server = try TestServer(store: MemoryStore())
        let port = server.port
        // wss:// to a server that speaks plain HTTP: the TLS handshake fails, exit 1 with the reason.
        let plain = try ToolRun.run(Self.tabsync, ["feed", "w", "--server", "wss://127.0.0.1:\(port)", "--timeout", "5"])
        #expect(plain.status == 1, "\(plain.output)")
        #expect(plain.output.contains("TLS"), "\(plain.output)")

        server.stop()
        let (stopped, _) = try start(port, ["w"])
        stopped.waitUntilExit()
        #expect(stopped.terminationStatus == 1)
    }
}
