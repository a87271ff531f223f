import TabsyncCore

// Operations between core and wire. Core → wire never fails; wire → core fails only for messages
// that name no operation (ConversionError). Field values are not validated here: `apply` does that,
// so the server refuses a bad id with the same code whatever encoding carried it.

extension Tabsync_V1_Op {
    /// The wire form of any core operation (a server-made rekey included).
    public init(_ op: Operation) {
        self.init()
        switch op {
        case let .add(tab, place, activate):
            var add = Tabsync_V1_Add()
            add.tab = Tabsync_V1_Tab(tab)
            if let place = Tabsync_V1_Place(place) { add.place = place }
            add.activate = activate
            kind = .add(add)
        case let .open(tab, place):
            var open = Tabsync_V1_Open()
            open.tab = Tabsync_V1_Tab(tab)
            if let place = Tabsync_V1_Place(place) { open.place = place }
            kind = .open(open)
        case let .move(tabId, place, group):
            var move = Tabsync_V1_Move()
            move.tabID = tabId
            if let place = Tabsync_V1_Place(place) { move.place = place }
            move.group = group
            kind = .move(move)
        case let .remove(tabId):
            var remove = Tabsync_V1_Remove()
            remove.tabID = tabId
            kind = .remove(remove)
        case let .activate(target):
            kind = .activate(Tabsync_V1_Activate(target))
        case let .update(update):
            kind = .update(Tabsync_V1_Update(update))
        case let .setEditable(editable):
            var setEditable = Tabsync_V1_SetEditable()
            setEditable.editable = editable
            kind = .setEditable(setEditable)
        case let .replace(tabs, groups):
            var replace = Tabsync_V1_Replace()
            replace.tabs = tabs.map(Tabsync_V1_Tab.init)
            replace.groups = groups.map(Tabsync_V1_TabGroup.init)
            kind = .replace(replace)
        case let .rekey(keys):
            var rekey = Tabsync_V1_Rekey()
            rekey.keys = keys.map(Tabsync_V1_TabKey.init)
            kind = .rekey(rekey)
        case let .restore(version, state):
            var restore = Tabsync_V1_Restore()
            restore.version = version
            if let state {
                var wire = Tabsync_V1_RestoredState()
                wire.tabs = state.tabs.map(Tabsync_V1_Tab.init)
                wire.editable = state.editable
                wire.activeTabID = state.activeTabId
                wire.groups = state.groups.map(Tabsync_V1_TabGroup.init)
                restore.state = wire
            }
            kind = .restore(restore)
        case let .reopen(tabId):
            var reopen = Tabsync_V1_Reopen()
            reopen.tabID = tabId
            kind = .reopen(reopen)
        case let .group(change):
            kind = .group(Tabsync_V1_Group(change))
        case let .ungroup(change):
            kind = .ungroup(Tabsync_V1_Ungroup(change))
        case let .updateGroup(update):
            kind = .updateGroup(Tabsync_V1_UpdateGroup(update))
        }
    }
}

extension Operation {
    /// The core form of a wire op.
    ///
    /// An absent `tab` is an empty tab (refused later for its empty id); an absent or empty place,
    /// or an empty key, is `.end`; Update's fields are present exactly when set on the wire.
    /// A rekey converts like any op: refusing it from clients is `apply`'s job.
    /// - Throws: ``ConversionError/opKindMissing`` when no kind is set,
    ///   ``ConversionError/activateTargetMissing`` for an `Activate` naming nothing.
    public init(_ op: Tabsync_V1_Op) throws(ConversionError) {
        switch op.kind {
        case nil:
            throw .opKindMissing
        case let .add(add)?:
            self = .add(tab: Tab(add.tab), place: Place(add.place), activate: add.activate)
        case let .open(open)?:
            self = .open(tab: Tab(open.tab), place: Place(open.place))
        case let .move(move)?:
            self = .move(tabId: move.tabID, place: Place(move.place), group: move.group)
        case let .remove(remove)?:
            self = .remove(tabId: remove.tabID)
        case let .activate(activate)?:
            self = .activate(try ActivateTarget(activate))
        case let .update(update)?:
            self = .update(TabUpdate(update))
        case let .setEditable(setEditable)?:
            self = .setEditable(setEditable.editable)
        case let .replace(replace)?:
            self = .replace(tabs: replace.tabs.map(Tab.init), groups: replace.groups.map(TabGroup.init))
        case let .rekey(rekey)?:
            self = .rekey(keys: rekey.keys.map(TabKey.init))
        case let .restore(restore)?:
            self = .restore(
                version: restore.version,
                state: restore.hasState
                    ? RestoredState(
                        tabs: restore.state.tabs.map(Tab.init), activeTabId: restore.state.activeTabID,
                        editable: restore.state.editable, groups: restore.state.groups.map(TabGroup.init))
                    : nil)
        case let .reopen(reopen)?:
            self = .reopen(tabId: reopen.tabID)
        case let .group(group)?:
            self = .group(GroupTabs(group))
        case let .ungroup(ungroup)?:
            self = .ungroup(UngroupTabs(ungroup))
        case let .updateGroup(update)?:
            self = .updateGroup(GroupUpdate(update))
        }
    }
}

extension Tabsync_V1_Place {
    /// The wire form of a place, or nil for `.end`: the end is sent as an absent place.
    init?(_ place: Place) {
        self.init()
        switch place {
        case .end: return nil
        case let .key(key): at = .key(key)
        case let .index(index): at = .index(index)
        }
    }
}

extension Place {
    /// The core form of a wire place. Neither field set (an absent place reads as that) or an
    /// empty key is `.end`.
    public init(_ place: Tabsync_V1_Place) {
        switch place.at {
        case nil: self = .end
        case let .key(key)?: self = key.isEmpty ? .end : .key(key)
        case let .index(index)?: self = .index(index)
        }
    }
}

extension Tabsync_V1_Activate {
    init(_ target: ActivateTarget) {
        self.init()
        switch target {
        case let .tabId(tabId): self.target = .tabID(tabId)
        case let .index(index): self.target = .index(index)
        }
    }
}

extension ActivateTarget {
    /// - Throws: ``ConversionError/activateTargetMissing`` when neither field is set.
    ///   An explicitly set empty `tabId` converts to `.tabId("")` (refused by `apply`).
    init(_ activate: Tabsync_V1_Activate) throws(ConversionError) {
        switch activate.target {
        case nil: throw .activateTargetMissing
        case let .tabID(tabId)?: self = .tabId(tabId)
        case let .index(index)?: self = .index(index)
        }
    }
}

extension Tabsync_V1_Update {
    /// The wire form of an update: exactly the present fields are set (an empty string included,
    /// which clears url, icon or badge).
    init(_ update: TabUpdate) {
        self.init()
        tabID = update.tabId
        if let title = update.title { self.title = title }
        if let url = update.url { self.url = url }
        if let icon = update.icon { self.icon = icon }
        if let badge = update.badge { self.badge = badge }
        if let locked = update.locked { self.locked = locked }
    }
}

extension TabUpdate {
    /// The core form of a wire update: a field is non-nil exactly when it is present on the wire.
    public init(_ update: Tabsync_V1_Update) {
        self.init(
            tabId: update.tabID,
            title: update.hasTitle ? update.title : nil,
            url: update.hasURL ? update.url : nil,
            icon: update.hasIcon ? update.icon : nil,
            badge: update.hasBadge ? update.badge : nil,
            locked: update.hasLocked ? update.locked : nil)
    }
}
