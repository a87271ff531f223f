/// The payloads of the group ops (docs/design.md, "Tab groups").

/// `group(tabIds, groupId, title?, color?)`: puts the listed tabs into `groupId`, making it when it
/// does not exist. A canonical one (as `Applied` carries it) lists only the tabs that were there,
/// carries the group's final `title` and `color` (both present) and each listed tab's final key in
/// `keys`, so a client applies it without the rules: each listed tab takes its key and the group.
public struct GroupTabs: Sendable, Hashable {
    public var tabIds: [String]
    public var groupId: String
    public var title: String?
    public var color: String?
    /// Canonical only: the final key of each tab of `tabIds`, in the same order; empty when submitted.
    public var keys: [String]

    public init(tabIds: [String], groupId: String, title: String? = nil, color: String? = nil, keys: [String] = []) {
        self.tabIds = tabIds
        self.groupId = groupId
        self.title = title
        self.color = color
        self.keys = keys
    }
}

/// `ungroup(tabIds)`: takes the listed tabs out of their groups. A canonical one lists only the tabs
/// that were there and each one's final key in `keys`: each listed tab takes its key and no group.
public struct UngroupTabs: Sendable, Hashable {
    public var tabIds: [String]
    /// Canonical only: the final key of each tab of `tabIds`, in the same order; empty when submitted.
    public var keys: [String]

    public init(tabIds: [String], keys: [String] = []) {
        self.tabIds = tabIds
        self.keys = keys
    }
}

/// `updateGroup(groupId, title?, color?)`: sets the fields present (`nil` = not present).
public struct GroupUpdate: Sendable, Hashable {
    public var groupId: String
    public var title: String?
    public var color: String?

    public init(groupId: String, title: String? = nil, color: String? = nil) {
        self.groupId = groupId
        self.title = title
        self.color = color
    }

    /// True when no field is present (such an update is refused).
    public var isEmpty: Bool { title == nil && color == nil }
}
