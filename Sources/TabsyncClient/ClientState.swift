import TabsyncCore

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

    public init(seq: UInt64, code: ErrorCode?, message: String, op: Operation?) {
        self.seq = seq
        self.code = code
        self.message = message
        self.op = op
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
    /// The server refused one of this client's ops.
    case rejected(Rejection)
    /// The peer list changed (sorted by session id; past the server's `--max-presence-peers` it
    /// names that many sessions).
    case presence([Peer])
    /// The number of the workspace's sessions the peer list does not name changed.
    case othersCount(Int)
    /// The server sent an `Error` (it closes the connection after it).
    case serverError(code: ErrorCode?, message: String)
    /// The stream broke (a version gap, an epoch change, an op that does not fit): the client
    /// reconnects and catches up.
    case resync(reason: String)
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
    public var unsequenced: Int = 0
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
    /// Every refusal of this client's ops, oldest first (the last 100).
    public var rejections: [Rejection] = []
    /// How the last connection ended.
    public var lastEnding: ConnectionEnding?
    /// Why the client closed for good, when the server refused it.
    public var refusal: ClientError?

    public init(workspace: Workspace) {
        confirmed = workspace
        optimistic = workspace
    }

    /// True when welcomed and nothing is pending: `optimistic == confirmed`.
    public var isSettled: Bool {
        connection == .ready && pending.isEmpty && unsequenced == 0
    }
}
