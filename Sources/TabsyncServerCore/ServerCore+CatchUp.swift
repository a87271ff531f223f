import TabsyncCore
import TabsyncProto
import TabsyncStore

/// Several nodes on one store: hearing of other nodes' commits and catching up on them
/// (``CatchUpState``).
extension ServerCore {
    /// An event of the commit feed (another node's commit, or the feed's connection).
    mutating func heard(_ event: CommitFeedEvent) {
        switch event {
        case .committed(let notification):
            metrics.storeNotifications += 1
            let (workspaceId, version) = (notification.workspaceId, notification.version)
            if let changes = notification.changes, took(workspaceId, version: version, changes) { return }
            heardOf(workspaceId, version: version)
        case .listening(let reconnected):
            metrics.storeListening = true
            // Commits made before it listened (or while it was away) announced nothing to it.
            if reconnected {
                metrics.listenerReconnects += 1
                logger.info("store listener reconnected; catching up every loaded workspace")
            }
            pollStore()
        case .disconnected(let why):
            metrics.storeListening = false
            logger.warning("store listener disconnected", metadata: ["error": "\(why)"])
        }
    }

    /// A notification carrying its batch: taken at once, as a catch-up read's answer would be, when
    /// the workspace is loaded here at exactly the batch's base version and nothing holds it back
    /// (a batch of its own in the pipeline, a `Welcome` waiting). True when there was nothing else
    /// to do; false: the caller reads instead.
    private mutating func took(_ id: String, version: UInt64, _ changes: CommitNotification.Changes) -> Bool {
        guard let storedVersion = storedVersion(of: id) else { return true }
        guard version > storedVersion else { return true }
        guard changes.base == storedVersion, !isHeldBack(id) else { return false }
        let missed = CatchUpRead.CatchUp(
            from: changes.base, ops: changes.ops,
            dedup: DedupState(version: version, lastSeqs: changes.lastSeqs, rejections: changes.refusals, rekeys: []))
        do throws(OpError) {
            try takeStored(missed, into: id, live: true)
            metrics.notificationsTaken += 1
        } catch {
            fellBehind(id, why: "\(error)")
        }
        return true
    }

    /// Another node (or this one) stored `id` at `version`: read what is missing when it is loaded
    /// here and behind.
    mutating func heardOf(_ id: String, version: UInt64) {
        guard let storedVersion = storedVersion(of: id), version > storedVersion else { return }
        catchUps.heard[id] = max(catchUps.heard[id] ?? 0, version)
        startCatchUpRead()
    }

    /// Starts one read of every workspace behind a heard version that nothing holds back, unless a
    /// read is in flight (its answer starts the next).
    mutating func startCatchUpRead() {
        guard !catchUps.readInFlight, !catchUps.heard.isEmpty else { return }
        var versions: [String: UInt64] = [:]
        for (id, version) in catchUps.heard.sorted(by: { $0.key < $1.key }) {
            guard let storedVersion = storedVersion(of: id), version > storedVersion else {
                catchUps.heard[id] = nil
                continue
            }
            guard !isHeldBack(id) else { continue }
            catchUps.heard[id] = nil
            versions[id] = storedVersion
        }
        guard !versions.isEmpty else { return }
        catchUps.readInFlight = true
        catchUps.readsStarted += 1
        metrics.catchUpReads += 1
        emit(.readChanges(versions))
    }

    /// A catch-up read is back: applies and broadcasts each workspace's missed ops unless it moved
    /// on meanwhile, settles the change feeds that waited for it, then reads again what was heard
    /// meanwhile.
    mutating func caughtUp(_ reads: [String: CatchUpRead], duration: Duration) {
        catchUps.readInFlight = false
        metrics.storeSeconds.observe(duration.seconds)
        let serial = catchUps.readsStarted  // one read in flight at a time: this one
        for (id, read) in reads.sorted(by: { $0.key < $1.key }) {
            switch caughtUp(id, read) {
            case .taken: settleFeeds(of: id, readSerial: serial)
            case .notTaken: settleFeeds(of: id, readSerial: nil)
            case .failed: settleFeeds(of: id, readSerial: serial, failed: true)
            }
        }
        startCatchUpRead()
    }

    /// What became of one workspace's read: `taken` when the node now holds everything the store
    /// held when the read started.
    private enum ReadOutcome { case taken, notTaken, failed }

