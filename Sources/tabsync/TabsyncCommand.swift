import ArgumentParser
import CLibwebsockets
import Foundation
import TabsyncClient
import TabsyncCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The tabsync user tool: the live terminal tab bar and one-shot commands for scripts.
///
/// Exit status: 0 on success; 1 when the server cannot be reached or another failure happens
/// (a clear message, no stack trace); 2 on bad arguments; 3 when the server refuses the op
/// (its code is in the message).
@main
struct TabsyncCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tabsync",
        abstract: "Live terminal tab bar, one-shot commands and load generator for tabsync workspaces.",
        discussion: """
            Server from --server or TABSYNC_SERVER (default \(ConnectionOptions.defaultServer)); workspace \
            from --workspace or TABSYNC_WORKSPACE (default \(ConnectionOptions.defaultWorkspace)). An option \
            wins over its variable, an empty variable counts as unset, and a variable whose value is not \
            valid is refused like a bad option (named on stderr, exit 2). \
            TAB is a tab id or a unique prefix of a title. Positions (N) count from 1.
            Exit status: 0 success, 1 server unreachable or other failure, 2 bad arguments, \
            3 refused by the server.
            """,
        version: TabsyncVersion.current,
        subcommands: [
            BarCommand.self, LsCommand.self, AddCommand.self, OpenCommand.self, MvCommand.self, RmCommand.self,
            ActivateCommand.self, RenameCommand.self, WatchCommand.self, FeedCommand.self, ExportCommand.self, ImportCommand.self,
            LogCommand.self, RestoreCommand.self, ReopenCommand.self,
            GroupCommand.self, UngroupCommand.self, GroupEditCommand.self,
            Bench.self,
        ]
    )

    /// Parses and runs, mapping every failure to its exit status: ArgumentParser's usage errors
    /// to 2 (instead of its default 64), ``CommandError``s to theirs.
    static func main() async {
        // libwebsockets' own notices would interleave with the bar and with scripts' output; every
        // failure reaches the person through this tool's messages instead.
        lws_set_log_level(0, nil)
        do {
            var command = try parseAsRoot()
            if var asyncCommand = command as? AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch let error as CommandError {
            printError("tabsync: \(error)")
            Glibc.exit(error.exitCode)
        } catch {
            let code = exitCode(for: error)
            if code == .validationFailure {
                printError(fullMessage(for: error))
                Glibc.exit(2)
            }
            exit(withError: error)
        }
    }
}

/// Writes a line to standard error.
func printError(_ text: String) {
    var line = text
    if !line.hasSuffix("\n") { line += "\n" }
    let bytes = Array(line.utf8)
    _ = bytes.withUnsafeBytes { write(STDERR_FILENO, $0.baseAddress, $0.count) }
}

/// Why a command failed, and the exit status it gives.
enum CommandError: Error, CustomStringConvertible {
    /// The arguments name nothing usable (an unknown tab, a bad position or URL).
    case badArgument(String)
    /// The server could not be reached or did not answer in time.
    case unreachable(String)
    /// The server refused the op (or the connection): its code and message.
    case refused(code: String, message: String)
    /// Anything else (a file that cannot be read, a terminal that cannot be set up).
    case failed(String)

    var exitCode: Int32 {
        switch self {
        case .badArgument: 2
        case .unreachable, .failed: 1
        case .refused: 3
        }
    }

    var description: String {
        switch self {
        case .badArgument(let why): why
        case .unreachable(let why): why
        case .refused(let code, let message): "refused: \(code): \(message)"
        case .failed(let why): why
        }
    }
}

/// Options every command that talks to a server takes.
struct ConnectionOptions: ParsableArguments {
    static let defaultServer = "ws://127.0.0.1:7070"
    static let defaultWorkspace = "default"

    @Option(help: "Server URL (env TABSYNC_SERVER; default \(defaultServer)).")
    var server: String?

    @Option(help: "Workspace id (env TABSYNC_WORKSPACE; default \(defaultWorkspace)).")
    var workspace: String?

    @Option(help: "Your name in presence (default: $USER).")
    var name: String?

    @Option(name: .customLong("client-id"), help: "Client id (default: a stable id kept in the config folder).")
    var clientId: String?

    @Option(help: ArgumentHelp("Seconds to wait for the server.", visibility: .hidden))
    var timeout: Int = 10

    static let defaultRetryFor = 8.0

    @Option(name: .customLong("retry-for"), help: ArgumentHelp(
        "Seconds to keep trying when the server answers that it cannot take the change now (its "
            + "store is down or restarting, or the rate limit): the change is sent again with back-off "
            + "until it is applied or refused for good (default \(Int(defaultRetryFor)); 0: no retry).",
        valueName: "seconds"))
    var retryFor: Double = defaultRetryFor

    // MARK: access tokens (a server run with --auth-key-file needs one; `tabsync-server token` makes them)

    @Option(help: "Access token (env TABSYNC_TOKEN; prefer it or --token-file: a flag shows in ps).")
    var token: String?

    @Option(name: .customLong("token-file"), help: ArgumentHelp(
        "File holding the access token (env TABSYNC_TOKEN_FILE).", valueName: "path"))
    var tokenFile: String?

