import TabsyncCore

extension Tabsync_V1_Snapshot {
    /// The wire form of a whole workspace: id, version, epoch, tabs in display order (with keys),
    /// active tab, editable flag and groups (display order).
    public init(_ workspace: Workspace) {
        self.init()
        self.workspace = workspace.id
        version = workspace.version
        epoch = workspace.epoch
        tabs = workspace.tabs.map(Tabsync_V1_Tab.init)
        activeTabID = workspace.activeTabId
        editable = workspace.editable
        groups = workspace.groups.map(Tabsync_V1_TabGroup.init)
    }
}

extension Workspace {
    /// The workspace a received snapshot describes. It is taken as sent (no validation, no
    /// re-sorting): the server vouches for the invariants, and
    /// `invariantViolations(limits:)` can check them.
    public init(_ snapshot: Tabsync_V1_Snapshot) {
        self.init(
            id: snapshot.workspace, version: snapshot.version, epoch: snapshot.epoch,
            tabs: snapshot.tabs.map(Tab.init), activeTabId: snapshot.activeTabID,
            editable: snapshot.editable, groups: snapshot.groups.map(TabGroup.init))
    }
}

extension Tabsync_V1_Limits {
    /// The limits a client is told in `Welcome.limits` (values over `UInt32.max` are sent as
    /// `UInt32.max`, negative ones as 0).
    init(_ limits: Limits) {
        self.init()
        maxTabs = UInt32(clamping: limits.maxTabs)
        maxFrameBytes = UInt32(clamping: limits.maxFrameBytes)
        maxOpsPerSecond = UInt32(clamping: limits.maxOpsPerSecond)
        maxResumeOps = UInt32(clamping: limits.maxResumeOps)
        maxGroups = UInt32(clamping: limits.maxGroups)
    }
}

extension Limits {
    /// The limits a server announced. The wire fields are taken as sent (0 = not
    /// announced: the default stays); the server-only limits keep their defaults.
    public init(_ limits: Tabsync_V1_Limits) {
        self.init()
        if limits.maxTabs > 0 { maxTabs = Int(limits.maxTabs) }
        if limits.maxFrameBytes > 0 { maxFrameBytes = Int(limits.maxFrameBytes) }
        if limits.maxOpsPerSecond > 0 { maxOpsPerSecond = Int(limits.maxOpsPerSecond) }
        if limits.maxResumeOps > 0 { maxResumeOps = Int(limits.maxResumeOps) }
        if limits.maxGroups > 0 { maxGroups = Int(limits.maxGroups) }
    }
}
