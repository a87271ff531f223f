import TabsyncCore
import TabsyncProto

/// One WebSocket session's protocol state, without its socket: the phase it is in, the messages
/// it sent before its `Welcome`, its op rate and its token. Owned by ``ServerCore``.
///
/// Guarantees:
/// - ``route(_:)`` is the one place a client message is matched against the phase: a Hello is
///   taken once and first; anything else before it, a second Hello or an empty message is a
///   protocol violation; messages that come while the token is checked or the workspace loads
///   wait (at most ``maxDeferredMessages``) and are handled, in order, right after the `Welcome`.
/// - Once ``closing`` is set, nothing the session sends is routed, and nothing more goes to it but
///   the answers its close waits for (``ServerCore/close(_:_:grace:)``).
/// - A session opened on `/v1/workspaces/{id}/ws` (``pathWorkspace``) joins no other workspace:
///   ``ServerCore`` refuses a `Hello` naming another one before its token or workspace is looked at.
/// - ``takeToken(rate:now:)`` admits at most `rate` ops per second after a burst of `rate`.
struct SessionMachine {
    /// Most messages a session may send while its workspace loads; more is a protocol error.
    static var maxDeferredMessages: Int { 1_000 }

    let id: ConnectionID
    let format: WireFormat
    /// A diagnostics echo session: it never says Hello nor joins a workspace.
    let echo: Bool
    /// The workspace the upgrade path named (`/v1/workspaces/{id}/ws`), nil for `/`: its `Hello`
    /// must name the same one (docs/design.md, "The protocol in brief").
    let pathWorkspace: String?
    let openedAt: ServerCore.Instant
    var phase: Phase = .awaitingHello
    /// Messages that arrived before the `Welcome`, handled after it; and Submits that came while
    /// a restore or reopen waited for its history read (``historyHold``), handled after it.
    var deferred: [Tabsync_V1_ClientMessage] = []
    /// A restore or reopen of this session waits for its history read: later Submits wait too, so
    /// seqs are consumed in order (ServerCore+History.swift).
    var historyHold = false
    /// Set once the core closed the session.
    var closing: CloseReason?
    /// The op token bucket: `tokens` refill at `maxOpsPerSecond`, up to that many.
    var tokens: Double
    var tokensAt: ServerCore.Instant
    /// Consecutive seconds in which an op was refused `RATE_LIMITED`, and the last such second.
    var rateStrikes = 0
    var lastStrikeSecond: Int64 = -1
    /// What the session's token grants (nil without access control).
    var access: AccessGrant?
    /// The sub this session counts against (``ServerCore/Quotas``), once admitted.
    var quotaSubject: String?
    /// The workspace this session counts against, once admitted.
    var quotaWorkspace: String?
    /// When the session was last heard from (opened, a frame, a pong): its silence counts from
    /// here (ServerCore+Keepalive.swift).
    var lastHeard: ServerCore.Instant
    /// How long a silence lasts before the session is pinged (``ServerCore/pingAfter(_:seed:id:)``).
    var pingAfter: Duration = .zero
    /// Pinged in the current silence: its keepalive deadline is the hangup.
    var pinged = false

    enum Phase: Equatable {
        case awaitingHello
        /// Hello well-formed; its token is being checked. The workspace knows nothing of it.
        case authenticating(Hello)
        /// Hello accepted; waiting for the workspace to load, or for the `Welcome` to be durable.
        case loading(Hello)
        case joined(Hello)
    }

    /// What a session said in its `Hello`, checked.
    struct Hello: Equatable {
        var workspaceId: String
        var clientId: String
        var clientName: String
        var lastVersion: UInt64
        var epoch: String
        var focusTabId = ""
        /// The full peer list once, then only changes (`Hello.presenceDeltas`).
        var presenceDeltas = false
    }

    init(
        id: ConnectionID, format: WireFormat, echo: Bool, opsPerSecond: Int, now: ServerCore.Instant,
        pathWorkspace: String? = nil
    ) {
        self.id = id
        self.format = format
        self.echo = echo
        self.pathWorkspace = pathWorkspace
        openedAt = now
        tokens = Double(opsPerSecond)
        tokensAt = now
        lastHeard = now
    }

