import TabsyncCore

/// Durable storage for workspaces behind one small protocol, so the embedded SQLite store and a
/// shared engine later are drop-ins for each other.
///
/// Threading: the server calls a store from one store thread only, never from its event loop, and
/// never two calls at once. A call may block (disk I/O, fsync). Implementations must still be
/// `Sendable` because that thread is not the one that created them.
///
/// Group commit: the server collects everything that happened while the previous commit ran into
/// one ``CommitBatch`` and commits it whole; it acknowledges (sends `Applied` or `Rejected`) only
/// what a successful ``commit(_:)`` returned for. A batch is all or nothing: when `commit` throws,
/// none of it may be visible to a later ``load(workspaceId:)``.
///
/// Several writers (server nodes sharing one PostgreSQL database, or two store instances on one
/// SQLite file): a batch states, per workspace, the stored version it builds on
/// (``CommitBatch/baseVersions``). When another writer committed to one of those workspaces since,
/// `commit` throws ``StoreError/behind(storedVersions:)`` and stores nothing of the batch; the
/// writer reads what it missed (``ops(workspaceId:after:limit:)``, ``dedupState(workspaceId:)``),
/// applies it, re-sequences its unacknowledged ops against the new state and commits again. A
/// workspace without a base version is not checked (a single writer never sees `behind`).
public protocol WorkspaceStore: Sendable {
    /// The epoch given to workspaces this store creates. A store that loses its history (a wiped
    /// data directory) must come back with a different epoch, so clients never splice histories.
    var epoch: String { get }

    /// The stored state of a workspace, or nil when none exists (no op was ever consumed for it).
    func load(workspaceId: String) throws(StoreError) -> StoredWorkspace?

    /// Makes a batch durable, all or nothing; throws ``StoreError/behind(storedVersions:)`` when a
    /// workspace's stored version is not the batch's base version for it.
    func commit(_ batch: CommitBatch) throws(StoreError)

    /// The stored applied ops of a workspace after `version`, oldest first, at most `limit`, with
    /// their clientId and seq (for a writer catching up on another's commits). Empty when none
    /// follows `version`; nil when the log no longer holds the op right after `version` (compacted
    /// behind a snapshot: reload the workspace with ``load(workspaceId:)``).
    func ops(workspaceId: String, after version: UInt64, limit: Int) throws(StoreError) -> [AppliedOp]?

    /// What dedup needs beyond the log, as stored now: the last consumed seq per client, the
    /// refusals still answered again and the rekeys still translated (nil: the workspace was never
    /// stored). Together with ``ops(workspaceId:after:limit:)`` it brings a loaded ``Sequencer`` up
    /// to date after another writer's commits.
    func dedupState(workspaceId: String) throws(StoreError) -> DedupState?

    /// The stored version of each of these workspaces (absent: never stored): how a writer polls
    /// for another's commits without reading them.
    func storedVersions(workspaceIds: [String]) throws(StoreError) -> [String: UInt64]

    /// What a writer holding each workspace at a version (`versions`) missed of them, all read at
    /// once (a node catching up on other nodes' commits asks for every workspace it heard of in
    /// one call). See ``StoredChanges``.
    func changes(after versions: [String: UInt64]) throws(StoreError) -> [String: StoredChanges]
}

/// What a writer at version V missed of one workspace (``WorkspaceStore/changes(after:)``).
public enum StoredChanges: Sendable, Equatable {
    /// The ops stored after V, in order (empty: nothing new), and the dedup state at their end
    /// (nil: the workspace was never stored, and V is 0). The dedup state holds at least every
    /// refusal made since V; its `lastSeqs` holds at least the last seq of every client whose
    /// last consumed seq is neither one of these ops nor one of these refusals (a store that reads
    /// only what changed leaves it empty). Adopting the ops, the refusals and the last seqs brings a
    /// sequencer at V to the stored state.
    case changes(ops: [AppliedOp], dedup: DedupState?)
    /// The log no longer holds the op right after V (compacted behind a snapshot), or the store is
    /// behind V: the workspace must be read whole.
    case compacted
}

extension WorkspaceStore {
    /// Default: read through ``load(workspaceId:)`` (a store may answer from an index instead).
    public func ops(workspaceId: String, after version: UInt64, limit: Int) throws(StoreError) -> [AppliedOp]? {
        guard let stored = try load(workspaceId: workspaceId) else { return [] }
        let after = stored.log.filter { $0.version > version }
        if let first = after.first, first.version != version + 1 { return nil }
        return Array(after.prefix(max(limit, 0)))
    }

    /// Default: one ``dedupState(workspaceId:)`` per workspace (a store may answer in one query).
    public func storedVersions(workspaceIds: [String]) throws(StoreError) -> [String: UInt64] {
        var versions: [String: UInt64] = [:]
        for id in workspaceIds {
            if let state = try dedupState(workspaceId: id) { versions[id] = state.version }
        }
        return versions
    }

