import TabsyncCore

// Tab groups between core and wire (proto/README.md#tab-groups). As for every op, values are not
// validated here: `apply` does that. A field that is absent on the wire is nil in core exactly where
// core has an optional (titles and colours of Group and UpdateGroup).

extension Tabsync_V1_TabGroup {
    public init(_ group: TabGroup) {
        self.init()
        id = group.id
        title = group.title
        color = group.color
    }
}

extension TabGroup {
    /// The core form of a wire group; an absent colour is "" (refused by `apply` where it matters).
    public init(_ group: Tabsync_V1_TabGroup) {
        self.init(id: group.id, title: group.title, color: group.color)
    }
}

extension Tabsync_V1_Group {
    init(_ change: GroupTabs) {
        self.init()
        tabIds = change.tabIds
        groupID = change.groupId
        if let title = change.title { self.title = title }
        if let color = change.color { self.color = color }
        keys = change.keys
    }
}

extension GroupTabs {
    public init(_ group: Tabsync_V1_Group) {
        self.init(
            tabIds: group.tabIds, groupId: group.groupID, title: group.hasTitle ? group.title : nil,
            color: group.hasColor ? group.color : nil, keys: group.keys)
    }
}

extension Tabsync_V1_Ungroup {
    init(_ change: UngroupTabs) {
        self.init()
        tabIds = change.tabIds
        keys = change.keys
    }
}

extension UngroupTabs {
    public init(_ ungroup: Tabsync_V1_Ungroup) {
        self.init(tabIds: ungroup.tabIds, keys: ungroup.keys)
    }
}

extension Tabsync_V1_UpdateGroup {
    init(_ update: GroupUpdate) {
        self.init()
        groupID = update.groupId
        if let title = update.title { self.title = title }
        if let color = update.color { self.color = color }
    }
}

extension GroupUpdate {
    public init(_ update: Tabsync_V1_UpdateGroup) {
        self.init(
            groupId: update.groupID, title: update.hasTitle ? update.title : nil,
            color: update.hasColor ? update.color : nil)
    }
}
