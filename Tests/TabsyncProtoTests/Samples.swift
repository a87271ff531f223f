import Testing
import TabsyncCore
@testable import TabsyncProto

/// Hand-built pairs of a core op and the proto op it must convert to (and from), covering every
/// op kind and every field, each optional both present and absent.
enum Samples {
    static let fullTab = Tab(
        id: "t1", title: "Docs — ünïcode", url: "https://example.com/a?b=c", icon: "📄", badge: "3",
        locked: true, key: "a0V")
    static let plainTab = Tab(id: "t2")

    static func wireTab(_ id: String, title: String = "", url: String = "", icon: String = "",
                        badge: String = "", locked: Bool = false, key: String = "") -> Tabsync_V1_Tab {
        var tab = Tabsync_V1_Tab()
        tab.id = id
        tab.title = title
        tab.url = url
        tab.icon = icon
        tab.badge = badge
        tab.locked = locked
        tab.key = key
        return tab
    }

    static let wireFullTab = wireTab(
        "t1", title: "Docs — ünïcode", url: "https://example.com/a?b=c", icon: "📄", badge: "3",
        locked: true, key: "a0V")
    static let wirePlainTab = wireTab("t2")

    static func wirePlace(key: String) -> Tabsync_V1_Place {
        var place = Tabsync_V1_Place()
        place.key = key
        return place
    }

    static func wirePlace(index: UInt32) -> Tabsync_V1_Place {
        var place = Tabsync_V1_Place()
        place.index = index
        return place
    }

    static func op(_ kind: Tabsync_V1_Op.OneOf_Kind) -> Tabsync_V1_Op {
        var op = Tabsync_V1_Op()
        op.kind = kind
        return op
    }

    static func add(_ tab: Tabsync_V1_Tab, _ place: Tabsync_V1_Place?, activate: Bool) -> Tabsync_V1_Op {
        var add = Tabsync_V1_Add()
        add.tab = tab
        if let place { add.place = place }
        add.activate = activate
        return op(.add(add))
    }

    static func open(_ tab: Tabsync_V1_Tab, _ place: Tabsync_V1_Place?) -> Tabsync_V1_Op {
        var open = Tabsync_V1_Open()
        open.tab = tab
        if let place { open.place = place }
        return op(.open(open))
    }

    static func move(_ tabId: String, _ place: Tabsync_V1_Place?) -> Tabsync_V1_Op {
        var move = Tabsync_V1_Move()
        move.tabID = tabId
        if let place { move.place = place }
        return op(.move(move))
    }

    static func update(_ tabId: String, title: String? = nil, url: String? = nil, icon: String? = nil,
                       badge: String? = nil, locked: Bool? = nil) -> Tabsync_V1_Op {
        var update = Tabsync_V1_Update()
        update.tabID = tabId
        if let title { update.title = title }
        if let url { update.url = url }
        if let icon { update.icon = icon }
        if let badge { update.badge = badge }
        if let locked { update.locked = locked }
        return op(.update(update))
    }

    struct Pair: Sendable, CustomTestStringConvertible {
        var name: String
        var core: Operation
        var wire: Tabsync_V1_Op
        var testDescription: String { name }
    }

