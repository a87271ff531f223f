import TabsyncCore

/// The core's workspace table: every workspace in memory or being read, with the clocks and marks
/// that belong to it (idle since when, read-back retries, presence to send, moves). A value owned
/// by ``ServerCore`` (docs/architecture.md, "Core and driver"); it decides nothing that needs a
/// session or the commit pipeline, and its rules are tested alone (`WorkspaceTableTests`).
///
///     (none) ─Hello or HTTP─▶ loading ─read─▶ loaded ─commit failed─▶ reloading ─read─▶ loaded
///
/// Guarantees:
/// - A workspace is in at most one ``Entry``; a loaded or reloading one has exactly one hub, and
///   the only way to change a hub is ``withHub(_:_:)`` (no hub is copied while it changes).
/// - A store read of a workspace is under way exactly while it is `loading` or `reloading`, and at
///   most one (``load(_:waiter:)`` and ``reload(_:)`` say when one must start). Sessions whose
///   Hello comes meanwhile wait in the entry, in arrival order.
/// - A reloading hub keeps its members, presence and HTTP snapshot; it is never idle, so never
///   unloaded. A failed read back is tried again after ``reloadRetryPause``
///   (``dueReloads(at:)``), and reported once per outage (``reloadFailed(_:waiters:at:)``).
/// - ``remove(_:)`` forgets the workspace and every clock and mark of it but its presence mark
///   (``takePresenceFlushes(at:interval:)`` drops a mark with no hub behind it).
struct WorkspaceTable {
    typealias Instant = ServerCore.Instant

    /// A workspace's place in the table; no entry means it is not in memory and no read of it is
    /// under way.
    enum Entry {
        /// The first read from the store is under way; `waiters` join once it is back.
        case loading(waiters: [ConnectionID])
        /// In memory, taking ops.
        case loaded(WorkspaceHub)
        /// A commit failed: the live state was ahead of the store and is being read back; its
        /// members stay, `waiters` join once the read is back.
        case reloading(WorkspaceHub, waiters: [ConnectionID])

        var phase: Phase {
            switch self {
            case .loading: .loading
            case .loaded: .loaded
            case .reloading: .reloading
            }
        }

        var hub: WorkspaceHub? {
            switch self {
            case .loading: nil
            case .loaded(let hub), .reloading(let hub, _): hub
            }
        }
    }

    enum Phase: Equatable {
        case loading, loaded, reloading
    }

    /// Pause between two reads back of a workspace whose read failed.
    static var reloadRetryPause: Duration { .milliseconds(250) }

    private var entries: [String: Entry] = [:]
    /// Loaded workspaces that became idle (no session, nothing to store), and since when.
    private(set) var idleSince: [String: Instant] = [:]
    /// At or before the earliest of ``idleSince`` (exact after each scan; a clock stopped since
    /// may leave it early, never late).
    private var idleEarliest: Instant?
    private var lastIdleScan: Instant
    /// Workspaces whose read back failed, and when to read them again.
    private(set) var reloadRetries: [String: Instant] = [:]
    /// Workspaces whose read back has failed since it last succeeded (their failure is reported once).
    private var reloadFailing: Set<String> = []
    /// Workspaces whose peer list changed since their last presence broadcast.
    private(set) var presenceDirty: Set<String> = []
    /// Split workspaces: checks for a newer holder and hand-overs (ServerCore+Moves.swift).
    var moves = MoveState()

    init(now: Instant) {
        lastIdleScan = now
    }

    // MARK: reading

    /// Workspaces in the table (loading, loaded or reloading).
    var count: Int { entries.count }

    /// Every workspace in the table, in no order.
    var ids: Dictionary<String, Entry>.Keys { entries.keys }

    func phase(_ id: String) -> Phase? { entries[id]?.phase }

    /// The hub of a loaded or reloading workspace.
    func hub(_ id: String) -> WorkspaceHub? { entries[id]?.hub }

    /// The hub of a loaded workspace (not loading, not reloading).
    func loadedHub(_ id: String) -> WorkspaceHub? {
        guard case .loaded(let hub)? = entries[id] else { return nil }
        return hub
    }

    /// Who waits for the read under way of a workspace, in arrival order (none when loaded).
    func waiters(_ id: String) -> [ConnectionID] {
        switch entries[id] {
        case .loading(let waiters)?, .reloading(_, let waiters)?: waiters
        case .loaded?, nil: []
        }
    }

