/// One op as the server applied it: what an `Applied` message carries and the op log stores.
///
/// `op` is canonical (see ``Operation``); `clientId` is "" and `seq` 0 for server-made ops (rekey).
/// Versions in a workspace's stream are contiguous.
public struct AppliedOp: Sendable, Hashable {
    public var version: UInt64
    public var op: Operation
    public var clientId: String
    public var seq: UInt64
    public var activeTabId: String

    public init(version: UInt64, op: Operation, clientId: String, seq: UInt64, activeTabId: String) {
        self.version = version
        self.op = op
        self.clientId = clientId
        self.seq = seq
        self.activeTabId = activeTabId
    }
}