    /// Default: per workspace, its dedup state (at stored version D), then its ops from V to D (a
    /// stored op never changes, so the two agree).
    public func changes(after versions: [String: UInt64]) throws(StoreError) -> [String: StoredChanges] {
        var result: [String: StoredChanges] = [:]
        for (id, version) in versions {
            guard let dedup = try dedupState(workspaceId: id) else {
                result[id] = version == 0 ? .changes(ops: [], dedup: nil) : .compacted
                continue
            }
            if dedup.version < version {
                result[id] = .compacted
            } else if dedup.version == version {
                result[id] = .changes(ops: [], dedup: dedup)
            } else {
                let missing = dedup.version - version
                guard let ops = try self.ops(workspaceId: id, after: version, limit: Int(clamping: missing)) else {
                    result[id] = .compacted
                    continue
                }
                guard UInt64(ops.count) == missing, ops.last?.version == dedup.version else {
                    throw .readFailed("the log of \(id) holds \(ops.count) ops after \(version), not \(missing)")
                }
                result[id] = .changes(ops: ops, dedup: dedup)
            }
        }
        return result
    }

    /// Default: read through ``load(workspaceId:)``.
    public func dedupState(workspaceId: String) throws(StoreError) -> DedupState? {
        try load(workspaceId: workspaceId).map {
            DedupState(version: $0.workspace.version, lastSeqs: $0.lastSeqs, rejections: $0.rejections, rekeys: $0.rekeys)
        }
    }
}

/// A workspace's dedup state as stored (see ``WorkspaceStore/dedupState(workspaceId:)``).
public struct DedupState: Sendable, Equatable {
    /// The stored version this state belongs to.
    public var version: UInt64
    /// The last consumed seq per clientId (refused ops included).
    public var lastSeqs: [String: UInt64]
    /// The most recent refusals, oldest first.
    public var rejections: [Sequencer.Rejection]
    /// The rekeys whose version is within the stored log (ascending).
    public var rekeys: [RekeyRecord]

    public init(version: UInt64, lastSeqs: [String: UInt64], rejections: [Sequencer.Rejection], rekeys: [RekeyRecord]) {
        self.version = version
        self.lastSeqs = lastSeqs
        self.rejections = rejections
        self.rekeys = rekeys
    }
}

/// A workspace as stored: the snapshot, the dedup table, the recent op log, the refusals still
/// answered again and the rekeys still translated: everything ``Sequencer`` needs to go on exactly
/// as before a restart.
public struct StoredWorkspace: Sendable, Equatable {
    /// The workspace at its last committed version.
    public var workspace: Workspace
    /// The last consumed seq per clientId (refused ops included).
    public var lastSeqs: [String: UInt64]
    /// The most recent applied ops, oldest first, contiguous, ending at `workspace.version`
    /// (at least the retention the store keeps when that many exist; a store may keep more).
    public var log: [AppliedOp]
    /// The most recent refusals, oldest first (at least the last `logRetention` of them when that
    /// many were committed), so a resubmitted refused seq is refused again after a restart.
    public var rejections: [Sequencer.Rejection]
    /// The rekeys whose version is within `log` (ascending), so a key computed before one of them
    /// is still translated after a restart (docs/design.md rule 7).
    public var rekeys: [RekeyRecord]

    public init(
        workspace: Workspace, lastSeqs: [String: UInt64] = [:], log: [AppliedOp] = [],
        rejections: [Sequencer.Rejection] = [], rekeys: [RekeyRecord] = []
    ) {
        self.workspace = workspace
        self.lastSeqs = lastSeqs
        self.log = log
        self.rejections = rejections
        self.rekeys = rekeys
    }
}

/// One consumed seq: what a client's Submit became.
public struct CommitRecord: Sendable, Equatable {
    public var workspaceId: String
    public var clientId: String
    public var seq: UInt64
    public var outcome: Outcome
    /// What each server-made rekey among the applied ops did (old and new keys), oldest first: a
    /// store keeps them while their version is in its log. Empty for a refusal.
    public var rekeys: [RekeyRecord]

    public enum Outcome: Sendable, Equatable {
        /// The op was applied; in order, a server-made rekey may come before it.
        case applied([AppliedOp])
        /// The op was refused; the seq is consumed all the same.
        case rejected(OpError)
    }

    /// Who made the op (docs/design.md, "History"): the token's `sub` with access control, else
    /// the name the client gave in its Hello; "" for server-made records.
    public var author: String

    public init(
        workspaceId: String, clientId: String, seq: UInt64, outcome: Outcome, rekeys: [RekeyRecord] = [], author: String = ""
    ) {
        self.workspaceId = workspaceId
        self.clientId = clientId
        self.seq = seq
        self.outcome = outcome
        self.rekeys = rekeys
        self.author = author
    }

