import ArgumentParser
import Foundation
import SwiftProtobuf
import TabsyncClient
import TabsyncCore
import TabsyncProto
import TabsyncTerminal

/// A time on the command line: RFC 3339 (`2026-11-27T20:00:00Z`, fractions and offsets allowed),
/// or an age (`90s`, `10m`, `2h`, `3d`: that long ago).
struct TimeArgument: ExpressibleByArgument, Sendable {
    let date: Date

    init?(argument: String) {
        if let last = argument.last, let unit = ["s": 1.0, "m": 60.0, "h": 3_600.0, "d": 86_400.0][String(last)],
           let amount = Double(argument.dropLast()), amount >= 0
        {
            date = Date(timeIntervalSinceNow: -amount * unit)
            return
        }
        guard let parsed = RFC3339.parse(argument) else { return nil }
        date = Date(timeIntervalSince1970: parsed)
    }

    init(date: Date) { self.date = date }

}

struct LogCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "log",
        abstract: "Print the workspace's stored ops, newest first: version, time, author, summary.")

    @OptionGroup var connection: ConnectionOptions
    @Option(help: ArgumentHelp("Only ops at or after this time (RFC 3339, or an age: 30m, 2h, 3d).", valueName: "time"))
    var since: TimeArgument?
    @Option(help: ArgumentHelp("Only ops by this author (the token's sub, else the client's name).", valueName: "sub"))
    var author: String?
    @Option(help: "At most this many lines (default 50, or all since --since).") var limit: Int?
    @Flag(help: "One JSON object per line (protobuf JSON of HistoryEntry).") var json = false

    mutating func validate() throws {
        if let limit, limit < 1 { throw ValidationError("--limit must be at least 1") }
    }

    func run() async throws {
        try await Connection.with(connection) { c in
            let wanted = limit ?? (since == nil ? 50 : Int.max)
            var printed = 0
            var before: UInt64 = 0
            pages: while printed < wanted {
                var page = Tabsync_V1_HistoryPage()
                page.before = before
                // Filters may drop entries: ask for full pages then.
                page.limit = UInt32(author == nil ? min(1_000, wanted - printed) : 1_000)
                var query = Tabsync_V1_HistoryQuery()
                query.what = .ops(page)
                let answer = try await c.history(query)
                for entry in answer.ops {
                    if let since, let at = RFC3339.parse(entry.at), at < since.date.timeIntervalSince1970 { break pages }
                    if let author, entry.author != author { continue }
                    printOut(json ? try Self.json(entry) : Self.line(entry))
                    printed += 1
                    if printed >= wanted { break pages }
                }
                guard answer.next != 0, !answer.ops.isEmpty else { break }
                before = answer.next
            }
        }
    }

    static func line(_ entry: Tabsync_V1_HistoryEntry) -> String {
        let author = entry.author.isEmpty ? (entry.clientID.isEmpty ? "server" : entry.clientID) : entry.author
        return "\(entry.version)\t\(entry.at.isEmpty ? "-" : entry.at)\t\(author)\t\(entry.summary)"
    }

    static func json(_ entry: Tabsync_V1_HistoryEntry) throws(CommandError) -> String {
        do {
            return try entry.jsonString()
        } catch {
            throw .failed("cannot encode the entry: \(error)")
        }
    }
}

struct RestoreCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "restore",
        abstract: "Put the workspace back as it was at a version or a time; prints the new version.",
        discussion: "With --dry-run, prints what would change (+ added, - removed, ~ moved, * changed, the active tab) and changes nothing.")

    @OptionGroup var connection: ConnectionOptions
    @Option(help: "The version to restore.") var version: UInt64?
    @Option(help: ArgumentHelp("The time to restore (RFC 3339, or an age: 30m, 2h, 3d).", valueName: "time"))
    var at: TimeArgument?
    @Flag(name: .customLong("dry-run"), help: "Print what would change; change nothing.") var dryRun = false

    mutating func validate() throws {
        if (version == nil) == (at == nil) { throw ValidationError("give exactly one of --version and --at") }
        if version == 0 { throw ValidationError("--version must be at least 1") }
    }

    func run() async throws {
        try await Connection.with(connection) { c in
            var query = Tabsync_V1_HistoryQuery()
            if let version { query.what = .version(version) } else if let at { query.what = .at(RFC3339.format(at.date.timeIntervalSince1970)) }
            if dryRun || version == nil {
                let answer = try await c.history(query)
                guard answer.hasState else { throw CommandError.failed("the server sent no state") }
                let target = Workspace(answer.state)
                if dryRun {
                    let current = c.client.state.confirmed
                    let diff = WorkspaceDiff(from: current, to: target)
                    if diff.isEmpty {
                        printOut("restoring version \(target.version) would change nothing (now at version \(current.version))")
                    } else {
                        printOut("restoring version \(target.version) (now at version \(current.version)) would:")
                        for line in diff.lines(naming: current, target) { printOut("  " + line) }
                    }
                    return
                }
                try await restore(target.version, c)
            } else if let version {
                try await restore(version, c)
            }
        }
    }

    private func restore(_ version: UInt64, _ c: Connection) async throws(CommandError) {
        let state = try await c.submit(.restore(version: version, state: nil))
        printOut("\(state.confirmed.version)")
    }
}

struct ReopenCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "reopen",
        abstract: "Reopen a closed tab (default: the one closed last); prints its id, title and URL.")

    @OptionGroup var connection: ConnectionOptions
    @Argument(help: "A closed tab's id or a unique prefix of its title (default: the tab closed last).")
    var tab: String?

    func run() async throws {
        try await Connection.with(connection) { c in
            var query = Tabsync_V1_HistoryQuery()
            query.what = .closed(tab == nil ? 1 : 100)
            let closed = try await c.history(query).closed.map { Tab($0.tab) }
            let tabId: String
            if let tab {
                if closed.contains(where: { $0.id == tab }) {
                    tabId = tab
                } else {
                    let matches = closed.filter { $0.title.hasPrefix(tab) }
                    if matches.count > 1 {
                        throw CommandError.badArgument("“\(tab)” names \(matches.count) closed tabs; give an id")
                    }
                    tabId = matches.first?.id ?? tab  // else the server says whether it can
                }
            } else {
                guard let last = closed.first else { throw CommandError.failed("no recently closed tab to reopen") }
                tabId = last.id
            }
            let state = try await c.submit(.reopen(tabId: tabId))
            guard let back = state.confirmed.tab(tabId), let index = state.confirmed.index(of: tabId) else {
                throw CommandError.failed("the server applied the reopen but \(tabId) is not in the workspace")
            }
            printOut("\(back.id)\t\(back.title)\t\(back.url)\t\(index + 1)")
        }
    }
}
