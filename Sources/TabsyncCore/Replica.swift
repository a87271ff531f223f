/// The pure state a client keeps: the confirmed workspace built from the server's `Applied` stream,
/// and its own pending ops replayed on top of it (the optimistic state a UI shows).
///
/// Guarantees: `confirmed` only ever changes by whole, contiguous `Applied` ops or a snapshot;
/// a pending op leaves when its `Applied` or `Rejected` arrives, when a `Welcome.lastSeq` covers it,
/// or when an answer to a later seq of this client arrives (the server consumes a client's seqs in
/// increasing order, so a seq below an answered one that got no answer of its own was consumed
/// already or never will be: docs/design.md, 'Submit, seqs and dedup');
/// `optimistic` is always `confirmed` plus the pending ops that still apply, in seq order, then the
/// held ops. An op refused for a reason that passes (`UNAVAILABLE`, `RATE_LIMITED`) is not dropped:
/// ``hold(rejectedSeq:)`` keeps it, still shown, until ``releaseHeld()`` sends it again as a new op
/// with a new seq and its first base version (docs/design.md, 'Transient refusals are retried').
/// Seqs it hands out start at 1 and only increase.
public struct Replica: Sendable {
    /// An op submitted but not yet answered.
    public struct PendingOp: Sendable, Hashable {
        public var seq: UInt64
        /// The confirmed version the op's keys were computed against.
        public var baseVersion: UInt64
        public var op: Operation
        /// The seq the op was first submitted with: its identity across retries (a held op
        /// released again gets a new `seq`, and keeps this).
        public var firstSeq: UInt64
    }

    /// What receiving an `Applied` did.
    public enum Receipt: Sendable, Equatable {
        /// Applied to the confirmed state.
        case applied
        /// Already had it (version at or below the confirmed one): ignored.
        case stale
        /// A version is missing in between: reconnect with `lastVersion` to resync.
        case gap(expected: UInt64, got: UInt64)
        /// The op does not fit the confirmed state: resync from a snapshot.
        case diverged(OpError)
    }

    public let clientId: String
    public var limits: Limits
    public private(set) var confirmed: Workspace
    public private(set) var pending: [PendingOp] = []
    /// Ops refused for a reason that passes, oldest first, waiting for ``releaseHeld()``: nothing
    /// of them is stored, they have no live seq, and no answer to a later seq settles them.
    public private(set) var held: [PendingOp] = []
    public private(set) var optimistic: Workspace
    /// The seq the next submitted op gets.
    public private(set) var nextSeq: UInt64 = 1
    /// Rekeys received since the oldest pending op's base version: pending keys are translated
    /// through them (rule 7), so the optimistic state shows what the server will do.
    public private(set) var rekeys: [RekeyRecord] = []

    public init(clientId: String, workspace: Workspace, limits: Limits = .default) {
        self.clientId = clientId
        self.limits = limits
        self.confirmed = workspace
        self.optimistic = workspace
    }

    /// Takes a snapshot (a `Welcome` without recovery): pending ops at or below `lastSeq` are dropped,
    /// since their effect is already in the snapshot.
    public mutating func reset(to snapshot: Workspace, lastSeq: UInt64) {
        confirmed = snapshot
        acknowledge(upTo: lastSeq)
    }

    /// A recovered `Welcome`: the missed ops follow through ``receive(applied:)``; pending ops at or
    /// below `lastSeq` are dropped (their `Applied` is among the missed ones or they were refused).
    public mutating func resume(lastSeq: UInt64) {
        acknowledge(upTo: lastSeq)
    }

    /// Adds a local op: it gets the next seq and the current confirmed version as its base, and shows
    /// in `optimistic` at once. Send the returned op as a `Submit`.
    @discardableResult
    public mutating func submit(_ op: Operation) -> PendingOp {
        let pendingOp = PendingOp(seq: nextSeq, baseVersion: confirmed.version, op: op, firstSeq: nextSeq)
        nextSeq += 1
        pending.append(pendingOp)
        _ = try? optimistic.apply(op, limits: limits)
        return pendingOp
    }

