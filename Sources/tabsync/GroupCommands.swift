import ArgumentParser
import TabsyncCore

// The one-shot group commands (docs/design.md, "Tab groups"): `group`, `ungroup`, `group-edit`.

/// A group colour argument: one of the browsers' nine (anything else is a bad argument, exit 2).
struct GroupColor: ExpressibleByArgument {
    let name: String

    init?(argument: String) {
        guard TabGroup.colors.contains(argument) else { return nil }
        name = argument
    }

    static var allValueStrings: [String] { TabGroup.colors }
}

/// The group GROUP names in `workspace`: an exact id first, then the one group with that title.
/// nil when none has it; a title several groups share is a bad argument.
func resolveGroup(_ reference: String, in workspace: Workspace) throws(CommandError) -> TabGroup? {
    if let group = workspace.group(reference) { return group }
    let titled = workspace.groups.filter { $0.title == reference }
    if titled.count > 1 {
        throw .badArgument("\"\(reference)\" is the title of several groups (ids: "
            + titled.map(\.id).joined(separator: ", ") + "); give a group id")
    }
    return titled.first
}

/// A new group id: `g-` and 12 random base-62 chars.
func newGroupId() -> String { ClientIdentity.randomId(prefix: "g-", count: 12) }

struct GroupCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "group",
        abstract: "Put tabs into a group (made when --into names none); prints the group id.",
        discussion: """
            --into is a group id or title. An existing group takes the tabs right after its last tab; \
            otherwise a new group is made, titled --title (default: the --into text) and coloured \
            --color (default grey), and the tabs follow the first one.
            """)

    @OptionGroup var connection: ConnectionOptions
    @Argument(help: "Tab ids or unique title prefixes, in the order they go.") var tabs: [String]
    @Option(help: "A group id or title.") var into: String
    @Option(help: "Set the group's title.") var title: String?
    @Option(help: "Set the group's colour: \(TabGroup.colors.joined(separator: ", ")).") var color: GroupColor?

    func validate() throws {
        if tabs.isEmpty { throw ValidationError("name at least one TAB") }
    }

    func run() async throws {
        try await Connection.with(connection) { c in
            let ws = c.workspace
            var ids: [String] = []
            for reference in tabs { ids.append(try resolveTab(reference, in: ws).id) }
            let change: GroupTabs
            if let group = try resolveGroup(into, in: ws) {
                change = GroupTabs(tabIds: ids, groupId: group.id, title: title, color: color?.name)
            } else {
                change = GroupTabs(tabIds: ids, groupId: newGroupId(), title: title ?? into, color: color?.name)
            }
            try await c.submit(.group(change))
            printOut(change.groupId)
        }
    }
}

struct UngroupCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ungroup", abstract: "Take tabs out of their groups.")

    @OptionGroup var connection: ConnectionOptions
    @Argument(help: "Tab ids or unique title prefixes.") var tabs: [String]

    func validate() throws {
        if tabs.isEmpty { throw ValidationError("name at least one TAB") }
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
        commandName: "group-edit", abstract: "Rename or recolour a group.")

    @OptionGroup var connection: ConnectionOptions
    @Argument(help: "A group id or title.") var group: String
    @Option(help: "The new title (may be empty).") var title: String?
    @Option(help: "The new colour: \(TabGroup.colors.joined(separator: ", ")).") var color: GroupColor?

    func validate() throws {
        if title == nil && color == nil { throw ValidationError("give --title or --color") }
    }

    func run() async throws {
        try await Connection.with(connection) { c in
            guard let found = try resolveGroup(group, in: c.workspace) else {
                throw CommandError.badArgument("no group has the id or title \"\(group)\"")
            }
            try await c.submit(.updateGroup(GroupUpdate(groupId: found.id, title: title, color: color?.name)))
        }
    }
}
