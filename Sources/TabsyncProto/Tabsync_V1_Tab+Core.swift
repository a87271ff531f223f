import TabsyncCore

extension Tabsync_V1_Tab {
    /// The wire form of a tab; every field is copied (empty text is simply not sent).
    public init(_ tab: Tab) {
        self.init()
        id = tab.id
        title = tab.title
        url = tab.url
        icon = tab.icon
        badge = tab.badge
        locked = tab.locked
        key = tab.key
        group = tab.group
    }
}

extension Tab {
    /// The core form of a wire tab; absent text fields are "". No validation: `apply` validates.
    public init(_ tab: Tabsync_V1_Tab) {
        self.init(
            id: tab.id, title: tab.title, url: tab.url, icon: tab.icon, badge: tab.badge,
            locked: tab.locked, key: tab.key, group: tab.group)
    }
}

extension Tabsync_V1_TabKey {
    init(_ tabKey: TabKey) {
        self.init()
        tabID = tabKey.tabId
        key = tabKey.key
    }
}

extension TabKey {
    public init(_ tabKey: Tabsync_V1_TabKey) {
        self.init(tabId: tabKey.tabID, key: tabKey.key)
    }
}
