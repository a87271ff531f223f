/// The server's apply path for one workspace: dedup by (clientId, seq), docs/design.md rule 7 (rekey
/// before storing a key over 64 bytes; translation of keys computed before a rekey, by `baseVersion`),
/// and a bounded in-memory log of recent applied ops for resume and repeated answers.
///
/// Guarantees: a seq is consumed at most once per client and an op is applied at most once; every
/// applied op keeps the workspace's invariants; versions are contiguous; a refused op changes nothing
/// but the client's last consumed seq. A key computed before a rekey is translated through every
/// rekey since its `baseVersion`, or refused `INVALID_ARGUMENT` when one of those rekeys has left the
/// log window (see ``forgottenRekeysThrough``): it is never read against keys it was not computed
/// for. Pure value type: copy it to roll back.
public struct Sequencer: Sendable {
    public private(set) var workspace: Workspace
    public var limits: Limits

    /// Last consumed seq per client.
    public private(set) var lastSeqs: [String: UInt64]
    /// Recent applied ops, contiguous by version, at most `limits.logRetention` of them.
    public private(set) var log: [AppliedOp]
    /// Rekeys whose version is still within the log window, ascending.
    public private(set) var rekeys: [RekeyRecord]
    /// Every rekey after this version is in ``rekeys``; a rekey at or before it may have been dropped
    /// with the log. A key place whose `baseVersion` (> 0) is below it cannot be translated (rule 7)
    /// and is refused. 0 while nothing has been dropped.
    public private(set) var forgottenRekeysThrough: UInt64
    /// Answers to recently consumed seqs (applied or rejected), for resubmissions.
    private var answers: [ClientSeq: Answer]

    struct ClientSeq: Hashable, Sendable {
        var clientId: String
        var seq: UInt64
    }

    public enum Outcome: Sendable, Equatable {
        /// Applied, in order; a server-made rekey may come before the op.
        case applied([AppliedOp])
        /// Refused; the seq is consumed (except seq 0, which consumes nothing).
        case rejected(OpError)
        /// The seq was consumed before and its answer is still known: resend it to the submitter only.
        case answeredAgain(Answer)
        /// The seq was consumed before and its answer has left the log: no answer.
        case ignored
    }

    public enum Answer: Sendable, Equatable {
        case applied(AppliedOp)
        case rejected(seq: UInt64, OpError)
    }

    /// A refused seq and its answer, as kept for resubmissions (and by a store across restarts).
    public struct Rejection: Sendable, Equatable {
        public var clientId: String
        public var seq: UInt64
        public var error: OpError

        public init(clientId: String, seq: UInt64, error: OpError) {
            self.clientId = clientId
            self.seq = seq
            self.error = error
        }
    }

    /// Rebuilds the apply path from stored parts: the workspace, the recent log (contiguous, ending at
    /// the workspace's version), the last consumed seq per client, the refusals still to be answered
    /// again (oldest first), and the rekeys within the log window (ascending), so that keys computed
    /// before a rekey are still translated after a restart.
    ///
    /// `forgottenRekeysThrough` is ``forgottenRekeysThrough`` as it was; when it is not known, any
    /// version before the log may have held a rekey: the version just before the log's first (the
    /// workspace's version for an empty log).
    public init(
        workspace: Workspace, limits: Limits, log: [AppliedOp] = [], lastSeqs: [String: UInt64] = [:],
        rejections: [Rejection] = [], rekeys: [RekeyRecord] = [], forgottenRekeysThrough: UInt64? = nil
    ) {
        self.workspace = workspace
        self.limits = limits
        self.log = log
        self.lastSeqs = lastSeqs
        self.rekeys = rekeys
        self.forgottenRekeysThrough = forgottenRekeysThrough ?? log.first.map { $0.version - 1 } ?? workspace.version
        self.answers = [:]
        for applied in log where !applied.clientId.isEmpty {
            answers[ClientSeq(clientId: applied.clientId, seq: applied.seq)] = .applied(applied)
        }
        for r in rejections {
            let key = ClientSeq(clientId: r.clientId, seq: r.seq)
            answers[key] = .rejected(seq: r.seq, r.error)
            rejectedSinceTrim.append(key)
        }
    }

    /// The refusals still answered again on resubmission, oldest first (for a store to keep).
    public var rejections: [Rejection] {
        rejectedSinceTrim.compactMap { key in
            guard case .rejected(let seq, let error) = answers[key] else { return nil }
            return Rejection(clientId: key.clientId, seq: seq, error: error)
        }
    }

    /// Last seq consumed for `clientId` (0 when none).
    public func lastSeq(of clientId: String) -> UInt64 {
        lastSeqs[clientId] ?? 0
    }

