import ArgumentParser
import SwiftProtobuf
import TabsyncClient
import TabsyncCore
import TabsyncProto
import TabsyncTerminal
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Writes text to standard output at once (scripts and `watch` read it line by line).
func printOut(_ text: String) {
    var line = text
    if !line.hasSuffix("\n") { line += "\n" }
    let bytes = Array(line.utf8)
    bytes.withUnsafeBytes { buffer in
        var offset = 0
        while offset < buffer.count {
            let n = write(STDOUT_FILENO, buffer.baseAddress! + offset, buffer.count - offset)
            if n > 0 { offset += n } else if n < 0 && errno == EINTR { continue } else { return }
        }
    }
}

/// The tab a TAB argument names, or a bad-argument error.
func resolveTab(_ reference: String, in workspace: Workspace) throws(CommandError) -> Tab {
    do {
        return try TabReference.resolve(reference, in: workspace)
    } catch {
        throw .badArgument(error.description)
    }
}

/// A new tab id: `t-` and 12 random base-62 chars.
func newTabId() -> String { ClientIdentity.randomId(prefix: "t-", count: 12) }

/// The snapshot as protobuf's canonical JSON (what `GET /v1/workspaces/{id}` serves).
func snapshotJSON(_ workspace: Workspace) throws(CommandError) -> String {
    do {
        return try Tabsync_V1_Snapshot(workspace).jsonString()
    } catch {
        throw .failed("cannot encode the snapshot: \(error)")
    }
}

struct LsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ls", abstract: "List the workspace's tabs (a table, or the snapshot as JSON).")

    @OptionGroup var connection: ConnectionOptions
    @Flag(help: "Print the snapshot as JSON.") var json = false

    func run() async throws {
        try await Connection.with(connection) { c in
            let ws = c.client.state.confirmed
            printOut(json ? try snapshotJSON(ws) : TabTable.render(ws))
        }
    }
}

struct AddCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "add", abstract: "Add a tab; prints its id.")

    @OptionGroup var connection: ConnectionOptions
    @Option(help: "The tab's title.") var title: String
    @Option(help: "The tab's URL.") var url: String = ""
    @Option(help: "Its position, from 1 (default: at the end).") var at: Position?
    @Flag(help: "Make it the active tab.") var activate = false

    func run() async throws {
        try await Connection.with(connection) { c in
            let tab = Tab(id: newTabId(), title: title, url: url)
            try await c.submit(.add(tab: tab, place: at.map { .index($0.index) } ?? .end, activate: activate))
            printOut(tab.id)
        }
    }
}

struct OpenCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "open",
        abstract: "Activate the tab with this URL, or add it at the end and activate it; prints its id.")

    @OptionGroup var connection: ConnectionOptions
    @Argument(help: "The URL.") var url: String
    @Option(help: "The title when a tab is added (default: the URL).") var title: String?

    func run() async throws {
        try await Connection.with(connection) { c in
            let tab = Tab(id: newTabId(), title: title ?? url, url: url)
            let state = try await c.submit(.open(tab: tab, place: .end))
            printOut(state.confirmed.activeTabId)
        }
    }
}

/// Opens a session, finds `tab` (an id or a unique title prefix) and submits the op `op` makes of
/// it, as `mv`, `rm` and `rename` do.
func submitOn(_ tab: String, _ connection: ConnectionOptions, _ op: (Tab) -> TabsyncCore.Operation) async throws {
    try await Connection.with(connection) { c in
        try await c.submit(op(try resolveTab(tab, in: c.workspace)))
    }
}

struct MvCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "mv", abstract: "Move a tab to position N (from 1).")

    @OptionGroup var connection: ConnectionOptions
    @Argument(help: "A tab id or a unique title prefix.") var tab: String
    @Argument(help: "The new position, from 1.") var position: Position

    func run() async throws {
        try await submitOn(tab, connection) { .move(tabId: $0.id, place: .index(position.index)) }
    }
}

struct RmCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "rm", abstract: "Close a tab.")

    @OptionGroup var connection: ConnectionOptions
    @Argument(help: "A tab id or a unique title prefix.") var tab: String

    func run() async throws {
        try await submitOn(tab, connection) { .remove(tabId: $0.id) }
    }
}

struct ActivateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "activate",
        abstract: "Make a tab the active one: a tab id, a position (from 1), or a unique title prefix.")

    @OptionGroup var connection: ConnectionOptions
    @Argument(help: "A tab id, a position from 1, or a unique title prefix.") var tab: String

    func run() async throws {
        try await Connection.with(connection) { c in
            let ws = c.workspace
            let target: ActivateTarget
            if ws.tab(tab) != nil {
                target = .tabId(tab)
            } else if let position = Position(argument: tab) {
                target = .index(position.index)
            } else {
                target = .tabId(try resolveTab(tab, in: ws).id)
            }
            try await c.submit(.activate(target))
        }
    }
}

struct RenameCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "rename", abstract: "Set a tab's title.")

    @OptionGroup var connection: ConnectionOptions
    @Argument(help: "A tab id or a unique title prefix.") var tab: String
    @Argument(help: "The new title.") var title: String

    func run() async throws {
        try await submitOn(tab, connection) { .update(TabUpdate(tabId: $0.id, title: title)) }
    }
}

struct WatchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "watch",
        abstract: "Print one JSON line per applied op (protobuf JSON of Applied) until interrupted.")

    @OptionGroup var connection: ConnectionOptions

    func run() async throws {
        try await Connection.with(connection) { c in
            for await event in c.client.events() {
                switch event {
                case .applied(let applied):
                    if let line = try? Tabsync_V1_Applied(applied).jsonString() { printOut(line) }
                case .connection(.closed):
                    if let refusal = c.client.state.refusal { throw CommandError.failed("\(refusal)") }
                    return
                default:
                    break
                }
            }
        }
    }
}

struct ExportCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export", abstract: "Print the workspace snapshot as JSON (what import reads).")

    @OptionGroup var connection: ConnectionOptions

    func run() async throws {
        try await Connection.with(connection) { c in
            printOut(try snapshotJSON(c.client.state.confirmed))
        }
    }
}

struct ImportCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Replace every tab and group with those of a snapshot JSON file (as export prints; - reads stdin).")

    @OptionGroup var connection: ConnectionOptions
    @Argument(help: "The snapshot file, or - for standard input.") var file: String

    func run() async throws {
        let path = file == "-" ? "/dev/stdin" : file
        guard let text = ClientIdentity.readFile(path) else {
            throw CommandError.failed("cannot read \(file): \(String(cString: strerror(errno)))")
        }
        let snapshot: Tabsync_V1_Snapshot
        do {
            var options = JSONDecodingOptions()
            options.ignoreUnknownFields = true
            snapshot = try Tabsync_V1_Snapshot(jsonString: text, options: options)
        } catch {
            throw CommandError.badArgument("\(file) is not a snapshot as export prints it: \(error)")
        }
        let imported = Workspace(snapshot)
        let tabs = imported.tabs
        try await Connection.with(connection) { c in
            try await c.submit(.replace(tabs: tabs, groups: imported.groups))
            if !snapshot.activeTabID.isEmpty, tabs.contains(where: { $0.id == snapshot.activeTabID }),
               c.client.state.confirmed.activeTabId != snapshot.activeTabID
            {
                try await c.submit(.activate(.tabId(snapshot.activeTabID)))
            }
        }
    }
}