    private mutating func caughtUp(_ id: String, _ read: CatchUpRead) -> ReadOutcome {
        guard let storedVersion = storedVersion(of: id) else { return .notTaken }
        switch read {
        case .caughtUp(let missed):
            guard missed.from == storedVersion else { return .notTaken }  // another read got there first
            guard !isHeldBack(id) else {
                catchUps.heard[id] = max(catchUps.heard[id] ?? 0, missed.dedup?.version ?? 0)
                return .notTaken
            }
            do throws(OpError) {
                try takeStored(missed, into: id, live: true)
                return .taken
            } catch {
                fellBehind(id, why: "\(error)")
                return .notTaken
            }
        case .compacted:
            guard !commits.isBusy(id) else { return .notTaken }
            fellBehind(id, why: "the log no longer holds the ops after version \(storedVersion)")
            return .notTaken
        case .failed(let error):
            // The poll finds it again once the store answers.
            logger.warning("catch-up read failed", metadata: ["workspace": "\(id)", "error": "\(error)"])
            return .failed
        }
    }

    /// Takes ops other nodes stored (and the dedup state at their end) into the hub's `stored`
    /// sequencer, and its live one when `live`, then broadcasts them as `Applied` to its members:
    /// they are durable. Throws when an op does not follow (the hub must be read back whole).
    mutating func takeStored(_ missed: CatchUpRead.CatchUp, into id: String, live: Bool) throws(OpError) {
        guard workspaces.hub(id)?.stored != nil else { return }
        // Declared first, so it runs last: after the broadcasts (or the throw).
        defer { if !missed.ops.isEmpty { sawOtherNodesCommit(id) } }
        let members = try workspaces.withHub(id) { hub throws(OpError) -> [ConnectionID] in
            guard var stored = hub.stored else { return hub.members }
            // Out of the hub while it changes (no copy); written back even when an op does not
            // follow: what was adopted stays adopted.
            hub.stored = nil
            defer { hub.stored = stored }
            for op in missed.ops {
                try stored.adopt(op)
                if live { try hub.live.adopt(op) }
            }
            if let dedup = missed.dedup {
                for rejection in dedup.rejections {
                    stored.adopt(rejection)
                    if live { hub.live.adopt(rejection) }
                }
                for (client, seq) in dedup.lastSeqs.sorted(by: { $0.key < $1.key }) {
                    stored.adopt(lastSeq: seq, of: client)
                    if live { hub.live.adopt(lastSeq: seq, of: client) }
                }
            }
            hub.durable = stored.workspace
            return hub.members
        } ?? []
        metrics.opsCaughtUp += UInt64(missed.ops.count)
        for op in missed.ops { broadcast(Tabsync_V1_ServerMessage(applied: op), to: members) }
        feedApplied(missed.ops, of: id)
    }

    /// The hub cannot be brought up to date op by op: its members are closed 1013 (they resume by
    /// `lastVersion`, or get a snapshot) and it is read back whole.
    mutating func fellBehind(_ id: String, why: String) {
        logger.warning("workspace fell behind the store; reading it back whole", metadata: ["workspace": "\(id)", "why": "\(why)"])
        for member in workspaces.hub(id)?.members ?? [] { close(member, .behindStore) }
        catchUps.heard[id] = nil
        reload(id)
    }

    /// The stored version of a loaded workspace of a shared store, nil otherwise.
    func storedVersion(of id: String) -> UInt64? {
        workspaces.loadedHub(id)?.stored?.workspace.version
    }

    /// A catch-up of `id` waits: a batch of its own is in the pipeline (its `behind` catches up),
    /// or a `Welcome` waits there (made from the live state the read would change).
    func isHeldBack(_ id: String) -> Bool {
        commits.isBusy(id) || !(workspaces.hub(id)?.welcoming.isEmpty ?? true)
    }

    // MARK: polling

    /// At a timeout: polls the stored versions when the interval has passed.
    mutating func pollStoreIfDue() {
        guard let interval = settings.sharedStorePollInterval, interval > .zero else { return }
        guard let due = catchUps.nextPollAt else {
            catchUps.nextPollAt = now + interval
            return
        }
        if now >= due { pollStore() }
    }

    /// Reads the stored version of every loaded workspace (one store call); those behind catch up.
    mutating func pollStore() {
        guard let interval = settings.sharedStorePollInterval else { return }
        catchUps.nextPollAt = now + interval
        guard !catchUps.pollInFlight else {
            catchUps.pollAgain = true
            return
        }
        let ids = workspaces.ids.filter { storedVersion(of: $0) != nil }.sorted()
        guard !ids.isEmpty else { return }
        catchUps.pollInFlight = true
        emit(.pollVersions(ids))
    }

    /// The stored versions are back: each loaded workspace behind them catches up.
    mutating func polled(_ result: Result<[String: UInt64], StoreError>, duration: Duration) {
        catchUps.pollInFlight = false
        metrics.storeSeconds.observe(duration.seconds)
        switch result {
        case .success(let versions):
            for (id, version) in versions.sorted(by: { $0.key < $1.key }) { heardOf(id, version: version) }
        case .failure(let error):
            logger.debug("store poll failed", metadata: ["error": "\(error)"])
        }
        if catchUps.pollAgain {
            catchUps.pollAgain = false
            pollStore()
        }
    }
}
