/// Time reaches the core one way (docs/architecture.md, "Core and driver"): after every event the
/// core names the next instant at which something of its own is due (``ServerCore/nextDeadline``),
/// and the driver sends ``ServerCore/Event/timeout`` once that instant has come. Nothing else
/// wakes it: no periodic tick, no per-session timer, no separate wake for a lingering batch. An
/// idle server sleeps until its next deadline (quinn-proto's `poll_timeout`).
///
/// Guarantees:
/// - ``ServerCore/nextDeadline`` is never later than the earliest instant at which a timeout
///   would do something: a timeout at it, or later, does everything then due, in one fixed order
///   (``ServerCore/timeout()``). It may be earlier (a deadline cleared since it was set): such a
///   timeout does nothing.
/// - After a timeout at `now`, the next deadline is later than `now`: what was due was done.
///
/// The deadlines: a session's Hello timeout and its token's expiry (``SessionDeadlines``); a
/// lingering batch (``CommitPipeline/Linger``); presence (``WorkspaceTable/takePresenceFlushes(at:interval:)``);
/// idle unloads; the shared store's poll; read-back retries; the holder registry's heartbeat and
/// checks after their pause; the admin log's read and drained deletes; the stop's two deadlines.
extension ServerCore {
    /// How often a workspace being deleted is looked at while its sessions drain (the pace of the
    /// 50 ms tick this replaced).
    static var deleteDrainPause: Duration { .milliseconds(50) }

    /// Everything due at `now`, in a fixed order; the session deadlines last.
    mutating func timeout() {
        commits.linger.roll(now)
        startCommitIfIdle()  // a lingering batch whose deadline came
        flushPresence()
        unloadIdleWorkspaces()
        pollStoreIfDue()
        retryReloads()
        beatIfDue()
        startDueHolderChecks()
        readAdminLogIfDue()
        advanceDeletes()
        continueShutdown()
        for id in sessionDeadlines.takeDue(at: now) { timerFired(id) }
    }

    /// The earliest instant at which a timeout would do something, nil when nothing is due ever
    /// (until the next event). Called at the end of every event (``handle(_:now:into:)``).
    mutating func earliestDeadline() -> Instant? {
        var next = sessionDeadlines.next()
        func consider(_ instant: Instant?) {
            guard let instant else { return }
            if next.map({ instant < $0 }) ?? true { next = instant }
        }
        if commits.inFlight == nil, commits.hasPendingRecords, shutdown == .running {
            consider(commits.lingerDeadline(now: now) ?? now)
        }
        let presenceInterval = settings.presenceInterval
        consider(workspaces.nextPresenceDeadline(now: now) { Self.presenceInterval(presenceInterval, sessions: $0) })
        consider(workspaces.nextIdleDeadline(idleUnload: settings.idleUnload))
        if let interval = settings.sharedStorePollInterval, interval > .zero { consider(catchUps.nextPollAt ?? now) }
        consider(workspaces.reloadRetries.values.min())
        if settings.holderRegistry != nil, shutdown == .running { consider(nextHeartbeat ?? now) }
        consider(workspaces.moves.checkAt.values.min())
        if settings.sharedStore, !admin.reading { consider(admin.nextRead ?? now) }
        if admin.deleting.values.contains(where: { !$0.pendingStore }) { consider(now + Self.deleteDrainPause) }
        if case .draining(_, let closeBy, let finishBy, let closed) = shutdown { consider(closed ? finishBy : closeBy) }
        return next
    }
}

/// The sessions' own deadlines (the Hello timeout, then the token's expiry), at most one per
/// session, in a min-heap ordered by instant then session id. Clearing or replacing a deadline
/// leaves its old heap entry behind; it is skipped when it comes up (``next()`` drops such entries
/// from the top, so a cleared deadline never wakes the driver).
struct SessionDeadlines {
    private var deadlines: [ConnectionID: ServerCore.Instant] = [:]
    private var heap: [(at: ServerCore.Instant, id: ConnectionID)] = []

    /// Sets (or, with nil, clears) the session's deadline.
    mutating func set(_ id: ConnectionID, _ at: ServerCore.Instant?) {
        deadlines[id] = at
        if let at { push((at, id)) }
    }

    /// The earliest deadline set, nil when none is.
    mutating func next() -> ServerCore.Instant? {
        while let top = heap.first, deadlines[top.id] != top.at { pop() }
        return heap.first?.at
    }

    /// The sessions whose deadline is at or before `now`, earliest first, their deadlines cleared.
    mutating func takeDue(at now: ServerCore.Instant) -> [ConnectionID] {
        var due: [ConnectionID] = []
        while let at = next(), at <= now {
            let id = heap[0].id
            pop()
            deadlines[id] = nil
            due.append(id)
        }
        return due
    }

    private static func before(_ a: (at: ServerCore.Instant, id: ConnectionID), _ b: (at: ServerCore.Instant, id: ConnectionID)) -> Bool {
        a.at < b.at || (a.at == b.at && a.id < b.id)
    }

    private mutating func push(_ entry: (at: ServerCore.Instant, id: ConnectionID)) {
        heap.append(entry)
        var child = heap.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard Self.before(heap[child], heap[parent]) else { break }
            heap.swapAt(child, parent)
            child = parent
        }
    }

    private mutating func pop() {
        let last = heap.removeLast()
        guard !heap.isEmpty else { return }
        heap[0] = last
        var parent = 0
        while true {
            let left = 2 * parent + 1, right = left + 1
            var first = parent
            if left < heap.count, Self.before(heap[left], heap[first]) { first = left }
            if right < heap.count, Self.before(heap[right], heap[first]) { first = right }
            guard first != parent else { return }
            heap.swapAt(parent, first)
            parent = first
        }
    }
}
