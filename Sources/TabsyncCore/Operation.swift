/// Where an added or moved tab goes.
public enum Place: Sendable, Hashable {
    /// At the end of the list (an absent place, an empty `Place`, or an empty key).
    case end
    /// A fractional position key the client computed from the neighbours it saw.
    case key(String)
    /// The display index the tab has right after the op, read against the server's order when
    /// the op is applied; for a move it counts the list without the moved tab. Past the end = the end.
    case index(UInt32)
}

/// Which tab an activate names.
public enum ActivateTarget: Sendable, Hashable {
    case tabId(String)
    /// A display index; out of range is `INVALID_ARGUMENT`.
    case index(UInt32)
}

/// The fields an update sets; `nil` = not present. An empty string clears url, icon or badge.
public struct TabUpdate: Sendable, Hashable {
    public var tabId: String
    public var title: String?
    public var url: String?
    public var icon: String?
    public var badge: String?
    public var locked: Bool?

    public init(
        tabId: String, title: String? = nil, url: String? = nil, icon: String? = nil,
        badge: String? = nil, locked: Bool? = nil
    ) {
        self.tabId = tabId
        self.title = title
        self.url = url
        self.icon = icon
        self.badge = badge
        self.locked = locked
    }

    /// True when no field is present (such an update is refused).
    public var isEmpty: Bool {
        title == nil && url == nil && icon == nil && badge == nil && locked == nil
    }
}

/// One operation on a workspace, as submitted by a client or as applied by the server.
///
/// A *canonical* op (what ``Workspace/apply(_:limits:)`` returns and `Applied` carries) has
/// every place resolved to the final key, `open` turned into the `add` or `activate` it became,
/// and `activate` naming a tab id; a client can apply it without knowing any rule.
public enum Operation: Sendable, Hashable {
    case add(tab: Tab, place: Place, activate: Bool)
    case open(tab: Tab, place: Place)
    /// `group` is ignored in a submitted move; a canonical move carries the tab's final group ("" for
    /// none), decided by the placement rule (docs/design.md, "Tab groups").
    case move(tabId: String, place: Place, group: String = "")
    case remove(tabId: String)
    case activate(ActivateTarget)
    case update(TabUpdate)
    case setEditable(Bool)
    /// The whole list, and the groups its tabs name (in a canonical replace: those named, in display order).
    case replace(tabs: [Tab], groups: [TabGroup] = [])
    /// Server-made only: new keys for all tabs, same order.
    case rekey(keys: [TabKey])
    /// Puts the workspace back as it was at `version` (docs/design.md, "History"). A client sends
    /// `state` nil; the server reads the state at `version` from the store and applies the op with
    /// it (the canonical form), so every client applies it without reading history.
    case restore(version: UInt64, state: RestoredState?)
    /// Brings back a closed tab. Only ever submitted: the server resolves it from history into the
    /// `add` it becomes (the canonical form), so it never appears in `Applied`.
    case reopen(tabId: String)
    /// Puts tabs into a group, making it when it does not exist (docs/design.md, "Tab groups").
    case group(GroupTabs)
    /// Takes tabs out of their groups.
    case ungroup(UngroupTabs)
    /// Sets a group's title or colour.
    case updateGroup(GroupUpdate)

    /// The op's kind, for metrics, logs and the load generator's mix.
    public var kind: Kind {
        switch self {
        case .add: .add
        case .open: .open
        case .move: .move
        case .remove: .remove
        case .activate: .activate
        case .update: .update
        case .setEditable: .setEditable
        case .replace: .replace
        case .rekey: .rekey
        case .restore: .restore
        case .reopen: .reopen
        case .group: .group
        case .ungroup: .ungroup
        case .updateGroup: .updateGroup
        }
    }

    /// True for the ops whose outcome depends on history the server must read first (``restore``
    /// without its state, ``reopen``): the sequencer refuses them until resolved.
    public var needsHistory: Bool {
        switch self {
        case .restore(_, nil), .reopen: true
        default: false
        }
    }

    public enum Kind: String, Sendable, CaseIterable {
        case add, open, move, remove, activate, update, setEditable, replace, rekey, restore, reopen, group, ungroup
        case updateGroup
    }
}

/// The state a canonical `restore` puts back: the tabs with the keys and groups they had, the
/// groups (display order), the active tab and whether the workspace was editable, at the restored
/// version.
public struct RestoredState: Sendable, Hashable {
    public var tabs: [Tab]
    public var activeTabId: String
    public var editable: Bool
    public var groups: [TabGroup]

    public init(tabs: [Tab], activeTabId: String, editable: Bool, groups: [TabGroup] = []) {
        self.tabs = tabs
        self.activeTabId = activeTabId
        self.editable = editable
        self.groups = groups
    }

    /// The state of a workspace, to restore.
    public init(_ workspace: Workspace) {
        self.init(
            tabs: workspace.tabs, activeTabId: workspace.activeTabId, editable: workspace.editable,
            groups: workspace.groups)
    }
}
