/// One tab of a workspace.
///
/// A `Tab` value is just data; ``Validation`` checks its fields against docs/design.md, 'The model'
/// (id 1–64 chars of `[A-Za-z0-9._:-]`, title ≤ 256 chars, url ≤ 4096 UTF-8 bytes, icon ≤ 32,
/// badge ≤ 16, no control characters). Empty optional text means absent.
/// `key` is the tab's position key; in a workspace it is always valid and unique. `group` is the id
/// of the tab group it belongs to, or empty (docs/design.md, "Tab groups"); in a workspace it always
/// names an existing group.
public struct Tab: Sendable, Hashable {
    public var id: String
    public var title: String
    public var url: String
    public var icon: String
    public var badge: String
    public var locked: Bool
    public var key: String
    public var group: String

    public init(
        id: String, title: String = "", url: String = "", icon: String = "", badge: String = "",
        locked: Bool = false, key: String = "", group: String = ""
    ) {
        self.id = id
        self.title = title
        self.url = url
        self.icon = icon
        self.badge = badge
        self.locked = locked
        self.key = key
        self.group = group
    }
}

/// A tab's id and its new key, as carried by a rekey op.
public struct TabKey: Sendable, Hashable {
    public var tabId: String
    public var key: String

    public init(tabId: String, key: String) {
        self.tabId = tabId
        self.key = key
    }
}
