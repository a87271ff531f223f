import ArgumentParser
import TabsyncCore
import TabsyncTerminal

/// One of the browsers' nine group colours given on the command line (another is a bad argument, 2).
struct GroupColor: ExpressibleByArgument {
    let name: String

    init?(argument: String) {
        guard TabGroup.colors.contains(argument.lowercased()) else { return nil }
        name = argument.lowercased()
    }

    static var allValueStrings: [String] { TabGroup.colors }
}

/// The group a GROUP argument names: an exact group id first, then the one group with that title.
func resolveGroup(_ reference: String, in workspace: Workspace) throws(CommandError) -> TabGroup? {
    if let group = workspace.group(reference) { return group }
    let titled = workspace.groups.filter { $0.title == reference }
    if titled.count > 1 {
        throw .badArgument("several groups are titled \"\(TerminalText.clean(reference))\" (ids: "
            + titled.map { TerminalText.clean($0.id) }.joined(separator: ", ") + "); give an id")
    }
    return titled.first
}

struct GroupCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "group",
        abstract: "Put tabs into a tab group (made when no group has that id or title); prints the group's id.",
        discussion: """
            The server places them (docs/design.md, "Tab groups"): into an existing group, after its \
            last tab; into a new one, the first tab stays and the others follow it.
            """)

    @OptionGroup var connection: ConnectionOptions
    @Argument(help: "Tab ids or unique title prefixes, in the order wanted.") var tabs: [String]
    @Option(help: "The group: an id or a title (a new group gets this title unless --title says).") var into: String
    @Option(help: "Set the group's title.") var title: String?
    @Option(help: "Set the group's colour: grey blue red yellow green pink purple cyan orange.") var color: GroupColor?

    func validate() throws {
        guard !tabs.isEmpty else { throw ValidationError("name at least one tab") }
    }

    func run() async throws {
        try await Connection.with(connection) { c in
            let ws = c.workspace
            var ids: [String] = []
            for reference in tabs { ids.append(try resolveTab(reference, in: ws).id) }
            let existing = try resolveGroup(into, in: ws)
            let id = existing?.id ?? ClientIdentity.randomId(prefix: "g-", count: 12)
            let newTitle = existing == nil ? (title ?? into) : title
            try await c.submit(.group(GroupTabs(tabIds: ids, groupId: id, title: newTitle, color: color?.name)))
            printOut(id)
        }
    }
}

struct UngroupCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ungroup", abstract: "Take tabs out of their groups (a group whose last tab leaves is gone).")

    @OptionGroup var connection: ConnectionOptions
    @Argument(help: "Tab ids or unique title prefixes.") var tabs: [String]

    func validate() throws {
        guard !tabs.isEmpty else { throw ValidationError("name at least one tab") }
    }

    func run() async throws {
        try await Connection.with(connection) { c in
            var ids: [String] = []
            for reference in tabs { ids.append(try resolveTab(reference, in: c.workspace).id) }
            try await c.submit(.ungroup(UngroupTabs(tabIds: ids)))
        }
    }
}

struct GroupEditCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "group-edit", abstract: "Rename or recolour a tab group.")

    @OptionGroup var connection: ConnectionOptions
    @Argument(help: "The group: an id or a title.") var group: String
    @Option(help: "Its new title.") var title: String?
    @Option(help: "Its new colour: grey blue red yellow green pink purple cyan orange.") var color: GroupColor?

    func validate() throws {
        guard title != nil || color != nil else { throw ValidationError("give --title, --color or both") }
    }

    func run() async throws {
        try await Connection.with(connection) { c in
            guard let found = try resolveGroup(group, in: c.workspace) else {
                throw CommandError.badArgument("no group has the id or title \"\(TerminalText.clean(group))\"")
            }
            try await c.submit(.updateGroup(GroupUpdate(groupId: found.id, title: title, color: color?.name)))
        }
    }
}