    /// The applied ops after `version`, when the log still holds all of them; nil otherwise.
    public func missed(after version: UInt64) -> [AppliedOp]? {
        if version == workspace.version { return [] }
        guard version < workspace.version, let first = log.first, first.version <= version + 1 else { return nil }
        return Array(log[Int(version + 1 - first.version)...])
    }

    /// Submits one op from `clientId` (see ``Outcome``).
    public mutating func submit(clientId: String, seq: UInt64, baseVersion: UInt64, op: Operation) -> Outcome {
        if let early = consume(clientId: clientId, seq: seq) { return early }
        do throws(OpError) {
            let applied = try apply(op, baseVersion: baseVersion, clientId: clientId, seq: seq)
            answers[ClientSeq(clientId: clientId, seq: seq)] = .applied(applied.last!)
            return .applied(applied)
        } catch {
            return recordRejection(clientId: clientId, seq: seq, error)
        }
    }

    /// Refuses `seq` for a reason decided outside core (`RATE_LIMITED`, an op that did not decode):
    /// the seq is consumed like any refused op's, so a resubmission is answered the same way. A seq
    /// already consumed gets its first answer instead (see ``Outcome``).
    public mutating func refuse(clientId: String, seq: UInt64, error: OpError) -> Outcome {
        if let early = consume(clientId: clientId, seq: seq) { return early }
        return recordRejection(clientId: clientId, seq: seq, error)
    }

    /// Dedup: the outcome for a seq that must not be applied (0, or already consumed); nil after
    /// consuming a new seq.
    private mutating func consume(clientId: String, seq: UInt64) -> Outcome? {
        guard seq > 0 else { return .rejected(.invalidArgument("seq must be 1 or more")) }
        if seq <= lastSeq(of: clientId) {
            if let answer = answers[ClientSeq(clientId: clientId, seq: seq)] { return .answeredAgain(answer) }
            return .ignored
        }
        lastSeqs[clientId] = seq
        return nil
    }

    private mutating func recordRejection(clientId: String, seq: UInt64, _ error: OpError) -> Outcome {
        answers[ClientSeq(clientId: clientId, seq: seq)] = .rejected(seq: seq, error)
        rejectedSinceTrim.append(ClientSeq(clientId: clientId, seq: seq))
        trimRejectionsIfNeeded()
        return .rejected(error)
    }

    private var rejectedSinceTrim: [ClientSeq] = []

    private mutating func apply(_ op: Operation, baseVersion: UInt64, clientId: String, seq: UInt64) throws(OpError) -> [AppliedOp] {
        if case .rekey = op { throw .invalidArgument("rekey is made by the server only") }
        // Rule 7: a key computed before a rekey is translated through each rekey since baseVersion.
        var op = op
        if let key = Self.submittedKey(of: op) {
            try Validation.checkKey(key)
            if baseVersion > 0 {
                if baseVersion < forgottenRekeysThrough, usesPlace(op) {
                    throw .invalidArgument(
                        "key \(key) was computed at version \(baseVersion), before a rekey this server no longer "
                            + "holds (it holds those after version \(forgottenRekeysThrough)): compute it again")
                }
                var translated = key
                for rekey in rekeys where rekey.version > baseVersion { translated = rekey.translate(translated) }
                op = Self.replacingKey(of: op, with: translated)
            }
        }
        var resolution = try workspace.resolve(op, limits: limits)
        var result: [AppliedOp] = []
        if Self.storedKeys(of: resolution.op).contains(where: { $0.utf8.count > PositionKey.maxStoredLength }) {
            // Rule 7: rekey first, then translate the op's own key through that rekey and place it again.
            let rekeyOp = workspace.makeRekey()
            guard case .rekey(let keys) = rekeyOp else { preconditionFailure() }
            let rekeyRecord = RekeyRecord(version: workspace.version + 1, before: workspace, rekey: keys)
            let rekeyResolution = try workspace.resolve(rekeyOp, limits: limits)
            result.append(record(rekeyResolution, clientId: "", seq: 0))
            rekeys.append(rekeyRecord)
            if let key = Self.submittedKey(of: op) { op = Self.replacingKey(of: op, with: rekeyRecord.translate(key)) }
            resolution = try workspace.resolve(op, limits: limits)
        }
        result.append(record(resolution, clientId: clientId, seq: seq))
        return result
    }

    /// Whether `op`'s place would decide where a tab goes: false only for an `open` that activates a
    /// tab that is there (its place is not used).
    private func usesPlace(_ op: Operation) -> Bool {
        guard case .open(let tab, _) = op,
            case .activate? = (try? workspace.resolve(.open(tab: tab, place: .end), limits: limits))?.op
        else { return true }
        return false
    }

