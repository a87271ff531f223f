import TabsyncCore
import TabsyncProto

/// Where a client's connection stands.
public enum ConnectionState: Sendable, Equatable, CustomStringConvertible {
    /// `start()` has not been called.
    case idle
    /// Attempt `attempt` is connecting (0 = the first, or a deliberate reconnect or resync).
    case connecting(attempt: Int)
    /// The WebSocket is open and the `Hello` sent; waiting for `Welcome`.
    case awaitingWelcome
    /// Welcomed: ops flow both ways.
    case ready
    /// The connection ended; attempt `attempt` starts after `delay`.
    case waiting(attempt: Int, delay: Duration)
    /// Closed for good (`close()`, the loop shut down, or the server refused the `Hello`).
    case closed

    public var description: String {
        switch self {
        case .idle: "idle"
        case .connecting(let attempt): attempt == 0 ? "connecting" : "connecting (attempt \(attempt))"
        case .awaitingWelcome: "awaiting welcome"
        case .ready: "ready"
        case .waiting(let attempt, let delay): "retrying in \(delay) (attempt \(attempt))"
        case .closed: "closed"
        }
    }
}

/// An op of this client the server refused.
public struct Rejection: Sendable, Equatable {
    public var seq: UInt64
    /// nil when the server sent a code this client does not know.
    public var code: ErrorCode?
    public var message: String
    /// The refused op, when it was still pending here.
    public var op: Operation?
    /// The seq the op was first submitted with (``Replica/PendingOp/firstSeq``): what
    /// ``TabsyncClient/submit(_:)`` returned for it, whatever seq a retry gave it since.
    public var firstSeq: UInt64

    public init(seq: UInt64, code: ErrorCode?, message: String, op: Operation?, firstSeq: UInt64? = nil) {
        self.seq = seq
        self.code = code
        self.message = message
        self.op = op
        self.firstSeq = firstSeq ?? seq
    }
}

/// Something that happened to a client, in the order it happened.
public enum ClientEvent: Sendable, Equatable {
    /// The connection state changed.
    case connection(ConnectionState)
    /// A connection ended (before the retry is scheduled).
    case disconnected(ConnectionEnding)
    /// A `Welcome` arrived: `recovered` when only missed ops came, else a snapshot.
    case welcomed(recovered: Bool)
    /// The optimistic workspace (what a UI shows) changed.
    case workspace(Workspace)
    /// The server applied an op (this client's own acknowledgements included).
    case applied(AppliedOp)
    /// The server refused one of this client's ops for good (the op left `pending`).
    case rejected(Rejection)
    /// The server refused an op for a reason that passes (`UNAVAILABLE`, `RATE_LIMITED`): it is
    /// held, still shown, and goes again as a new op after `after` (or at the next `Welcome`).
    case retrying(Rejection, after: Duration)
    /// The peer list changed (sorted by session id; past the server's `--max-presence-peers` it
    /// names that many sessions).
    case presence([Peer])
    /// The number of the workspace's sessions the peer list does not name changed.
    case othersCount(Int)
    /// The server sent an `Error` (it closes the connection after it).
    case serverError(code: ErrorCode?, message: String)
    /// The answer to a history query this client sent (`HistoryQuery`, matched by its id).
    case history(Tabsync_V1_HistoryAnswer)
    /// The stream broke (a version gap, an epoch change, an op that does not fit): the client
    /// reconnects and catches up.
    case resync(reason: String)
    /// The server's history was replaced (docs/design.md, "Durability"): a `Welcome` under another
    /// epoch, or under this one below a version already seen (a store brought back from a backup).
    /// The workspace is now the server's snapshot, taken whole: what vanished from it was not
    /// removed by any op, and no `.applied` is reported for the change.
    case historyReplaced(HistoryReplacement)
    /// The server no longer holds the answer to one of this client's seqs (`Rejected
    /// ANSWER_GONE`): not a refusal. The op left `pending`; whatever it did is in the state the
    /// client was welcomed with. `firstSeq` as in ``Rejection``.
    case answerGone(seq: UInt64, firstSeq: UInt64)
}

/// A history the client held, replaced by another (``ClientEvent/historyReplaced(_:)``).
public struct HistoryReplacement: Sendable, Equatable {
    public var previousEpoch: String
    public var previousVersion: UInt64
    public var epoch: String
    public var version: UInt64

    public init(previousEpoch: String, previousVersion: UInt64, epoch: String, version: UInt64) {
        self.previousEpoch = previousEpoch
        self.previousVersion = previousVersion
        self.epoch = epoch
        self.version = version
    }
}

/// Everything a client knows, as one value. `TabsyncClient.state` returns a copy.
public struct ClientState: Sendable, Equatable {
    public var connection: ConnectionState = .idle
    /// The server's state as this client last heard it.
    public var confirmed: Workspace
    /// `confirmed` plus this client's pending ops: what a UI shows.
    public var optimistic: Workspace
    /// Ops submitted and not yet answered, in seq order (ops submitted before the first
    /// `Welcome` have no seq yet and are counted in `unsequenced`).
    public var pending: [Replica.PendingOp] = []
    /// Ops refused for a reason that passes, waiting to be sent again (``Replica/held``).
    public var held: [Replica.PendingOp] = []
    public var unsequenced: Int = 0
    /// Transient refusals retried so far, and the last of them.
    public var retries: Int = 0
    public var lastTransientRefusal: Rejection?
    public var peers: [Peer] = []
    /// Sessions of the workspace that `peers` does not name (past the server's
    /// `--max-presence-peers`); `peers.count + othersCount` sessions are connected.
    public var othersCount: Int = 0
    /// The session id of the current (or last) welcome.
    public var sessionId: String = ""
    /// The limits the server announced.
    public var limits: Limits?
    /// `Welcome`s received so far (1 after the first connection, +1 per reconnect).
    public var welcomes: Int = 0
    /// Resyncs started so far.
    public var resyncs: Int = 0
    /// Histories replaced so far (``ClientEvent/historyReplaced(_:)``), and the last one.
    public var historyReplacements: Int = 0
    public var lastHistoryReplacement: HistoryReplacement?
    /// Every permanent refusal of this client's ops, oldest first (the last 100).
    public var rejections: [Rejection] = []
    /// How the last connection ended.
    public var lastEnding: ConnectionEnding?
    /// Why the client closed for good, when the server refused it.
    public var refusal: ClientError?
    /// The last `Error` the server sent (`.refused(code, message)`), e.g. the quota that refused a
    /// connection it then closed 4429.
    public var lastServerError: ClientError?

    /// Whether the op first submitted with `firstSeq` still waits for its answer (pending, held,
    /// or retried under a new seq).
    public func isWaiting(firstSeq: UInt64) -> Bool {
        pending.contains { $0.firstSeq == firstSeq } || held.contains { $0.firstSeq == firstSeq }
    }

    public init(workspace: Workspace) {
        confirmed = workspace
        optimistic = workspace
    }

    /// True when welcomed and nothing is pending or held: `optimistic == confirmed`.
    public var isSettled: Bool {
        connection == .ready && pending.isEmpty && held.isEmpty && unsequenced == 0
    }
}
