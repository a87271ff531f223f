import TabsyncLock

/// A holder registry kept in memory (``HolderRegistry``) for nodes in one process: the
/// deterministic simulation's, whose clock is virtual. ``MemoryHolderTable`` is what PostgreSQL's
/// `tabsync_holders` and `tabsync_nodes` are for ``PostgresStore``: shared by every node, with the
/// time its owner sets (``MemoryHolderTable/advance(to:)``) in place of `now()`. Each node gets its
/// own ``MemoryHolderRegistry`` on it (``MemoryHolderTable/node(_:heartbeatInterval:)``).
///
/// The same rules as ``PostgresStore``'s registry: a node is live while its last heartbeat or
/// registration is at most ``MemoryHolderTable/timeout`` old; a dead node's registrations are
/// ignored, and pruned by any heartbeat once it is silent for three timeouts; registering again
/// keeps the first registration's place in the order; "newer" is strictly later in that order.
///
/// Thread-safe (a `Lock` guards the table); each call is atomic.
public final class MemoryHolderTable: Sendable {
    struct State {
        var now: Duration = .zero
        /// Registrations made so far: each one's place in the order.
        var registrations: UInt64 = 0
        /// Each node's last heartbeat or registration.
        var seen: [String: Duration] = [:]
        /// Workspace → node → its registration's place in the order.
        var holders: [String: [String: UInt64]] = [:]
    }

    private let state = Lock(State())
    /// How long a node's holds stay live after its last heartbeat.
    public let timeout: Duration

    public init(timeout: Duration = .seconds(10)) {
        self.timeout = timeout
    }

    /// A registry handle for node `name` on this table.
    public func node(_ name: String, heartbeatInterval: Duration) -> MemoryHolderRegistry {
        MemoryHolderRegistry(table: self, node: name, heartbeatInterval: heartbeatInterval)
    }

    /// Moves the table's clock to `now` (it never goes back).
    public func advance(to now: Duration) {
        state.withLock { $0.now = max($0.now, now) }
    }

    /// The live nodes registered as holders of the workspace, sorted: those a commit to it
    /// notifies (besides the committer).
    public func liveHolders(of workspaceId: String) -> [String] {
        state.withLock { state in
            (state.holders[workspaceId] ?? [:]).keys.filter { Self.isLive($0, state, timeout) }.sorted()
        }
    }

    /// True when `node` is registered as a holder of the workspace, live or not.
    public func isRegistered(_ node: String, for workspaceId: String) -> Bool {
        state.withLock { $0.holders[workspaceId]?[node] != nil }
    }

    /// The workspaces `node` is registered for, live or not.
    public func registrations(of node: String) -> Set<String> {
        state.withLock { state in Set(state.holders.compactMap { $0.value[node] != nil ? $0.key : nil }) }
    }

    /// True when `node`'s last heartbeat or registration is at most ``timeout`` old.
    public func isLive(_ node: String) -> Bool {
        state.withLock { Self.isLive(node, $0, timeout) }
    }

    private static func isLive(_ node: String, _ state: State, _ timeout: Duration) -> Bool {
        guard let seen = state.seen[node] else { return false }
        return state.now - seen <= timeout
    }

    func hold(_ node: String, workspaceId: String) -> Int {
        state.withLock { state in
            state.seen[node] = state.now
            if state.holders[workspaceId]?[node] == nil {
                state.registrations += 1
                state.holders[workspaceId, default: [:]][node] = state.registrations
            }
            return (state.holders[workspaceId] ?? [:]).keys.filter { $0 != node && Self.isLive($0, state, timeout) }.count
        }
    }

    func hasNewerHolder(_ node: String, workspaceId: String) -> Bool {
        state.withLock { state in
            guard let holders = state.holders[workspaceId], let mine = holders[node] else { return false }
            return holders.contains { $0.key != node && $0.value > mine && Self.isLive($0.key, state, timeout) }
        }
    }

    func release(_ node: String, workspaceIds: [String]) {
        state.withLock { state in
            for id in workspaceIds {
                state.holders[id]?[node] = nil
                if state.holders[id]?.isEmpty == true { state.holders[id] = nil }
            }
        }
    }

    func heartbeat(_ node: String) {
        state.withLock { state in
            state.seen[node] = state.now
            let gone = state.seen.filter { state.now - $0.value > timeout * 3 }.map(\.key)
            for dead in gone {
                state.seen[dead] = nil
                for id in Array(state.holders.keys) {
                    state.holders[id]?[dead] = nil
                    if state.holders[id]?.isEmpty == true { state.holders[id] = nil }
                }
            }
        }
    }

    func leave(_ node: String) {
        state.withLock { state in
            state.seen[node] = nil
            for id in Array(state.holders.keys) {
                state.holders[id]?[node] = nil
                if state.holders[id]?.isEmpty == true { state.holders[id] = nil }
            }
        }
    }
}

/// One node's view of a ``MemoryHolderTable`` (``HolderRegistry``). Never fails; a caller that
/// wants registry faults wraps it.
public struct MemoryHolderRegistry: HolderRegistry {
    public let table: MemoryHolderTable
    /// This node's name in the table.
    public let node: String
    public let heartbeatInterval: Duration

    public func hold(workspaceId: String) throws(StoreError) -> Int {
        table.hold(node, workspaceId: workspaceId)
    }

    public func hasNewerHolder(workspaceId: String) throws(StoreError) -> Bool {
        table.hasNewerHolder(node, workspaceId: workspaceId)
    }

    public func release(workspaceIds: [String]) throws(StoreError) {
        table.release(node, workspaceIds: workspaceIds)
    }

    public func heartbeat() throws(StoreError) {
        table.heartbeat(node)
    }

    public func leave() {
        table.leave(node)
    }

    /// A memory registry sends no notification: its owner delivers commits to ``MemoryHolderTable/liveHolders(of:)``.
    public var notificationsSent: UInt64 { 0 }
}
