import CSQLite
import Foundation
import TabsyncProto
import TabsyncTestSupport
import Testing

/// The `tabsync-server` executable as a child process: flags, environment fallbacks, the
/// "listening on" line, and SIGTERM with clients attached.
@Suite("tabsync-server executable", .serialized)
struct ServerExecutableTests {
    /// The built executable, next to the test bundle.
    static var executable: URL {
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("tabsync-server")
    }

    /// A started child process, its stdout/stderr pipes, and the port from its first stdout line.
    final class Child {
        let process = Process()
        let stdout = Pipe()
        let stderr = Pipe()
        private(set) var port = 0

        init(arguments: [String], environment: [String: String] = [:]) throws {
            process.executableURL = ServerExecutableTests.executable
            process.arguments = arguments
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
            process.standardOutput = stdout
            process.standardError = stderr
            try process.run()
        }

        /// Reads stdout until the "listening on ws://HOST:PORT" line.
        func waitForListening(timeout: Double = 10) throws -> String {
            let line = stdout.firstLine(within: .seconds(timeout))
            port = Int(line.split(separator: ":").last ?? "") ?? 0
            return line
        }

        /// Waits for exit; the status, or nil when still running after `timeout`.
        func waitForExit(timeout: Double) -> Int32? {
            waitUntil(deadline: .seconds(timeout)) { !process.isRunning } ? process.terminationStatus : nil
        }

        func kill() {
            if process.isRunning { process.terminate() }
            _ = waitForExit(timeout: 5)
        }
    }

