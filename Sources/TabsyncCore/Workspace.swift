/// An authoritative (or replicated) tab workspace: its tabs in display order and the active tab.
///
/// Invariants, after every successful `apply` (checked by ``invariantViolations(limits:)``):
/// ids unique; keys valid and unique; `tabs` sorted by key, bytewise; `activeTabId` is empty
/// exactly when there are no tabs, else names an existing tab; tab count ≤ `Limits.maxTabs`; every
/// tab's group exists, no group is empty, each group's tabs are contiguous, `groups` is in display
/// order and holds at most `Limits.maxGroups` (docs/design.md, "Tab groups").
/// `apply` either changes the workspace and returns the canonical op, or throws and changes nothing.
public struct Workspace: Sendable, Equatable {
    /// 1–64 chars of `[A-Za-z0-9._-]`.
    public let id: String
    /// Ops applied so far; 0 for a workspace that does not exist yet.
    public internal(set) var version: UInt64
    /// Opaque; changes whenever history cannot continue (a wiped store).
    public var epoch: String
    /// Display order: ascending key, bytewise.
    public internal(set) var tabs: [Tab]
    /// "" exactly when `tabs` is empty.
    public internal(set) var activeTabId: String
    /// When false, add, move, remove, replace, group, ungroup and open-that-adds are refused `NOT_EDITABLE`.
    public internal(set) var editable: Bool
    /// The tab groups, in the display order of their tabs (docs/design.md, "Tab groups"): exactly
    /// the groups some tab names, each contiguous.
    public internal(set) var groups: [TabGroup]

    /// A new, empty workspace at version 0.
    public init(id: String, epoch: String = "") {
        self.id = id
        self.version = 0
        self.epoch = epoch
        self.tabs = []
        self.activeTabId = ""
        self.editable = true
        self.groups = []
    }

    /// A workspace restored from a snapshot (store, `Welcome`). The caller vouches for the
    /// invariants; ``invariantViolations(limits:)`` checks them.
    public init(
        id: String, version: UInt64, epoch: String, tabs: [Tab], activeTabId: String, editable: Bool,
        groups: [TabGroup] = []
    ) {
        self.id = id
        self.version = version
        self.epoch = epoch
        self.tabs = tabs
        self.activeTabId = activeTabId
        self.editable = editable
        self.groups = groups
    }
}