    /// The token to send: --token, then TABSYNC_TOKEN, then --token-file or TABSYNC_TOKEN_FILE
    /// (its content, surrounding whitespace stripped); empty when none.
    /// - Throws: `.badArgument` naming the option or the variable and the path when the file
    ///   cannot be read.
    func resolvedToken() throws(CommandError) -> String {
        if let token = token ?? Self.environment("TABSYNC_TOKEN") { return token }
        let fileSource = tokenFile.map { ($0, "--token-file") }
            ?? Self.environment("TABSYNC_TOKEN_FILE").map { ($0, "TABSYNC_TOKEN_FILE") }
        guard let (path, source) = fileSource else { return "" }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw .badArgument(Self.invalid(source, path, expected: "a readable file holding the token"))
        }
        return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    // MARK: TLS (wss://)

    @Option(name: .customLong("ca-file"), help: ArgumentHelp(
        "PEM bundle of the CAs that may sign the server's certificate (a private CA) instead of the "
            + "system's (env TABSYNC_CA_FILE).", valueName: "path"))
    var caFile: String?

    @Flag(name: .customLong("insecure-skip-verify"), help: ArgumentHelp(
        "For tests only: accept any server certificate, so anyone in the path can impersonate the server."))
    var insecureSkipVerify = false

    var resolvedCAFile: String? { caFile ?? Self.environment("TABSYNC_CA_FILE") }

    /// The value of an environment variable; nil when unset or empty.
    static func environment(_ name: String) -> String? {
        guard let value = getenv(name) else { return nil }
        let text = String(cString: value)
        return text.isEmpty ? nil : text
    }

    /// The server: the option, else `TABSYNC_SERVER`, else the default, parsed.
    /// - Throws: `.badArgument` naming the option or the variable and its value when it is not a
    ///   `ws://` or `wss://` URL (a bad variable is never replaced by the default).
    func resolvedServer() throws(CommandError) -> (text: String, url: ServerURL) {
        let (text, source) = server.map { ($0, "--server") }
            ?? Self.environment("TABSYNC_SERVER").map { ($0, "TABSYNC_SERVER") }
            ?? (Self.defaultServer, "the default server")
        do throws(ClientError) {
            return (text, try ServerURL(parsing: text))
        } catch {
            var why = "\(error)"
            if case .invalidURL(let detail) = error { why = String(detail.dropFirst(text.count + 2)) }
            throw .badArgument(Self.invalid(source, text, expected: "a ws:// or wss:// URL (\(why))"))
        }
    }

    /// The workspace: `positional` (bar's argument) first, then the option, `TABSYNC_WORKSPACE`, the default.
    /// - Throws: `.badArgument` naming where the id came from when it is not a valid workspace id.
    func resolvedWorkspace(_ positional: String? = nil) throws(CommandError) -> String {
        let (id, source) = positional.map { ($0, "WORKSPACE") } ?? workspace.map { ($0, "--workspace") }
            ?? Self.environment("TABSYNC_WORKSPACE").map { ($0, "TABSYNC_WORKSPACE") }
            ?? (Self.defaultWorkspace, "the default workspace")
        guard Self.isValidWorkspace(id) else {
            throw .badArgument(Self.invalid(source, id, expected: "1–64 chars of [A-Za-z0-9._-]"))
        }
        return id
    }

    /// `invalid TABSYNC_SERVER="x": expected …`, or `invalid --server "x": expected …` for an option.
    static func invalid(_ source: String, _ value: String, expected: String) -> String {
        let shown = source.hasPrefix("TABSYNC_") ? "\(source)=\"\(value)\"" : "\(source) \"\(value)\""
        return "invalid \(shown): expected \(expected)"
    }

    var resolvedName: String { name ?? Self.environment("USER") ?? "tabsync" }

    mutating func validate() throws {
        if let clientId, !ClientIdentity.isValidId(clientId) {
            throw ValidationError("--client-id must be 1–60 chars of [A-Za-z0-9._:-]")
        }
        if let workspace, !Self.isValidWorkspace(workspace) {
            throw ValidationError("--workspace must be 1–64 chars of [A-Za-z0-9._-]")
        }
        if timeout < 1 { throw ValidationError("--timeout must be at least 1") }
        if !(0...3_600).contains(retryFor) { throw ValidationError("--retry-for must be between 0 and 3600 seconds") }
        let caSource = caFile.map { ($0, "--ca-file") } ?? Self.environment("TABSYNC_CA_FILE").map { ($0, "TABSYNC_CA_FILE") }
        if let (path, source) = caSource, access(path, R_OK) != 0 {
            throw ValidationError(Self.invalid(source, path, expected: "a readable PEM file"))
        }
    }

    static func isValidWorkspace(_ id: String) -> Bool {
        (1...64).contains(id.unicodeScalars.count) && id.unicodeScalars.allSatisfy {
            ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0)
                || $0 == "." || $0 == "_" || $0 == "-"
        }
    }
}

/// A 1-based position given on the command line.
struct Position: ExpressibleByArgument {
    let index: UInt32

    init?(argument: String) {
        guard let n = UInt32(argument), n >= 1 else { return nil }
        index = n - 1
    }
}