    /// Receives one `Applied` from the server.
    public mutating func receive(applied: AppliedOp) -> Receipt {
        if applied.version <= confirmed.version {
            // Its effect is in the confirmed state: an own op it answers (again) is settled, and so
            // is every pending op below it.
            if applied.clientId == clientId, pending.contains(where: { $0.seq <= applied.seq }) {
                acknowledge(upTo: applied.seq)
            }
            return .stale
        }
        if applied.version != confirmed.version + 1 {
            return .gap(expected: confirmed.version + 1, got: applied.version)
        }
        let before = confirmed
        do {
            try confirmed.apply(applied: applied)
        } catch {
            return .diverged(error)
        }
        if case .rekey(let keys) = applied.op, !pending.isEmpty || !held.isEmpty {
            rekeys.append(RekeyRecord(version: applied.version, before: before, rekey: keys))
        }
        if applied.clientId == clientId {
            pending.removeAll { $0.seq <= applied.seq }
        }
        replay()
        return .applied
    }

    /// Receives a `Rejected` for one of this client's seqs; returns the op it refused, if pending.
    /// Pending ops below it, which got no answer, leave too (see the type's guarantees).
    @discardableResult
    public mutating func receive(rejectedSeq seq: UInt64) -> PendingOp? {
        let op = pending.first { $0.seq == seq }
        guard pending.contains(where: { $0.seq <= seq }) else { return nil }
        pending.removeAll { $0.seq <= seq }
        replay()
        return op
    }

    /// Receives a `Rejected` that may pass if tried again (`UNAVAILABLE`, `RATE_LIMITED`): the op
    /// leaves `pending` for `held`, still shown in `optimistic`. Pending ops below it, which got no
    /// answer, leave as with any answer. Returns the held op, nil when it was not pending.
    @discardableResult
    public mutating func hold(rejectedSeq seq: UInt64) -> PendingOp? {
        guard let op = pending.first(where: { $0.seq == seq }) else { return receive(rejectedSeq: seq) }
        pending.removeAll { $0.seq <= seq }
        held.append(op)
        replay()
        return op
    }

    /// Sends the held ops again, in the order they were held: each gets a new seq (after every seq
    /// handed out, so the server consumes it) and keeps its base version, so its keys are still
    /// translated through the rekeys since (rule 7). Returns them, now pending, to send as `Submit`s.
    public mutating func releaseHeld() -> [PendingOp] {
        guard !held.isEmpty else { return [] }
        var released: [PendingOp] = []
        for var op in held {
            op.seq = nextSeq
            nextSeq += 1
            released.append(op)
        }
        held = []
        pending.append(contentsOf: released)
        replay()
        return released
    }

    private mutating func acknowledge(upTo lastSeq: UInt64) {
        pending.removeAll { $0.seq <= lastSeq }
        nextSeq = max(nextSeq, lastSeq + 1)
        replay()
    }

    /// Rebuilds `optimistic` from `confirmed` and the pending ops that still apply.
    private mutating func replay() {
        let oldestBase = (pending + held).map(\.baseVersion).min() ?? confirmed.version
        rekeys.removeAll { $0.version <= oldestBase }
        var state = confirmed
        for p in pending { _ = try? state.apply(translated(p), limits: limits) }
        for p in held { _ = try? state.apply(translated(p), limits: limits) }
        optimistic = state
    }

    /// A pending op with its key place translated through the rekeys since its base version.
    private func translated(_ p: PendingOp) -> Operation {
        guard let key = Sequencer.submittedKey(of: p.op), PositionKey.isValid(key) else { return p.op }
        var k = key
        for rekey in rekeys where rekey.version > p.baseVersion { k = rekey.translate(k) }
        return k == key ? p.op : Sequencer.replacingKey(of: p.op, with: k)
    }
}