    /// Every op kind, every place form, every update field present and absent.
    static let pairs: [Pair] = {
        var pairs: [Pair] = [
            Pair(name: "add full tab at end, activate", core: .add(tab: fullTab, place: .end, activate: true),
                 wire: add(wireFullTab, nil, activate: true)),
            Pair(name: "add at key", core: .add(tab: plainTab, place: .key("a1V"), activate: false),
                 wire: add(wirePlainTab, wirePlace(key: "a1V"), activate: false)),
            Pair(name: "add at index", core: .add(tab: plainTab, place: .index(3), activate: true),
                 wire: add(wirePlainTab, wirePlace(index: 3), activate: true)),
            Pair(name: "add at index 0", core: .add(tab: plainTab, place: .index(0), activate: false),
                 wire: add(wirePlainTab, wirePlace(index: 0), activate: false)),
            Pair(name: "open at end", core: .open(tab: fullTab, place: .end), wire: open(wireFullTab, nil)),
            Pair(name: "open at key", core: .open(tab: plainTab, place: .key("Zz")),
                 wire: open(wirePlainTab, wirePlace(key: "Zz"))),
            Pair(name: "open at index", core: .open(tab: plainTab, place: .index(UInt32.max)),
                 wire: open(wirePlainTab, wirePlace(index: UInt32.max))),
            Pair(name: "move to end", core: .move(tabId: "t1", place: .end), wire: move("t1", nil)),
            Pair(name: "move to key", core: .move(tabId: "t1", place: .key("a0G")),
                 wire: move("t1", wirePlace(key: "a0G"))),
            Pair(name: "move to index", core: .move(tabId: "t1", place: .index(1)),
                 wire: move("t1", wirePlace(index: 1))),
        ]
        var remove = Tabsync_V1_Remove()
        remove.tabID = "t9"
        pairs.append(Pair(name: "remove", core: .remove(tabId: "t9"), wire: op(.remove(remove))))

        var byId = Tabsync_V1_Activate()
        byId.tabID = "t2"
        pairs.append(Pair(name: "activate by id", core: .activate(.tabId("t2")), wire: op(.activate(byId))))
        var byIndex = Tabsync_V1_Activate()
        byIndex.index = 4
        pairs.append(Pair(name: "activate by index", core: .activate(.index(4)), wire: op(.activate(byIndex))))
        var byIndexZero = Tabsync_V1_Activate()
        byIndexZero.index = 0
        pairs.append(Pair(name: "activate by index 0", core: .activate(.index(0)), wire: op(.activate(byIndexZero))))

        pairs += [
            Pair(name: "update title only", core: .update(TabUpdate(tabId: "t1", title: "New")),
                 wire: update("t1", title: "New")),
            Pair(name: "update url only", core: .update(TabUpdate(tabId: "t1", url: "https://x.test/")),
                 wire: update("t1", url: "https://x.test/")),
            Pair(name: "update icon only", core: .update(TabUpdate(tabId: "t1", icon: "★")),
                 wire: update("t1", icon: "★")),
            Pair(name: "update badge only", core: .update(TabUpdate(tabId: "t1", badge: "99+")),
                 wire: update("t1", badge: "99+")),
            Pair(name: "update locked true only", core: .update(TabUpdate(tabId: "t1", locked: true)),
                 wire: update("t1", locked: true)),
            Pair(name: "update locked false only", core: .update(TabUpdate(tabId: "t1", locked: false)),
                 wire: update("t1", locked: false)),
            Pair(name: "update clears url, icon, badge",
                 core: .update(TabUpdate(tabId: "t1", url: "", icon: "", badge: "")),
                 wire: update("t1", url: "", icon: "", badge: "")),
            Pair(name: "update empty title", core: .update(TabUpdate(tabId: "t1", title: "")),
                 wire: update("t1", title: "")),
            Pair(name: "update every field",
                 core: .update(TabUpdate(tabId: "t1", title: "T", url: "u", icon: "i", badge: "b", locked: true)),
                 wire: update("t1", title: "T", url: "u", icon: "i", badge: "b", locked: true)),
            Pair(name: "update no field", core: .update(TabUpdate(tabId: "t1")), wire: update("t1")),
        ]

        var editableOn = Tabsync_V1_SetEditable()
        editableOn.editable = true
        pairs.append(Pair(name: "setEditable true", core: .setEditable(true), wire: op(.setEditable(editableOn))))
        pairs.append(Pair(name: "setEditable false", core: .setEditable(false),
                          wire: op(.setEditable(Tabsync_V1_SetEditable()))))

        var replace = Tabsync_V1_Replace()
        replace.tabs = [wireFullTab, wirePlainTab]
        pairs.append(Pair(name: "replace", core: .replace(tabs: [fullTab, plainTab]), wire: op(.replace(replace))))
        pairs.append(Pair(name: "replace with nothing", core: .replace(tabs: []),
                          wire: op(.replace(Tabsync_V1_Replace()))))

        var rekey = Tabsync_V1_Rekey()
        var k1 = Tabsync_V1_TabKey()
        k1.tabID = "t1"
        k1.key = "a0"
        var k2 = Tabsync_V1_TabKey()
        k2.tabID = "t2"
        k2.key = "a1"
        rekey.keys = [k1, k2]
        pairs.append(Pair(name: "rekey",
                          core: .rekey(keys: [TabKey(tabId: "t1", key: "a0"), TabKey(tabId: "t2", key: "a1")]),
                          wire: op(.rekey(rekey))))

        var restore = Tabsync_V1_Restore()
        restore.version = 42
        pairs.append(Pair(name: "restore as submitted", core: .restore(version: 42, state: nil), wire: op(.restore(restore))))
        var restored = restore
        restored.state.tabs = [wireFullTab, wirePlainTab]
        restored.state.editable = true
        restored.state.activeTabID = "t2"
        pairs.append(Pair(name: "restore as applied",
                          core: .restore(version: 42, state: RestoredState(tabs: [fullTab, plainTab], activeTabId: "t2", editable: true)),
                          wire: op(.restore(restored))))
        var reopen = Tabsync_V1_Reopen()
        reopen.tabID = "t7"
        pairs.append(Pair(name: "reopen", core: .reopen(tabId: "t7"), wire: op(.reopen(reopen))))
        pairs += groupPairs
        return pairs
    }()