    /// Commits a resolution and appends it to the log.
    private mutating func record(_ resolution: Workspace.Resolution, clientId: String, seq: UInt64) -> AppliedOp {
        workspace.commit(resolution.op, activeTabId: resolution.activeTabId)
        let applied = AppliedOp(
            version: workspace.version, op: resolution.op, clientId: clientId, seq: seq,
            activeTabId: resolution.activeTabId)
        log.append(applied)
        trimIfNeeded()
        return applied
    }

    /// Keeps the log (and what depends on it) within `logRetention`, trimming in chunks.
    private mutating func trimIfNeeded() {
        let retention = max(limits.logRetention, 1)
        guard log.count >= retention + max(retention / 4, 1) else { return }
        let drop = log.count - retention
        for applied in log.prefix(drop) where !applied.clientId.isEmpty {
            answers[ClientSeq(clientId: applied.clientId, seq: applied.seq)] = nil
        }
        log.removeFirst(drop)
        let oldest = log.first?.version ?? workspace.version
        if let newestDropped = rekeys.last(where: { $0.version < oldest }) {
            forgottenRekeysThrough = max(forgottenRekeysThrough, newestDropped.version)
        }
        rekeys.removeAll { $0.version < oldest }
    }

    /// Rejections are answered while the log window lasts: keeps the answers of the last
    /// `logRetention` of them, trimming in chunks whether or not ops are being applied.
    private mutating func trimRejectionsIfNeeded() {
        let retention = max(limits.logRetention, 1)
        guard rejectedSinceTrim.count >= retention + max(retention / 4, 1) else { return }
        let drop = rejectedSinceTrim.count - retention
        for k in rejectedSinceTrim.prefix(drop) { answers[k] = nil }
        rejectedSinceTrim.removeFirst(drop)
    }

    // MARK: - ops sequenced elsewhere

    /// Takes one op sequenced elsewhere: by another writer of a shared store, or by this server
    /// into a copy that follows only what is stored. It is applied as it was applied (no rules run
    /// again), logged, answered again on resubmission, its client's seq consumed, and a rekey is
    /// recorded for translation (rule 7). Throws when `applied.version` does not follow the
    /// workspace's version or the op does not fit the state (the caller's copy is then stale).
    public mutating func adopt(_ applied: AppliedOp) throws(OpError) {
        var rekey: RekeyRecord?
        if case .rekey(let keys) = applied.op { rekey = RekeyRecord(version: applied.version, before: workspace, rekey: keys) }
        try workspace.apply(applied: applied)
        if let rekey { rekeys.append(rekey) }
        log.append(applied)
        if !applied.clientId.isEmpty {
            answers[ClientSeq(clientId: applied.clientId, seq: applied.seq)] = .applied(applied)
            if applied.seq > lastSeq(of: applied.clientId) { lastSeqs[applied.clientId] = applied.seq }
        }
        trimIfNeeded()
    }

    /// Takes a refusal decided elsewhere (as an op is, above): its seq is consumed and
    /// answered again on resubmission. A refusal already known changes nothing.
    public mutating func adopt(_ rejection: Rejection) {
        let key = ClientSeq(clientId: rejection.clientId, seq: rejection.seq)
        if rejection.seq > lastSeq(of: rejection.clientId) { lastSeqs[rejection.clientId] = rejection.seq }
        guard answers[key] == nil else { return }
        answers[key] = .rejected(seq: rejection.seq, rejection.error)
        rejectedSinceTrim.append(key)
        trimRejectionsIfNeeded()
    }

    /// Takes a client's last consumed seq as stored elsewhere; never moves it backwards.
    public mutating func adopt(lastSeq seq: UInt64, of clientId: String) {
        if seq > lastSeq(of: clientId) { lastSeqs[clientId] = seq }
    }

    // MARK: - op keys

    /// The position key an op's place carries, if it is a non-empty key place.
    static func submittedKey(of op: Operation) -> String? {
        switch op {
        case .add(_, .key(let k), _), .open(_, .key(let k)), .move(_, .key(let k), _):
            k.isEmpty ? nil : k
        default:
            nil
        }
    }

    static func replacingKey(of op: Operation, with key: String) -> Operation {
        switch op {
        case .add(let tab, .key, let activate): .add(tab: tab, place: .key(key), activate: activate)
        case .open(let tab, .key): .open(tab: tab, place: .key(key))
        case .move(let id, .key, let group): .move(tabId: id, place: .key(key), group: group)
        default: op
        }
    }

    /// Keys a canonical op would store.
    static func storedKeys(of op: Operation) -> [String] {
        switch op {
        case .add(let tab, _, _): [tab.key]
        case .move(_, .key(let k), _): [k]
        case .replace(let tabs, _): tabs.map(\.key)
        case .group(let change): change.keys
        case .ungroup(let change): change.keys
        case .restore(_, let state?): state.tabs.map(\.key)
        default: []
        }
    }
}
