/// The sessions' deadlines, by kind (quinn-proto's `TimerTable` shape): at most one deadline per
/// session and kind, kept in buckets of one millisecond (a bucketed table, not a heap of entries).
///
/// Guarantees:
/// - Setting, moving or clearing a deadline, and ``removeAll(_:)`` of a session's, touch only that
///   session's entries: a dictionary write and a set insert or remove, O(1); opening a bucket no
///   deadline uses yet adds its number to an index of buckets, O(log B) for B buckets in use
///   (keepalive deadlines are rounded to a coarser `grain`, so thousands of sessions share one).
/// - Nothing stays behind a cleared deadline: ``count`` is the number of deadlines set, so the
///   table's size is bounded by live sessions × kinds once their entries go with them
///   (``removeAll(_:)`` on disconnect). The index of buckets holds at most twice the buckets in use
///   plus a constant (it is compacted when it grows past that).
/// - A deadline comes at its instant rounded up to the bucket's (at most 1 ms, or its `grain`,
///   late), never before it. ``takeDue(at:)`` costs what it takes (the due buckets' entries, sorted
///   within a bucket by session then kind, so the same deadlines come in the same order).
struct DeadlineTable {
    /// What a session's deadline is for.
    enum Kind: UInt8, Comparable {
        /// The Hello timeout before the Hello, then the token's expiry.
        case session
        /// The next ping or the idle hangup (``ServerCore/keepaliveDue(_:)``).
        case keepalive
        /// A change feed's next keep-alive comment (``ServerCore/feedKeepAliveDue(_:)``); the id is
        /// the feed's request id, from the same counter as connection ids.
        case feed

        static func < (a: Kind, b: Kind) -> Bool { a.rawValue < b.rawValue }
    }

    struct Key: Hashable, Comparable {
        var id: ConnectionID
        var kind: Kind

        static func < (a: Key, b: Key) -> Bool { a.id < b.id || (a.id == b.id && a.kind < b.kind) }
    }

    /// Bucket numbers count milliseconds from here.
    let origin: ServerCore.Instant
    /// Each key's bucket.
    private var buckets: [Key: Int64] = [:]
    /// Each bucket's keys; a bucket with none is removed.
    private var members: [Int64: Set<Key>] = [:]
    /// A min-heap of bucket numbers; a number whose bucket went is skipped when it comes up.
    private var index: [Int64] = []

    init(origin: ServerCore.Instant) {
        self.origin = origin
    }

    /// Deadlines set.
    var count: Int { buckets.count }

    /// Buckets in use, and the numbers the index holds (for the bound tests).
    var bucketCount: Int { members.count }
    var indexCount: Int { index.count }

    /// The session's deadline of `kind`, at its bucket's instant; nil when none is set.
    func deadline(_ id: ConnectionID, _ kind: Kind) -> ServerCore.Instant? {
        buckets[Key(id: id, kind: kind)].map(instant(ofBucket:))
    }

    /// Sets (or, with nil, clears) the session's deadline of `kind`, rounded up to a multiple of
    /// `grain` (whole milliseconds, at least one) counted from ``origin``.
    mutating func set(_ id: ConnectionID, _ kind: Kind, _ at: ServerCore.Instant?, grain: Duration = .milliseconds(1)) {
        let key = Key(id: id, kind: kind)
        let bucket = at.map { bucketNumber($0, grain: grain) }
        let old = buckets[key]
        guard old != bucket else { return }
        if let old { leave(old, key) }
        buckets[key] = bucket
        guard let bucket else { return }
        if members[bucket] == nil {
            members[bucket] = [key]
            push(bucket)
        } else {
            members[bucket]!.insert(key)
        }
    }

    /// Clears every deadline of the session (it is gone).
    mutating func removeAll(_ id: ConnectionID) {
        set(id, .session, nil)
        set(id, .keepalive, nil)
    }

    /// The earliest deadline set, nil when none is.
    mutating func next() -> ServerCore.Instant? {
        while let top = index.first, members[top] == nil { pop() }
        return index.first.map(instant(ofBucket:))
    }

    /// The deadlines at or before `now`, bucket by bucket (within one, by session then kind), cleared.
    mutating func takeDue(at now: ServerCore.Instant) -> [Key] {
        var due: [Key] = []
        while next() != nil, instant(ofBucket: index[0]) <= now {
            let bucket = index[0]
            pop()
            let keys = members.removeValue(forKey: bucket)!.sorted()
            for key in keys { buckets[key] = nil }
            due.append(contentsOf: keys)
        }
        return due
    }

    // MARK: buckets

    private func instant(ofBucket bucket: Int64) -> ServerCore.Instant {
        origin + .milliseconds(bucket)
    }

    /// The bucket of `at`: its milliseconds since ``origin``, rounded up to a multiple of `grain`.
    private func bucketNumber(_ at: ServerCore.Instant, grain: Duration) -> Int64 {
        let (seconds, attoseconds) = max(.zero, origin.duration(to: at)).components
        let millis = seconds * 1_000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
        let step = max(1, grain.microseconds / 1_000)
        return (millis + step - 1) / step * step
    }

    private mutating func leave(_ bucket: Int64, _ key: Key) {
        members[bucket]?.remove(key)
        if members[bucket]?.isEmpty == true { members[bucket] = nil }
    }

    // MARK: the index of buckets

    private mutating func push(_ bucket: Int64) {
        if index.count > 2 * members.count + 64 {
            // Numbers of buckets that went: drop them (a sorted array is a min-heap). Amortized
            // over the pushes that left them.
            index = members.keys.sorted()
            return  // the new bucket is among the members already
        }
        index.append(bucket)
        var child = index.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard index[child] < index[parent] else { break }
            index.swapAt(child, parent)
            child = parent
        }
    }

    private mutating func pop() {
        let last = index.removeLast()
        guard !index.isEmpty else { return }
        index[0] = last
        var parent = 0
        while true {
            let left = 2 * parent + 1, right = left + 1
            var first = parent
            if left < index.count, index[left] < index[first] { first = left }
            if right < index.count, index[right] < index[first] { first = right }
            guard first != parent else { return }
            index.swapAt(parent, first)
            parent = first
        }
    }
}
