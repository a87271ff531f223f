/// Every configurable limit, in one value. The defaults are docs/design.md's ('Limits and defaults').
///
/// Core enforces `maxTabs` and `maxGroups`; the server enforces the rest (frame size, op rate, resume window,
/// log retention, send queue bound) and tells clients the first four in `Welcome.limits`.
public struct Limits: Sendable, Equatable {
    /// Tabs per workspace (default 500).
    public var maxTabs: Int
    /// Tab groups per workspace (docs/design.md, "Tab groups": 100).
    public var maxGroups: Int
    /// Bytes of one client message, all fragments together (default 1 MiB).
    public var maxFrameBytes: Int
    /// Ops a connection may submit per second before `RATE_LIMITED` (default 100).
    public var maxOpsPerSecond: Int
    /// Most missed ops a resume sends instead of a snapshot (default 1,000).
    public var maxResumeOps: Int
    /// Ops kept in each workspace's log for resume and dedup answers (default 10,000).
    public var logRetention: Int
    /// Bytes queued to one connection before it is closed as a slow reader, 1013 (default 4 MiB).
    public var maxSendQueueBytes: Int

    public static let `default` = Limits()

    public init(
        maxTabs: Int = 500,
        maxGroups: Int = 100,
        maxFrameBytes: Int = 1 << 20,
        maxOpsPerSecond: Int = 100,
        maxResumeOps: Int = 1_000,
        logRetention: Int = 10_000,
        maxSendQueueBytes: Int = 4 << 20
    ) {
        self.maxTabs = maxTabs
        self.maxGroups = maxGroups
        self.maxFrameBytes = maxFrameBytes
        self.maxOpsPerSecond = maxOpsPerSecond
        self.maxResumeOps = maxResumeOps
        self.logRetention = logRetention
        self.maxSendQueueBytes = maxSendQueueBytes
    }
}
