/// Who one workspace's presence names, and what changed since the last presence flush. Event loop
/// thread only; one per ``WorkspaceHub``.
///
/// Guarantees:
/// - The list names at most `cap` sessions (the *named* ones); every other joined session is
///   counted in ``othersCount``. Sessions are named in the order they joined; a named session stays
///   named until it leaves, and then the longest-waiting unnamed session takes its place. So every
///   receiver of a flush sees the same list, and one encoded message serves them all.
/// - After ``takeFlush()``, the flush's `delta` turns the list as of the previous flush into the
///   list as of this one: `upserts` are the named sessions that joined the list or changed focus
///   since, `left` those that were in the previous list and are no longer named. A session that
///   joined and left between two flushes appears in neither (nobody hears of it), nor does an
///   unnamed session's focus change (nothing a list shows changed).
/// - Memory: O(joined sessions) ids for the workspace (the unnamed ones' join order), plus the
///   change sets, which ``takeFlush()`` empties. Nothing per receiver.
struct PresenceRoster {
    /// Sessions named at most.
    let cap: Int
    /// The named sessions, by id: true once a flush has published them (a receiver holds them).
    private(set) var named: [Int: Bool] = [:]
    /// Joined sessions that are not named.
    private var unnamed: Set<Int> = []
    /// `unnamed` in join order from `waitingHead` on; ids that left are skipped when met.
    private var waiting: [Int] = []
    private var waitingHead = 0
    /// Named sessions that joined the list or changed focus since the last flush.
    private var upserts: Set<Int> = []
    /// Published sessions that left the list since the last flush.
    private var removed: Set<Int> = []
    /// Sessions that joined since the last flush: their first list goes out at the next one.
    private(set) var awaitingFullList: Set<Int> = []
    /// ``othersCount`` as of the last flush.
    private var publishedOthers = 0

    init(cap: Int) {
        self.cap = max(1, cap)
    }

    /// Sessions the list does not name.
    var othersCount: Int { unnamed.count }
    var sessionCount: Int { named.count + unnamed.count }

    /// True when a flush would tell anyone anything: a change to the list or its count, or a
    /// session waiting for its full list.
    var hasChanges: Bool {
        !upserts.isEmpty || !removed.isEmpty || publishedOthers != unnamed.count || !awaitingFullList.isEmpty
    }

    /// A session joined (its `Welcome` is out); it gets the whole list at the next flush.
    mutating func join(_ id: Int) {
        guard named[id] == nil, !unnamed.contains(id) else { return }
        awaitingFullList.insert(id)
        if named.count < cap {
            named[id] = false
            upserts.insert(id)
        } else {
            unnamed.insert(id)
            waiting.append(id)
        }
    }

    /// A joined session left; the longest-waiting unnamed session takes its place in the list.
    mutating func leave(_ id: Int) {
        awaitingFullList.remove(id)
        if let published = named.removeValue(forKey: id) {
            upserts.remove(id)
            if published { removed.insert(id) }
            promote()
        } else if unnamed.remove(id) != nil {
            compactWaiting()
        }
    }

    /// A joined session's focus changed: the list shows it when the session is named.
    mutating func refocused(_ id: Int) {
        if named[id] != nil { upserts.insert(id) }
    }

    /// What one flush sends, as session ids; the change sets are emptied and the list published.
    struct Flush: Equatable {
        /// The whole list (sorted by session id): for sessions without deltas, and joiners.
        var named: [Int]
        /// Named sessions joined or refocused since the last flush (sorted).
        var upserts: [Int]
        /// Sessions the previous list named and this one does not (sorted).
        var left: [Int]
        var othersCount: Int
        /// The list or the count changed: sessions that already hold a list hear of it.
        var changed: Bool
        /// Sessions whose first list this is.
        var awaitingFullList: Set<Int>
    }

    mutating func takeFlush() -> Flush {
        let flush = Flush(
            named: named.keys.sorted(), upserts: upserts.sorted(), left: removed.sorted(),
            othersCount: unnamed.count,
            changed: !upserts.isEmpty || !removed.isEmpty || publishedOthers != unnamed.count,
            awaitingFullList: awaitingFullList)
        for id in upserts { named[id] = true }
        upserts.removeAll(keepingCapacity: true)
        removed.removeAll(keepingCapacity: true)
        awaitingFullList.removeAll(keepingCapacity: true)
        publishedOthers = unnamed.count
        return flush
    }

    private mutating func promote() {
        while named.count < cap, waitingHead < waiting.count {
            let id = waiting[waitingHead]
            waitingHead += 1
            guard unnamed.remove(id) != nil else { continue }  // left while waiting
            named[id] = false
            upserts.insert(id)
        }
        compactWaiting()
    }

    /// Drops the ids that left from `waiting` once they outnumber the ones still there.
    private mutating func compactWaiting() {
        if unnamed.isEmpty {
            waiting.removeAll(keepingCapacity: waiting.count <= 1024)
            waitingHead = 0
            return
        }
        let held = waiting.count - waitingHead
        guard held > 2 * unnamed.count + 64 else { return }
        waiting = waiting[waitingHead...].filter { unnamed.contains($0) }
        waitingHead = 0
    }
}
