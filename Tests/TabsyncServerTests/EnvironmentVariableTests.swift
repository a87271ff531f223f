import Foundation
import TabsyncProto
import TabsyncServer
import TabsyncTestSupport
import Testing

/// `TABSYNC_*` variables through the real executables: `tabsync-server` reads its environment (one
/// spawn; each value's reading and refusal is `ServerSettingsTests`, in process), and `tabsync`
/// refuses a bad value like a bad flag (exit 2, the variable and its value named on stderr), never
/// replacing it by the default.
@Suite("TABSYNC_* environment variables", .serialized)
struct EnvironmentVariableTests {
    typealias Child = ServerExecutableTests.Child

    /// The built `tabsync` tool, next to the test bundle.
    static var tool: URL {
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("tabsync")
    }

    /// The executable reads its real environment, end to end, in one spawn (how each value is
    /// read, refused or overridden by its flag is `ServerSettingsTests`, in process): the Docker
    /// image's `TABSYNC_HOST=0.0.0.0` with two key files from `TABSYNC_AUTH_KEY_FILE` starts, since
    /// access control is on; a session then needs a token, and a token of the second key gets in.
    /// A flag wins over a bad variable (`TABSYNC_PORT=abc`), a variable without its flag is taken
    /// (`TABSYNC_MAX_TABS=7`) and an empty one is unset (`TABSYNC_EVENT_LOOP`).
    @Test func theExecutableReadsItsRealEnvironment() async throws {
        let scratch = TemporaryDirectory(prefix: "tabsync-env-auth")
        let first = scratch.path + "/team.key"
        let second = scratch.path + "/next.key"
        try Data("team-0123456789abcdef0123456789abcdef\n".utf8).write(to: URL(fileURLWithPath: first))
        try Data("next-0123456789abcdef0123456789abcdef\n".utf8).write(to: URL(fileURLWithPath: second))
        let child = try Child(
            arguments: ["--port", "0", "--memory"],
            environment: [
                "TABSYNC_HOST": "0.0.0.0", "TABSYNC_AUTH_KEY_FILE": "\(first), \(second)", "TABSYNC_INSECURE_NO_AUTH": "",
                "TABSYNC_PORT": "abc", "TABSYNC_MAX_TABS": "7", "TABSYNC_EVENT_LOOP": "",
            ])
        defer { child.kill() }
        #expect(try child.waitForListening().hasPrefix("listening on ws://0.0.0.0:"))

        let anonymous = try TestClient(port: child.port)
        try anonymous.send(Tabsync_V1_ClientMessage(hello: Tabsync_V1_Hello(workspace: "team", clientId: "a")))
        _ = try ServerAuthTests.expectUnauthorized(anonymous)

        let token = try await TokenMinter(key: try AuthKey.load(file: second)).mint(AccessClaims(
            subject: "env", workspaces: "team", role: .viewer, expiresAt: Date(timeIntervalSince1970: (Date().timeIntervalSince1970 + 600).rounded(.down))))
        let member = try TestClient(port: child.port)
        try member.send(Tabsync_V1_ClientMessage(hello: Tabsync_V1_Hello(workspace: "team", clientId: "b", token: token)))
        let welcome = try member.next { if case .welcome(let w) = $0 { return w } else { return nil } }
        #expect(welcome.limits.maxTabs == 7)
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
