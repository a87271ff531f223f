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
public protocol WorkspaceStore: Sendable {
    /// The epoch given to workspaces this store creates. A store that loses its history (a wiped
    /// data directory) must come back with a different epoch, so clients never splice histories.
    var epoch: String { get }

    /// The stored state of a workspace, or nil when none exists (no op was ever consumed for it).
    func load(workspaceId: String) throws(StoreError) -> StoredWorkspace?

    /// Makes a batch durable, all or nothing.
    func commit(_ batch: CommitBatch) throws(StoreError)
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
    /// is still translated after a restart (DESIGN.md rule 7).
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

    public init(workspaceId: String, clientId: String, seq: UInt64, outcome: Outcome, rekeys: [RekeyRecord] = []) {
        self.workspaceId = workspaceId
        self.clientId = clientId
        self.seq = seq
        self.outcome = outcome
        self.rekeys = rekeys
    }

    /// The record of a submit's outcome as `sequencer` returned it (call right after `submit`):
    /// applied ops carry the ``RekeyRecord``s of the rekeys among them, taken from the sequencer.
    /// nil for outcomes that consume nothing (`answeredAgain`, `ignored`, seq 0).
    public init?(workspaceId: String, clientId: String, seq: UInt64, outcome: Sequencer.Outcome, after sequencer: Sequencer) {
        switch outcome {
        case .applied(let ops):
            let rekeyVersions = Set(ops.lazy.filter { if case .rekey = $0.op { true } else { false } }.map(\.version))
            let rekeys = rekeyVersions.isEmpty ? [] : sequencer.rekeys.filter { rekeyVersions.contains($0.version) }
            self.init(workspaceId: workspaceId, clientId: clientId, seq: seq, outcome: .applied(ops), rekeys: rekeys)
        case .rejected(let error) where seq > 0:
            self.init(workspaceId: workspaceId, clientId: clientId, seq: seq, outcome: .rejected(error))
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
    /// Ops kept per workspace log (DESIGN.md: default 10,000); older ones may be compacted away.
    public var logRetention: Int

    public init(records: [CommitRecord], workspaces: [String: Workspace], logRetention: Int) {
        self.records = records
        self.workspaces = workspaces
        self.logRetention = logRetention
    }
}

/// Why a store call failed. Every case reaches clients as `UNAVAILABLE`.
public enum StoreError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The store cannot write now (disk full, read-only, I/O error); reads may still work.
    case writeFailed(String)
    /// The store cannot read what it holds.
    case readFailed(String)

    /// The wire code ops refused for this reason carry.
    public var code: ErrorCode { .unavailable }

    public var description: String {
        switch self {
        case .writeFailed(let why): "store write failed: \(why)"
        case .readFailed(let why): "store read failed: \(why)"
        }
    }
}