    /// True when the workspace is loaded and no session is in it or being welcomed into it.
    func hasNoSession(_ id: String) -> Bool {
        guard let hub = loadedHub(id) else { return false }
        return hub.members.isEmpty && hub.welcoming.isEmpty
    }

    // MARK: changing a hub

    /// Changes the hub of a loaded or reloading workspace in place; nil (and `body` not run) when
    /// there is none. The hub is out of the table while `body` runs, so changing it copies none of
    /// its storage; `body` cannot reach the table.
    mutating func withHub<R, E: Error>(_ id: String, _ body: (inout WorkspaceHub) throws(E) -> R) throws(E) -> R? {
        guard let index = entries.index(forKey: id) else { return nil }
        switch entries.values[index] {
        case .loading:
            return nil
        case .loaded(var hub):
            entries.values[index] = .loading(waiters: [])
            defer { entries.values[index] = .loaded(hub) }
            return try body(&hub)
        case .reloading(var hub, let waiters):
            entries.values[index] = .loading(waiters: [])
            defer { entries.values[index] = .reloading(hub, waiters: waiters) }
            return try body(&hub)
        }
    }

    // MARK: loading and reading back

    /// A workspace is wanted (a session's Hello, `waiter`, or an HTTP request, nil): true when it was
    /// not in the table and its first read must start now. Otherwise a waiter waits for the read
    /// under way (or, when it is loaded, for nothing: the caller joins it at once instead).
    mutating func load(_ id: String, waiter: ConnectionID?) -> Bool {
        guard let index = entries.index(forKey: id) else {
            entries[id] = .loading(waiters: waiter.map { [$0] } ?? [])
            return true
        }
        guard let waiter else { return false }
        switch entries.values[index] {
        case .loading(var waiters):
            entries.values[index] = .loading(waiters: [])
            waiters.append(waiter)
            entries.values[index] = .loading(waiters: waiters)
        case .reloading(let hub, var waiters):
            entries.values[index] = .loading(waiters: [])
            waiters.append(waiter)
            entries.values[index] = .reloading(hub, waiters: waiters)
        case .loaded:
            break
        }
        return false
    }

    /// The first read is back: the workspace is loaded with `hub`. Returns who waited, in order
    /// (nil when no first read was under way).
    mutating func loaded(_ id: String, _ hub: WorkspaceHub) -> [ConnectionID]? {
        guard case .loading(let waiters)? = entries[id] else { return nil }
        entries[id] = .loaded(hub)
        return waiters
    }

    /// After a failed commit: a loaded workspace starts being read back (true: start the read);
    /// its hub and members stay.
    mutating func reload(_ id: String) -> Bool {
        guard let index = entries.index(forKey: id), case .loaded(let hub) = entries.values[index] else { return false }
        entries.values[index] = .reloading(hub, waiters: [])
        return true
    }

    /// The read back is in: the hub takes the stored state (`restore`) and the workspace is
    /// loaded again; its retry and failure marks go. Returns the hub's durable state before and
    /// who waited, in order (nil when no read back was under way).
    mutating func reloaded(_ id: String, restore stored: Sequencer) -> (before: Workspace, waiters: [ConnectionID])? {
        guard let index = entries.index(forKey: id), case .reloading(var hub, let waiters) = entries.values[index] else {
            return nil
        }
        entries.values[index] = .loading(waiters: [])
        let before = hub.durable
        hub.restore(stored)
        entries.values[index] = .loaded(hub)
        reloadRetries[id] = nil
        reloadFailing.remove(id)
        return (before, waiters)
    }

    /// The read back failed: it is tried again at `now` + ``reloadRetryPause``; `waiters` (those
    /// still waiting) keep waiting. True on the first failure since the last success (report it).
    mutating func reloadFailed(_ id: String, waiters: [ConnectionID], at now: Instant) -> Bool {
        guard let index = entries.index(forKey: id), case .reloading(let hub, _) = entries.values[index] else { return false }
        entries.values[index] = .reloading(hub, waiters: waiters)
        reloadRetries[id] = now + Self.reloadRetryPause
        return reloadFailing.insert(id).inserted
    }