    /// Every flag, its default and variable are checked in process (`ServerSettingsTests`); the
    /// spawn shows the executable's help holds them and says how the environment is read.
    @Test func helpShowsEveryFlagWithItsDefaultAndEnvironmentVariable() throws {
        let child = try Child(arguments: ["--help"])
        #expect(child.waitForExit(timeout: 10) == 0)
        // Wrapped lines joined: whitespace runs become one space.
        let help = String(decoding: child.stdout.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            .split(whereSeparator: \.isWhitespace).joined(separator: " ")
        for expected in [
            "--host", "(default: 127.0.0.1)", "TABSYNC_HOST", "--port", "(default: 7070)", "TABSYNC_PORT",
            "--data-dir", "(default: ./data)", "tabsync.sqlite3", "TABSYNC_DATA_DIR", "--memory", "--sync",
            "(default: normal)", "TABSYNC_SYNC", "--idle-unload", "(default: 5m)", "TABSYNC_IDLE_UNLOAD", "--log-level",
            "(default: info)", "--max-tabs", "(default: 500)", "--max-frame-bytes", "(default: 1048576)",
            "--max-ops-per-second", "(default: 100)", "--max-resume-ops", "(default: 1000)", "--log-retention",
            "(default: 10000)", "--max-send-queue-bytes", "(default: 4194304)", "--max-connections",
            "(default: 10000)", "--hello-timeout", "(default: 10.0)", "--idle-timeout", "(default: 60.0)",
            "TABSYNC_MAX_SEND_QUEUE_BYTES", "TABSYNC_IDLE_TIMEOUT", "--event-loop", "(default: epoll)",
            "TABSYNC_EVENT_LOOP", "--shutdown-timeout", "(default: 15s)", "TABSYNC_SHUTDOWN_TIMEOUT",
            "an empty variable counts as unset", "a flag given on the command line wins", "exit 2",
        ] {
            #expect(help.contains(expected), "help lacks \(expected)")
        }
    }

    @Test func sigtermClosesClientsWith1001AndExitsZeroWithinFiveSeconds() throws {
        let child = try Child(arguments: ["--port", "0", "--memory"], environment: ["TABSYNC_MAX_TABS": "7"])
        defer { child.kill() }
        let line = try child.waitForListening()
        #expect(line.hasPrefix("listening on ws://127.0.0.1:"))
        #expect(child.port > 0)
        let (a, welcome) = try TestClient.joined(port: child.port, workspace: "sig", clientId: "a")
        #expect(welcome.limits.maxTabs == 7)  // from the environment
        let (b, _) = try TestClient.joined(port: child.port, workspace: "sig", clientId: "b", format: .proto)
        try a.submit(.add(tab: .named("x"), place: .end, activate: true))
        _ = try a.nextApplied()
        child.process.terminate()  // SIGTERM
        #expect(try a.closeCode() == 1001)
        #expect(try b.closeCode() == 1001)
        let status = child.waitForExit(timeout: 5)  // a deadline: nil when it had not exited by then
        #expect(status == 0)
        let log = String(decoding: child.stderr.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(log.contains("connection open"))
        #expect(log.contains("code=1001"))
    }

    /// A stop held up by a commit that cannot finish (another process holds the SQLite write
    /// lock, so it waits out the store's 5 s busy timeout while the drain waits up to 3.5 s for
    /// it): a second SIGTERM ends the process at once, status 1, with a line saying why, as
    /// `--shutdown-timeout` would later. Acknowledged ops are stored before their ack either way.
    @Test func aSecondSignalEndsAStopThatIsStillDrainingWithStatusOne() throws {
        let dataDir = FileManager.default.temporaryDirectory.appendingPathComponent("tabsync-stop-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dataDir) }
        let child = try Child(arguments: ["--port", "0", "--data-dir", dataDir.path, ])
        defer { child.kill() }
        _ = try child.waitForListening()
        let (a, _) = try TestClient.joined(port: child.port, workspace: "stuck", clientId: "a")
        var db: OpaquePointer?
        try #require(sqlite3_open(dataDir.appendingPathComponent("tabsync.sqlite3").path, &db) == SQLITE_OK)
        defer { sqlite3_close(db) }
        try #require(sqlite3_exec(db, "BEGIN IMMEDIATE", nil, nil, nil) == SQLITE_OK)
        try a.submit(.add(tab: .named("x"), place: .end, activate: true))  // its commit now waits for the lock
        child.process.terminate()
        var seen: [String] = []
        let draining = waitUntil(deadline: .seconds(10)) {
            let line = child.stderr.firstLine(within: .milliseconds(200))
            if !line.isEmpty { seen.append(line) }
            return line.contains("shutting down")
        }
        #expect(draining, "no 'shutting down' line: \(seen)")
        child.process.terminate()
        #expect(child.waitForExit(timeout: 2) == 1, "the second signal did not end the stop at once")
        let log = String(decoding: child.stderr.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(log.contains("exiting without finishing the stop: a second signal"), "\(log.suffix(400))")
    }

    /// A bad value exits 2 with its message on stderr. Which values are refused, from a flag or its
    /// variable alike, and what the message says, is `ServerSettingsTests`, in process: every
    /// refusal takes this one path out of the executable.
    @Test func aBadFlagExitsTwoNamingIt() throws {
        let child = try Child(arguments: ["--port", "70000", "--memory"])
        defer { child.kill() }
        let status = child.waitForExit(timeout: 10)
        let log = String(decoding: child.stderr.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(status == 2, "\(log)")
        #expect(log.contains("invalid --port \"70000\""), "the message names --port and its value: \(log)")
    }

    /// SIGTERM stops the server on lws' own poll() loop as on the default epoll one.
    @Test func thePollLoopServesAndStopsToo() throws {
        let child = try Child(arguments: ["--port", "0", "--memory", "--event-loop", "poll"])
        defer { child.kill() }
        _ = try child.waitForListening()
        let (a, _) = try TestClient.joined(port: child.port, workspace: "poll", clientId: "a")
        try a.submit(.add(tab: .named("x"), place: .end, activate: true))
        #expect(try a.nextApplied().version == 1)
        child.process.terminate()
        #expect(try a.closeCode() == 1001)
        #expect(child.waitForExit(timeout: 5) == 0)
    }
}
