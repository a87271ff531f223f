/// Which nodes hold which workspaces loaded, kept in a store several nodes share, so a commit
/// tells the other nodes only when one of them holds the workspace (docs/design.md, 'Several
/// nodes'; docs/architecture.md, 'Several nodes'). Under placement by workspace almost no commit
/// has another holder, so almost none notifies.
///
/// Guarantees asked of a conformer:
/// - After ``hold(workspaceId:)`` returns, every commit to the workspace that a load started
///   afterwards does not see notifies (the registration and a commit are ordered by the
///   workspace's row: a commit in flight finishes first, and a later one sees the registration).
/// - A node that stops calling ``heartbeat()`` for the store's holder timeout holds nothing: its
///   registrations are ignored, and pruned later by any node's heartbeat.
/// - Registration is advice, never a fence: the store's versions and seqs still refuse a stale
///   batch (`behind`), and nodes still poll, so a lost registration costs latency, not correctness.
///
/// Called on the server's store executor only, like the store.
public protocol HolderRegistry: Sendable {
    /// Registers this node as a holder of the workspace (before it is loaded); returns how many
    /// other live nodes hold it too (more than 0: the workspace is split across nodes).
    func hold(workspaceId: String) throws(StoreError) -> Int
    /// True when another live node registered as a holder of the workspace after this node did:
    /// the one the proxy sends its new sessions to now (a split workspace goes there).
    func hasNewerHolder(workspaceId: String) throws(StoreError) -> Bool
    /// This node no longer holds these workspaces (unloaded).
    func release(workspaceIds: [String]) throws(StoreError)
    /// This node is alive (call every ``heartbeatInterval``); also prunes nodes gone silent.
    func heartbeat() throws(StoreError)
    /// This node stops: it holds nothing any more.
    func leave()
    /// How often ``heartbeat()`` must be called for this node's holds to stay live.
    var heartbeatInterval: Duration { get }
    /// Notifications this node's commits sent (one per workspace per commit with another holder).
    var notificationsSent: UInt64 { get }
}