    /// The reads back whose pause is over at `now`, in id order, taken off the retry list: read
    /// each again (those no longer reloading are left out).
    mutating func dueReloads(at now: Instant) -> [String] {
        guard !reloadRetries.isEmpty else { return [] }
        var due: [String] = []
        for (id, at) in reloadRetries.sorted(by: { $0.key < $1.key }) where at <= now {
            reloadRetries[id] = nil
            if phase(id) == .reloading { due.append(id) }
        }
        return due
    }

    /// Forgets a workspace: its entry, idle clock, retry, failure mark and moves.
    mutating func remove(_ id: String) {
        entries[id] = nil
        inUse(id)
        reloadRetries[id] = nil
        reloadFailing.remove(id)
        moves.forget(id)
    }

    // MARK: idle

    /// The workspace is in use again: its idle clock stops.
    mutating func inUse(_ id: String) {
        idleSince[id] = nil
        if idleSince.isEmpty { idleEarliest = nil }
    }

    /// The workspace became idle at `now`: its idle clock starts (unless it runs already).
    mutating func becameIdle(_ id: String, at now: Instant) {
        guard idleSince[id] == nil else { return }
        idleSince[id] = now
        if idleEarliest.map({ now < $0 }) ?? true { idleEarliest = now }
    }

    /// When ``dueIdle(at:idleUnload:)`` next has something to return (or, after a clock stopped,
    /// earlier): nil when no clock runs.
    func nextIdleDeadline(idleUnload: Duration) -> Instant? {
        guard let earliest = idleEarliest else { return nil }
        let due = earliest + idleUnload
        return idleUnload < .seconds(2) ? due : max(due, lastIdleScan + .seconds(1))
    }

    /// The workspaces idle for `idleUnload` or more at `now`, in id order, their clocks stopped:
    /// unload each that is still idle. At most one scan per second (every time when `idleUnload`
    /// is under 2 s).
    mutating func dueIdle(at now: Instant, idleUnload: Duration) -> [String] {
        guard !idleSince.isEmpty, now - lastIdleScan >= .seconds(1) || idleUnload < .seconds(2) else { return [] }
        lastIdleScan = now
        var due: [String] = []
        for (id, since) in idleSince.sorted(by: { $0.key < $1.key }) where now - since >= idleUnload {
            idleSince[id] = nil
            due.append(id)
        }
        idleEarliest = idleSince.values.min()
        return due
    }

    // MARK: presence

    /// The workspace's peer list changed: its presence goes out at the next flush due.
    mutating func presenceChanged(_ id: String) {
        presenceDirty.insert(id)
    }

    /// When ``takePresenceFlushes(at:interval:)`` next has a flush to return: the earliest instant
    /// a marked workspace with changes may go (`interval(members)` after its last flush, `now` when
    /// it never had one); nil when none has changes.
    func nextPresenceDeadline(now: Instant, interval: (Int) -> Duration) -> Instant? {
        var next: Instant?
        for id in presenceDirty {
            guard let hub = hub(id), hub.presence.hasChanges else { continue }
            let at = hub.lastPresenceAt.map { $0 + interval(hub.members.count) } ?? now
            if next.map({ at < $0 }) ?? true { next = at }
        }
        return next
    }

    /// The presence flushes due at `now`, in id order, each taken from its hub with the members it
    /// goes to: a workspace goes at most once per `interval(members)` (coalesced: one flush for
    /// every change in between); marks without a hub or a change are dropped.
    mutating func takePresenceFlushes(
        at now: Instant, interval: (Int) -> Duration
    ) -> [(members: [ConnectionID], flush: PresenceRoster.Flush)] {
        guard !presenceDirty.isEmpty else { return [] }
        var flushes: [(members: [ConnectionID], flush: PresenceRoster.Flush)] = []
        for id in presenceDirty.sorted() {
            enum Due { case nothing, later, now([ConnectionID], PresenceRoster.Flush) }
            let due = withHub(id) { hub -> Due in
                guard hub.presence.hasChanges else { return .nothing }
                if let last = hub.lastPresenceAt, now - last < interval(hub.members.count) { return .later }
                hub.lastPresenceAt = now
                return .now(hub.members, hub.presence.takeFlush())
            }
            switch due ?? .nothing {
            case .nothing:
                presenceDirty.remove(id)  // no hub, or nothing changed: the mark goes
            case .later:
                continue
            case .now(let members, let flush):
                presenceDirty.remove(id)
                flushes.append((members, flush))
            }
        }
        return flushes
    }
}
