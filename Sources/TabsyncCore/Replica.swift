/// The pure state a client keeps: the confirmed workspace built from the server's `Applied` stream,
/// and its own pending ops replayed on top of it (the optimistic state a UI shows).
///
/// Guarantees: `confirmed` only ever changes by whole, contiguous `Applied` ops or a snapshot;
/// a pending op leaves only with its own answer: its `Applied`, its `Rejected`, or `Rejected
/// ANSWER_GONE` when the server no longer holds the answer (docs/design.md, 'Submit, seqs and
/// dedup'). A `Welcome.lastSeq` at or above a pending op settles nothing: the op is sent again with
/// its seq and the server answers it with its stored answer, so a refused op is never taken for
/// applied, nor an applied one for refused;
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

    /// Takes a snapshot (a `Welcome` without recovery). Pending ops stay, those at or below
    /// `lastSeq` too: they wait for the answers their resubmission gets. Seqs go on after `lastSeq`.
    public mutating func reset(to snapshot: Workspace, lastSeq: UInt64) {
        confirmed = snapshot
        advanceSeqs(past: lastSeq)
    }

    /// Takes a snapshot of another history (a new epoch, or its own epoch below a version already
    /// seen: a store brought back from a backup). As ``reset(to:lastSeq:)``, and the rekeys of the
    /// old history are forgotten: no key is translated through them.
    public mutating func replaceHistory(with snapshot: Workspace, lastSeq: UInt64) {
        rekeys = []
        reset(to: snapshot, lastSeq: lastSeq)
    }

    /// A recovered `Welcome`: the missed ops follow through ``receive(applied:)`` (answering the
    /// pending ops they name). Pending ops at or below `lastSeq` that none answers stay, to be sent
    /// again for their answers. Seqs go on after `lastSeq`.
    public mutating func resume(lastSeq: UInt64) {
        advanceSeqs(past: lastSeq)
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
            // Its effect is in the confirmed state: the own op it answers (again) is settled.
            if applied.clientId == clientId, pending.contains(where: { $0.seq == applied.seq }) {
                pending.removeAll { $0.seq == applied.seq }
                replay()
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
            pending.removeAll { $0.seq == applied.seq }
        }
        replay()
        return .applied
    }

    /// Receives a `Rejected` for one of this client's seqs (or `ANSWER_GONE`: the op leaves the same
    /// way, its effect, if any, already in `confirmed`); returns the op it settled, if pending.
    @discardableResult
    public mutating func receive(rejectedSeq seq: UInt64) -> PendingOp? {
        guard let op = pending.first(where: { $0.seq == seq }) else { return nil }
        pending.removeAll { $0.seq == seq }
        replay()
        return op
    }

    /// Receives a `Rejected` that may pass if tried again (`UNAVAILABLE`, `RATE_LIMITED`): the op
    /// leaves `pending` for `held`, still shown in `optimistic`. Returns the held op, nil when it
    /// was not pending.
    @discardableResult
    public mutating func hold(rejectedSeq seq: UInt64) -> PendingOp? {
        guard let op = pending.first(where: { $0.seq == seq }) else { return nil }
        pending.removeAll { $0.seq == seq }
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

    /// The server consumed every seq up to `lastSeq`: new ops get later ones.
    private mutating func advanceSeqs(past lastSeq: UInt64) {
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
