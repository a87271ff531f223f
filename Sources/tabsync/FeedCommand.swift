import ArgumentParser
import SwiftProtobuf
import TabsyncClient
import TabsyncCore
import TabsyncProto
#if canImport(Glibc)
import Glibc
#endif

/// `tabsync feed`: follows the workspace's change feed over HTTP, or HTTPS for a `wss://` server
/// (the certificate checked as the other commands check it: `--ca-file`, else the system's CAs),
/// (docs/design.md, "The change feed") with ``ChangeFeed``, one line per version, until
/// interrupted (Ctrl-C: exit 0).
struct FeedCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "feed",
        abstract: "Follow the workspace's change feed over HTTP(S): one line per op, resuming by itself after a cut.",
        discussion: """
            Human lines: `VERSION<TAB>CLIENT<TAB>what the op did`, and for a snapshot (the start, or \
            when the server no longer holds the ops after --after) `VERSION<TAB>snapshot<TAB>N tabs, \
            active …`. With --json: the event's JSON as the server sent it, one object per line (an op \
            is the Applied, with "op" and "version"; a snapshot the Snapshot, with "tabs" and \
            "version"). A cut stream is opened again after its last version (no gap, no repeat). \
            A wss:// server is read over HTTPS, its certificate verified against --ca-file or the \
            system's CAs. \
            Ends with exit 3 when the server refuses the feed (401, 403, 404), exit 1 when it \
            cannot be reached (or its certificate is not trusted) at first or for --give-up-after \
            seconds in a row; Ctrl-C exits 0.
            """)

    @OptionGroup var connection: ConnectionOptions
    @Argument(help: ArgumentHelp("The workspace (default: --workspace, TABSYNC_WORKSPACE, default).", valueName: "WS"))
    var workspaceArgument: String?
    @Option(help: ArgumentHelp("Start after this version (default: a snapshot first).", valueName: "version"))
    var after: UInt64?
    @Flag(help: "One JSON object per line (the event's data as the server sent it).") var json = false
    @Option(name: .customLong("give-up-after"), help: ArgumentHelp(
        "Seconds of failed reconnects in a row before giving up (default 60).", valueName: "seconds"))
    var giveUpAfter: Double = 60

    mutating func validate() throws {
        if !(1...86_400).contains(giveUpAfter) { throw ValidationError("--give-up-after must be between 1 and 86400 seconds") }
    }

    func run() async throws {
        let (_, url) = try connection.resolvedServer()
        let workspace = try connection.resolvedWorkspace(workspaceArgument)
        let feed = ChangeFeed(.init(
            url: url, workspace: workspace, token: try connection.resolvedToken(), after: after,
            giveUpAfter: .milliseconds(Int64(giveUpAfter * 1000)),
            connectTimeout: .seconds(connection.timeout), caFile: connection.resolvedCAFile,
            insecureSkipVerify: connection.insecureSkipVerify))
        if connection.insecureSkipVerify, url.usesTLS {
            printError("tabsync: warning: --insecure-skip-verify: the server's certificate is not checked (for tests only)")
        }
        // Ctrl-C ends a follow: what was printed is whole (each line is one write).
        signal(SIGINT) { _ in _exit(0) }
        do {
            for try await item in feed.items() {
                printOut(json ? Self.jsonLine(item) : Self.line(item))
            }
        } catch let failure as ChangeFeed.Failure {
            throw Self.commandError(failure)
        }
    }

    /// The exit-3 refusals and the exit-1 failures of the other commands.
    static func commandError(_ failure: ChangeFeed.Failure) -> CommandError {
        switch failure {
        case .refused(let status, let message):
            let code = [400: "BAD_REQUEST", 401: "UNAUTHORIZED", 403: "NOT_PERMITTED", 404: "NOT_FOUND"][status] ?? "HTTP_\(status)"
            return .refused(code: code, message: "HTTP \(status) \(message)")
        case .unreachable(let why): return .unreachable(why)
        }
    }

    /// The event's JSON on one line (protobuf JSON holds no raw newline; a multi-line data field
    /// is joined with spaces so that one line stays one object).
    static func jsonLine(_ item: FeedItem) -> String {
        switch item {
        case .snapshot(_, let json), .op(_, let json): json.replacingOccurrences(of: "\n", with: " ")
        }
    }

    /// `VERSION<TAB>CLIENT<TAB>summary`, or `VERSION<TAB>snapshot<TAB>N tabs, active “title”`.
    static func line(_ item: FeedItem) -> String {
        switch item {
        case .op(let version, let json):
            guard let message = try? Tabsync_V1_Applied(jsonString: json, options: Self.lenient),
                  let applied = try? AppliedOp(message)
            else { return "\(version)\t?\tan op this client cannot read" }
            return "\(version)\t\(applied.clientId.isEmpty ? "server" : applied.clientId)\t\(applied.op.summary)"
        case .snapshot(let version, let json):
            guard let message = try? Tabsync_V1_Snapshot(jsonString: json, options: Self.lenient) else {
                return "\(version)\tsnapshot\ta state this client cannot read"
            }
            let workspace = Workspace(message)
            var text = "\(version)\tsnapshot\t\(workspace.tabs.count) tab\(workspace.tabs.count == 1 ? "" : "s")"
            if let active = workspace.tab(workspace.activeTabId) {
                text += ", active \(active.title.isEmpty ? active.id : "“\(active.title)”")"
            }
            return text
        }
    }

    /// A newer server may add fields: they are skipped, not refused.
    private static var lenient: JSONDecodingOptions {
        var options = JSONDecodingOptions()
        options.ignoreUnknownFields = true
        return options
    }
}