    var hello: Hello? {
        switch phase {
        case .awaitingHello, .authenticating: nil
        case .loading(let hello), .joined(let hello): hello
        }
    }

    var workspaceId: String? { hello?.workspaceId }

    /// What a client message asks of the core, given the phase.
    enum Route: Equatable {
        /// A protocol violation: `Error{code}`, then close 4400.
        case violation(ErrorCode, String)
        case hello(Tabsync_V1_Hello)
        /// Kept for after the `Welcome` (already appended to ``deferred``).
        case deferred
        case submit(Tabsync_V1_Submit, Hello)
        /// The session now views this tab (already recorded in the phase's Hello).
        case refocused(String)
        /// Nothing to do (a repeated focus, an invalid focus id, a closing session).
        case nothing
        /// A history read over the session.
        case history(Tabsync_V1_HistoryQuery, Hello)
    }

    /// Matches a message against the phase (see the type's guarantees).
    mutating func route(_ message: Tabsync_V1_ClientMessage) -> Route {
        guard closing == nil else { return .nothing }
        switch (message.message, phase) {
        case (nil, _):
            return .violation(.protocolError, "a ClientMessage with none of its fields set")
        case (.hello(let hello), .awaitingHello):
            return .hello(hello)
        case (.hello, _):
            return .violation(.protocolError, "a second Hello")
        case (_, .awaitingHello):
            return .violation(.protocolError, "a message before Hello")
        case (_, .loading), (_, .authenticating):
            guard deferred.count < Self.maxDeferredMessages else {
                return .violation(.protocolError, "too many messages before Welcome")
            }
            deferred.append(message)
            return .deferred
        case (.submit, .joined) where historyHold:
            guard deferred.count < Self.maxDeferredMessages else {
                return .violation(.protocolError, "too many messages while a restore or reopen was read")
            }
            deferred.append(message)
            return .deferred
        case (.submit(let submit), .joined(let hello)):
            return .submit(submit, hello)
        case (.history(let query), .joined(let hello)):
            return .history(query, hello)
        case (.focus(let focus), .joined(var hello)):
            guard focus.tabID.isEmpty || Validation.isValidTabId(focus.tabID), focus.tabID != hello.focusTabId else {
                return .nothing
            }
            hello.focusTabId = focus.tabID
            phase = .joined(hello)
            return .refocused(focus.tabID)
        }
    }

    /// Takes one op token; false when the bucket is empty (refilled at `rate` per second).
    mutating func takeToken(rate: Int, now: ServerCore.Instant) -> Bool {
        let elapsed = Double((now - tokensAt).microseconds) / 1_000_000
        tokens = min(Double(rate), tokens + elapsed * Double(rate))
        tokensAt = now
        guard tokens >= 1 else { return false }
        tokens -= 1
        return true
    }

    /// Counts a second with a rate-limited op; true once `limit` such seconds ran in a row (the
    /// session is then closed 1008).
    mutating func strike(now: ServerCore.Instant, limit: Int) -> Bool {
        let second = (now - openedAt).components.seconds
        if second == lastStrikeSecond { return false }
        rateStrikes = second == lastStrikeSecond + 1 ? rateStrikes + 1 : 1
        lastStrikeSecond = second
        return rateStrikes >= limit
    }

    /// What is wrong with a Hello, or nil.
    static func helloProblem(_ hello: Tabsync_V1_Hello) -> String? {
        if !Validation.isValidWorkspaceId(hello.workspace) {
            return "hello.workspace must be 1-64 chars of [A-Za-z0-9._-]"
        }
        if !Validation.isValidClientId(hello.clientID) {
            return "hello.clientId must be 1-64 chars of [A-Za-z0-9._:-]"
        }
        if hello.clientName.unicodeScalars.count > Validation.maxClientNameLength {
            return "hello.clientName is over \(Validation.maxClientNameLength) chars"
        }
        if !Validation.isCleanText(hello.clientName) {
            return "hello.clientName has control characters"
        }
        if hello.epoch.utf8.count > 256 || !Validation.isCleanText(hello.epoch) {
            return "hello.epoch is not an epoch this server gives"
        }
        return nil
    }
}

extension Duration {
    /// The duration in whole microseconds.
    package var microseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1_000_000 + attoseconds / 1_000_000_000_000
    }
}
