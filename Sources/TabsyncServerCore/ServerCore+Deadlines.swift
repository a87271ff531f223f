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
/// The deadlines: a session's Hello timeout and its token's expiry, and its next ping or idle hangup
/// (one ``DeadlineTable``, by kind; ServerCore+Keepalive.swift); a
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
        for key in deadlines.takeDue(at: now) {
            switch key.kind {
            case .session: timerFired(key.id)
            case .keepalive: keepaliveDue(key.id)
            case .feed: feedKeepAliveDue(key.id)
            }
        }
    }

    /// The earliest instant at which a timeout would do something, nil when nothing is due ever
    /// (until the next event). Called at the end of every event (``handle(_:now:into:)``).
    mutating func earliestDeadline() -> Instant? {
        var next = deadlines.next()
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