    /// Tab groups (proto/README.md, "Tab groups"): each op as submitted and as applied, a move
    /// carrying its final group, a tab asking for one, and replace and restore carrying groups.
    static let groupPairs: [Pair] = {
        var pairs: [Pair] = []
        var group = Tabsync_V1_Group()
        group.tabIds = ["t1", "t2"]
        group.groupID = "g1"
        pairs.append(Pair(name: "group as submitted, no fields", core: .group(GroupTabs(tabIds: ["t1", "t2"], groupId: "g1")),
                          wire: op(.group(group))))
        var applied = group
        applied.title = ""
        applied.color = "grey"
        applied.keys = ["a0", "a0V"]
        pairs.append(Pair(name: "group as applied, an empty title present",
                          core: .group(GroupTabs(tabIds: ["t1", "t2"], groupId: "g1", title: "", color: "grey", keys: ["a0", "a0V"])),
                          wire: op(.group(applied))))
        var ungroup = Tabsync_V1_Ungroup()
        ungroup.tabIds = ["t2"]
        ungroup.keys = ["a3"]
        pairs.append(Pair(name: "ungroup as applied", core: .ungroup(UngroupTabs(tabIds: ["t2"], keys: ["a3"])),
                          wire: op(.ungroup(ungroup))))
        var update = Tabsync_V1_UpdateGroup()
        update.groupID = "g1"
        update.color = "purple"
        pairs.append(Pair(name: "updateGroup colour only", core: .updateGroup(GroupUpdate(groupId: "g1", color: "purple")),
                          wire: op(.updateGroup(update))))
        var moved = move("t1", wirePlace(key: "a2"))
        if case .move(var m)? = moved.kind {
            m.group = "g1"
            moved.kind = .move(m)
        }
        pairs.append(Pair(name: "move as applied into a group", core: .move(tabId: "t1", place: .key("a2"), group: "g1"), wire: moved))
        var askingTab = wirePlainTab
        askingTab.group = "g1"
        pairs.append(Pair(name: "add asking for a group", core: .add(tab: Tab(id: "t2", group: "g1"), place: .end, activate: false),
                          wire: add(askingTab, nil, activate: false)))
        var wireGroup = Tabsync_V1_TabGroup()
        wireGroup.id = "g1"
        wireGroup.title = "Work"
        wireGroup.color = "blue"
        var replace = Tabsync_V1_Replace()
        replace.tabs = [askingTab]
        replace.groups = [wireGroup]
        let coreGroup = TabGroup(id: "g1", title: "Work", color: "blue")
        pairs.append(Pair(name: "replace with a group", core: .replace(tabs: [Tab(id: "t2", group: "g1")], groups: [coreGroup]),
                          wire: op(.replace(replace))))
        var restore = Tabsync_V1_Restore()
        restore.version = 9
        restore.state.tabs = [askingTab]
        restore.state.activeTabID = "t2"
        restore.state.groups = [wireGroup]
        pairs.append(Pair(name: "restore as applied with a group",
                          core: .restore(version: 9, state: RestoredState(tabs: [Tab(id: "t2", group: "g1")], activeTabId: "t2",
                                                                           editable: false, groups: [coreGroup])),
                          wire: op(.restore(restore))))
        return pairs
    }()
}