    /// The record of a submit's outcome as `sequencer` returned it (call right after `submit`):
    /// applied ops carry the ``RekeyRecord``s of the rekeys among them, taken from the sequencer.
    /// nil for outcomes that consume nothing (`answeredAgain`, `ignored`, seq 0).
    public init?(
        workspaceId: String, clientId: String, seq: UInt64, outcome: Sequencer.Outcome, after sequencer: Sequencer,
        author: String = ""
    ) {
        switch outcome {
        case .applied(let ops):
            let rekeyVersions = Set(ops.lazy.filter { if case .rekey = $0.op { true } else { false } }.map(\.version))
            let rekeys = rekeyVersions.isEmpty ? [] : sequencer.rekeys.filter { rekeyVersions.contains($0.version) }
            self.init(workspaceId: workspaceId, clientId: clientId, seq: seq, outcome: .applied(ops), rekeys: rekeys, author: author)
        case .rejected(let error) where seq > 0:
            self.init(workspaceId: workspaceId, clientId: clientId, seq: seq, outcome: .rejected(error), author: author)
        case .rejected, .answeredAgain, .ignored:
            return nil
        }
    }
}

/// What one group commit makes durable.
public struct CommitBatch: Sendable, Equatable {
    /// The consumed seqs in server order.
    public var records: [CommitRecord]
    /// Each touched workspace as it is after the batch (what a snapshot of it stores).
    public var workspaces: [String: Workspace]
    /// Ops kept per workspace log (docs/design.md, 'Durability': default 10,000); older ones may be
    /// compacted away.
    public var logRetention: Int

    /// Per workspace, the stored version this batch builds on: the store refuses the whole batch
    /// with ``StoreError/behind(storedVersions:)`` when another writer moved one on. A workspace not
    /// listed is not checked (the default: a single writer).
    public var baseVersions: [String: UInt64] = [:]

    public init(records: [CommitRecord], workspaces: [String: Workspace], logRetention: Int) {
        self.records = records
        self.workspaces = workspaces
        self.logRetention = logRetention
    }

    public init(
        records: [CommitRecord], workspaces: [String: Workspace], logRetention: Int, baseVersions: [String: UInt64]
    ) {
        self.init(records: records, workspaces: workspaces, logRetention: logRetention)
        self.baseVersions = baseVersions
    }

    /// Per checked workspace (one with a base version), the lowest seq each client consumes in
    /// this batch.
    ///
    /// The seq fence: a writer consumes a client's seq only above the last one it knows consumed,
    /// so when the store already holds that client's seq at or above the batch's lowest, another
    /// writer decided it (a refusal, which leaves the version where it was, included): the batch is
    /// `behind` though every version matches (docs/design.md, 'Several nodes').
    var firstSeqs: [String: [String: UInt64]] {
        var first: [String: [String: UInt64]] = [:]
        for record in records where record.seq > 0 && baseVersions[record.workspaceId] != nil {
            let known = first[record.workspaceId]?[record.clientId] ?? .max
            first[record.workspaceId, default: [:]][record.clientId] = min(known, record.seq)
        }
        return first
    }

    /// The workspaces whose stored version differs from their base version, or where another
    /// writer consumed a seq this batch consumes (``firstSeqs``), with the stored version.
    func staleWorkspaces(
        stored: (String) throws(StoreError) -> UInt64, lastSeq: (String, String) throws(StoreError) -> UInt64
    ) throws(StoreError) -> [String: UInt64] {
        var stale: [String: UInt64] = [:]
        for (id, base) in baseVersions {
            let version = try stored(id)
            if version != base { stale[id] = version }
        }
        for (id, clients) in firstSeqs where stale[id] == nil {
            for (client, seq) in clients where try lastSeq(id, client) >= seq {
                stale[id] = try stored(id)
                break
            }
        }
        return stale
    }
}

/// Why a store call failed. Every case reaches clients as `UNAVAILABLE`.
public enum StoreError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The store cannot write now (disk full, read-only, I/O error); reads may still work.
    case writeFailed(String)
    /// The store cannot read what it holds.
    case readFailed(String)
    /// Another writer committed to these workspaces since the batch's base versions (given here
    /// with the versions now stored): nothing of the batch was stored. Catch up and retry.
    case behind(storedVersions: [String: UInt64])
    /// The batch's `COMMIT` was sent but its answer was lost (the connection broke), and the store
    /// could not find out afterwards whether it took effect: the batch may or may not be stored.
    /// Its submitters must not be told "refused" (it may be in the log) nor "applied": they resume
    /// and learn it from `Welcome.lastSeq` and the missed ops.
    case outcomeUnknown(String)

    /// The wire code ops refused for this reason carry.
    public var code: ErrorCode { .unavailable }

    public var description: String {
        switch self {
        case .writeFailed(let why): "store write failed: \(why)"
        case .readFailed(let why): "store read failed: \(why)"
        case .outcomeUnknown(let why): "store commit outcome unknown: \(why)"
        case .behind(let versions):
            "another writer committed first: "
                + versions.sorted { $0.key < $1.key }.map { "\($0.key) is at version \($0.value)" }.joined(separator: ", ")
        }
    }
}
