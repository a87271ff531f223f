import Foundation
import TabsyncProto
import TabsyncServer
import TabsyncTestSupport
import Testing

/// `TABSYNC_*` variables through the real executables: a bad value is refused like a bad flag
/// (exit 2, the variable and its value named on stderr), never replaced by the default.
@Suite("TABSYNC_* environment variables", .serialized)
struct EnvironmentVariableTests {
    typealias Child = ServerExecutableTests.Child

    /// The built `tabsync` tool, next to the test bundle.
    static var tool: URL {
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("tabsync")
    }

    @Test(arguments: [
        ("TABSYNC_PORT", "abc"), ("TABSYNC_PORT", "70000"), ("TABSYNC_MAX_TABS", "-1"), ("TABSYNC_MAX_TABS", "0"),
        ("TABSYNC_IDLE_UNLOAD", "soon"), ("TABSYNC_EVENT_LOOP", "xyz"), ("TABSYNC_SYNC", "sometimes"),
        ("TABSYNC_LOG_LEVEL", "loud"), ("TABSYNC_MEMORY", "maybe"), ("TABSYNC_HELLO_TIMEOUT", "0"),
        ("TABSYNC_IDLE_TIMEOUT", "1"), ("TABSYNC_MAX_CONNECTIONS", "many"), ("TABSYNC_MAX_FRAME_BYTES", "1.5"),
        ("TABSYNC_MAX_OPS_PER_SECOND", "-3"), ("TABSYNC_MAX_RESUME_OPS", "x"), ("TABSYNC_LOG_RETENTION", "0"),
        ("TABSYNC_MAX_SEND_QUEUE_BYTES", "4MB"), ("TABSYNC_NO_WEB", "sometimes"),
        ("TABSYNC_TLS_CERT", "/nowhere/cert.pem"), ("TABSYNC_TLS_KEY", "/nowhere/key.pem"),
        ("TABSYNC_ALLOW_ORIGIN", "tabs.example.com"), ("TABSYNC_ALLOW_ORIGIN", "https://a.example, ftp://b.example"),
        ("TABSYNC_INSECURE_NO_AUTH", "maybe"), ("TABSYNC_MAX_CONNECTIONS_PER_IP", "-1"),
        ("TABSYNC_MAX_CONNECTIONS_PER_IP", "lots"), ("TABSYNC_MAX_HANDSHAKES_PER_SECOND_PER_IP", "fast"),
        ("TABSYNC_MAX_HANDSHAKES_PER_SECOND_PER_IP", "-0.5"), ("TABSYNC_AUTH_KEY_FILE", " , "),
        ("TABSYNC_CHECKPOINT", "sometimes"), ("TABSYNC_WAL_LIMIT", "100K"), ("TABSYNC_WAL_LIMIT", "big"),
        ("TABSYNC_SLOW_CLOSE_GRACE", "0"), ("TABSYNC_SLOW_CLOSE_GRACE", "soon"), ("TABSYNC_DIAGNOSTICS_ECHO", "maybe"),
    ])
    func serverRefusesABadValueNamingTheVariable(variable: String, value: String) throws {
        // Should the value be taken, nothing is written to the working directory.
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tabsync-env-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let arguments = variable == "TABSYNC_MEMORY" ? ["--data-dir", directory] : ["--memory"]
        let child = try Child(arguments: arguments, environment: [variable: value])
        let status = child.waitForExit(timeout: 10)
        child.kill()
        let log = String(decoding: child.stderr.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(status == 2, "\(variable)=\(value): \(log)")
        #expect(log.contains("\(variable)=\"\(value)\""), "the message names \(variable) and its value: \(log)")
    }

    @Test(arguments: [
        ["--port", "70000"], ["--event-loop", "select"], ["--max-tabs", "-1"], ["--no-such-flag"],
        ["--tls-cert", "/nowhere/cert.pem"], ["--allow-origin", "tabs.example.com"],
        ["--max-connections-per-ip", "-1"], ["--max-handshakes-per-second-per-ip", "fast"], ["--auth-key-file", " "],
        ["--checkpoint", "never"], ["--wal-limit", "0"],
    ])
    func serverRefusesABadFlagWithTheSameStatus(arguments: [String]) throws {
        let child = try Child(arguments: ["--memory"] + arguments)
        let status = child.waitForExit(timeout: 10)
        child.kill()
        let log = String(decoding: child.stderr.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(status == 2, "\(arguments): \(log)")
        #expect(log.contains(arguments[0]), "the message names \(arguments[0]): \(log)")
    }

    /// A flag given on the command line wins: the variable is not read. An empty variable is unset.
    @Test func aFlagWinsOverABadVariableAndAnEmptyVariableIsUnset() throws {
        let child = try Child(
            arguments: ["--port", "0", "--memory"],
            environment: ["TABSYNC_PORT": "abc", "TABSYNC_MAX_TABS": "", "TABSYNC_EVENT_LOOP": ""])
        defer { child.kill() }
        let line = try child.waitForListening()
        #expect(line.hasPrefix("listening on ws://127.0.0.1:"))
        let (client, welcome) = try TestClient.joined(port: child.port, workspace: "env", clientId: "a")
        #expect(welcome.limits.maxTabs == 500)  // the default, not 0
        _ = client
    }

    // MARK: access control (TABSYNC_AUTH_KEY_FILE)

    /// The Docker image's environment: `TABSYNC_HOST=0.0.0.0` with key files from
    /// `TABSYNC_AUTH_KEY_FILE` (two, comma-separated) starts, since access control is on; a session
    /// then needs a token, and a token of the second key gets in.
    @Test func theKeyFileVariableTurnsAuthOnSoTheServerListensBeyondLoopback() async throws {
        let scratch = TemporaryDirectory(prefix: "tabsync-env-auth")
        let first = scratch.path + "/team.key"
        let second = scratch.path + "/next.key"
        try Data("team-0123456789abcdef0123456789abcdef\n".utf8).write(to: URL(fileURLWithPath: first))
        try Data("next-0123456789abcdef0123456789abcdef\n".utf8).write(to: URL(fileURLWithPath: second))
        let child = try Child(
            arguments: ["--port", "0", "--memory"],
            environment: ["TABSYNC_HOST": "0.0.0.0", "TABSYNC_AUTH_KEY_FILE": "\(first), \(second)", "TABSYNC_INSECURE_NO_AUTH": ""])
        defer { child.kill() }
        #expect(try child.waitForListening().hasPrefix("listening on ws://0.0.0.0:"))

        let anonymous = try TestClient(port: child.port)
        try anonymous.send(Tabsync_V1_ClientMessage(hello: Tabsync_V1_Hello(workspace: "team", clientId: "a")))
        _ = try ServerAuthTests.expectUnauthorized(anonymous)

        let token = try await TokenMinter(key: try AuthKey.load(file: second)).mint(AccessClaims(
            subject: "env", workspaces: "team", role: .viewer, expiresAt: Date(timeIntervalSince1970: (Date().timeIntervalSince1970 + 600).rounded(.down))))
        let member = try TestClient(port: child.port)
        try member.send(Tabsync_V1_ClientMessage(hello: Tabsync_V1_Hello(workspace: "team", clientId: "b", token: token)))
        _ = try member.next { if case .welcome(let w) = $0 { return w } else { return nil } }
    }

    /// A key file that cannot be read stops the start like a TLS file that cannot be served: its
    /// path on stderr, exit 1; from the flag as from the variable. A flag wins over the variable.
    @Test func anUnreadableKeyFileStopsTheStartNamingIt() throws {
        let missing = "/nowhere/team.key"
        for (arguments, environment) in [
            (["--auth-key-file", missing], [String: String]()), ([], ["TABSYNC_AUTH_KEY_FILE": missing]),
        ] {
            let child = try Child(arguments: ["--port", "0", "--memory"] + arguments, environment: environment)
            let status = child.waitForExit(timeout: 10)
            child.kill()
            let log = String(decoding: child.stderr.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            #expect(status == 1, "\(arguments) \(environment): \(log)")
            #expect(log.contains("cannot read key file \(missing)"), "\(log)")
        }

        let scratch = TemporaryDirectory(prefix: "tabsync-env-auth")
        let key = scratch.path + "/team.key"
        try Data("team-0123456789abcdef0123456789abcdef".utf8).write(to: URL(fileURLWithPath: key))
        let child = try Child(
            arguments: ["--port", "0", "--memory", "--auth-key-file", key], environment: ["TABSYNC_AUTH_KEY_FILE": missing])
        defer { child.kill() }
        #expect(try child.waitForListening().hasPrefix("listening on ws://127.0.0.1:"))
    }

    @Test func helpSaysHowTheEnvironmentIsRead() throws {
        let child = try Child(arguments: ["--help"])
        #expect(child.waitForExit(timeout: 10) == 0)
        let help = String(decoding: child.stdout.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            .split(whereSeparator: \.isWhitespace).joined(separator: " ")
        #expect(help.contains("an empty variable counts as unset"))
        #expect(help.contains("a flag given on the command line wins"))
        #expect(help.contains("exit 2"))
    }

    @Test(arguments: [
        ("TABSYNC_SERVER", "abc"), ("TABSYNC_SERVER", "http://127.0.0.1:7070"), ("TABSYNC_WORKSPACE", "bad id"),
        ("TABSYNC_WORKSPACE", String(repeating: "w", count: 65)), ("TABSYNC_CA_FILE", "/nowhere/ca.pem"),
        ("TABSYNC_TOKEN_FILE", "/nowhere/token"),
    ])
    func toolRefusesABadValueNamingTheVariable(variable: String, value: String) throws {
        let (status, stderr) = try runTool(["ls"], environment: [variable: value])
        #expect(status == 2, "\(variable)=\(value): \(stderr)")
        #expect(stderr.contains("\(variable)=\"\(value)\""), "the message names \(variable) and its value: \(stderr)")
    }

    @Test func toolHelpSaysHowTheEnvironmentIsRead() throws {
        let (status, _, stdout) = try runToolCapturingOutput(["--help"], environment: [:])
        #expect(status == 0)
        let help = stdout.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        #expect(help.contains("an empty variable counts as unset"))
        #expect(help.contains("exit 2"))
    }

    /// Runs `tabsync` with `arguments`; its exit status and stderr.
    private func runTool(_ arguments: [String], environment: [String: String]) throws -> (Int32, String) {
        let (status, stderr, _) = try runToolCapturingOutput(arguments, environment: environment)
        return (status, stderr)
    }

    private func runToolCapturingOutput(
        _ arguments: [String], environment: [String: String]
    ) throws -> (Int32, String, String) {
        let process = Process()
        process.executableURL = Self.tool
        process.arguments = arguments
        var env = ProcessInfo.processInfo.environment
        env["TABSYNC_SERVER"] = nil
        env["TABSYNC_WORKSPACE"] = nil
        process.environment = env.merging(environment) { $1 }
        let stdout = Pipe()
        let stderr = Pipe()
        process.standardOutput = stdout
        process.standardError = stderr
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let out = stdout.fileHandleForReading.readDataToEndOfFile()
        let err = stderr.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: err, as: UTF8.self), String(decoding: out, as: UTF8.self))
    }
}
