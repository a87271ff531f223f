import TabsyncCore
import TabsyncProto
import TabsyncStore

/// A connection's id: unique for the life of the server process, never 0 (the driver keeps it in
/// lws' per-session memory, which lws zeroes).
package typealias ConnectionID = Int
/// An HTTP request's id, from the same counter as connection ids.
package typealias RequestID = Int

extension ServerCore {
    /// The clock the core reads: a monotonic instant the driver passes with every event.
    package typealias Instant = ContinuousClock.Instant

    /// Everything that can happen to a server: what the driver saw on a socket, what the store,
    /// the token verifier or another node answered, and time passing. Each is handled whole
    /// before the next (``ServerCore/handle(_:now:into:)``).
    package enum Event: Sendable {
        /// A WebSocket session opened (`ESTABLISHED`) on a subprotocol; `echo`: the diagnostics
        /// echo subprotocol; `workspace`: the workspace its upgrade path named
        /// (`/v1/workspaces/{id}/ws`, ``UpgradePath``), nil for `/`.
        case connected(ConnectionID, format: WireFormat, echo: Bool, workspace: String? = nil)
        /// One whole client message (all its fragments).
        case frame(ConnectionID, [UInt8], binary: Bool)
        /// A pong came (an answer to ``Action/ping(_:)``, or unasked): the session is alive. It
        /// moves no deadline, so the core handles it without naming its next one again.
        case pong(ConnectionID)
        /// The message being received went over `maxFrameBytes`.
        case frameTooBig(ConnectionID)
        /// The connection is gone (`CLOSED`): nothing more is sent to it.
        case disconnected(ConnectionID)
        /// The session's send queue would pass `maxSendQueueBytes`: it cannot keep up.
        case backlogExceeded(ConnectionID)
        /// The instant ``ServerCore/nextDeadline`` named has come (or passed): everything then
        /// due runs (a Hello timeout, a token's expiry, a lingering batch, presence, idle unloads,
        /// polls, retries, the holder registry's heartbeat and checks, the stop's deadlines). Sent
        /// early or twice, it does nothing more (ServerCore+Deadlines.swift).
        case timeout
        /// A store read of a workspace finished (``Action/load(_:)``).
        case loaded(workspaceId: String, Result<StoredWorkspace?, StoreError>)
        /// A group commit finished (``Action/commit(_:_:)``), after `duration` on the store.
        case committed(batch: UInt64, CommitResult, duration: Duration)
        /// A catch-up read finished (``Action/readChanges(_:)``).
        case caughtUp([String: CatchUpRead], duration: Duration)
        /// A poll of stored versions finished (``Action/pollVersions(_:)``).
        case polled(Result<[String: UInt64], StoreError>, duration: Duration)
        /// The feed of other nodes' commits told something (a shared store only).
        case heard(CommitFeedEvent)
        /// The answer to ``Action/hold(_:)``: how many other live nodes hold the workspace too (more
        /// than 0: it is split across nodes; counted, correct, only dearer), or why the registration
        /// failed (the read it comes before fails with it).
        case held(workspaceId: String, Result<Int, StoreError>)
        /// The answer to ``Action/heartbeat``: nil when the beat was stored.
        case heartbeatFinished(StoreError?)
        /// The answer to ``Action/checkHolders(_:)``: whether a live node registered as a holder of
        /// the workspace after this one did.
        case holdersChecked(workspaceId: String, newerHolder: Bool)
        /// A token check finished (``Action/verifyToken(_:_:)``).
        case tokenVerified(AuthRequest, Result<AccessGrant, AuthError>)
        /// `GET /v1/workspaces/{id}`: the id as it came in the path, and the bearer token if any.
        case snapshotRequested(RequestID, workspaceId: String, bearerToken: String?)
        /// `GET /v1/workspaces/{id}/history`, `/closed`, or the snapshot with `?version=` or
        /// `?at=`: the id as it came in the path, which, its query string, and the bearer token if any.
        case historyRequested(RequestID, workspaceId: String, resource: HistoryResource, query: String, bearerToken: String?)
        /// A history read finished (``Action/readHistory(_:)``).
        case historyRead(HistoryCall, Result<HistoryResult, HistoryFailure>)
        /// A call of the admin API (``AdminRequest``) and the bearer token if any.
        case adminRequested(RequestID, AdminRequest, bearerToken: String?)
        /// The store answered an admin call (``Action/admin(_:)``).
        case adminAnswered(AdminCall, Result<AdminAnswer, StoreError>)
        /// `GET /v1/workspaces/{id}/events` (ServerCore+Feed.swift): the id of the path, the version
        /// to resume after (`Last-Event-ID`, else `?after=`; nil: none) and the bearer token if any.
        case feedRequested(RequestID, workspaceId: String, after: UInt64?, bearerToken: String?)
        /// A feed's reader does not keep up: its queue would pass `maxSendQueueBytes`.
        case feedBacklogExceeded(RequestID)
        /// `POST /v1/workspaces/{id}/ops` (ServerCore+Write.swift): its `Idempotency-Key` (nil when
        /// absent) and its whole body.
        case writeRequested(RequestID, workspaceId: String, key: String?, body: [UInt8], bearerToken: String?)
        /// The HTTP request (or feed) went away before it was answered (or ended).
        case requestGone(RequestID)
        /// Stop gracefully: drain commits, close every session 1001, then stop.
        case shutdown
    }

    /// What the core asks the driver to do. Carried out in order, after ``ServerCore/handle(_:now:into:)``
    /// returns; whatever an action causes comes back as a later event.
    package enum Action: Sendable {
        /// Encode `message` in the session's subprotocol and queue it to the session.
        case send(ConnectionID, Tabsync_V1_ServerMessage)
        /// Queue `message` to each session, encoded once per subprotocol.
        case broadcast([ConnectionID], Tabsync_V1_ServerMessage)
        /// Send the session a WebSocket ping (the core's keepalive, ServerCore+Keepalive.swift); its
        /// pong comes back as ``Event/pong(_:)``.
        case ping(ConnectionID)
        /// Queue these bytes back to a diagnostics echo session as one frame.
        case echo(ConnectionID, [UInt8], binary: Bool)
        /// Close the session (its queue first when the reason says so). Nothing more is sent to
        /// it; `grace`: how long the peer has to read up to the close frame.
        case close(ConnectionID, CloseReason, grace: Duration)
        /// Register as a holder of the workspace in the holder registry (a shared store with one,
        /// ``Settings/holderRegistry``), before it is read; answer ``Event/held(workspaceId:_:)``.
        /// The read (``load(_:)``) follows once it is answered.
        case hold(String)
        /// Read the workspace from the store; answer ``Event/loaded(workspaceId:_:)``.
        case load(String)
        /// Store one group commit; answer ``Event/committed(batch:_:duration:)``. When the store
        /// refuses it `behind`, read what each behind workspace missed in the same store turn.
        case commit(UInt64, CommitBatch)
        /// Read what each workspace missed after its version; answer ``Event/caughtUp(_:duration:)``.
        case readChanges([String: UInt64])
        /// This node no longer holds the workspace (unloaded): release it in the holder registry.
        /// Nothing answers.
        case release(String)
        /// Ask the holder registry whether a node registered as holding the workspace after this one
        /// (the core already waited its random pause, ``Settings/holderCheckPause``); answer
        /// ``Event/holdersChecked(workspaceId:newerHolder:)`` (a failed check answers false).
        case checkHolders(String)
        /// Beat in the holder registry: this node is alive (every ``HolderRegistrySettings/heartbeatInterval``
        /// while it runs); answer ``Event/heartbeatFinished(_:)``.
        case heartbeat
        /// Read the stored versions of these workspaces; answer ``Event/polled(_:duration:)``.
        case pollVersions([String])
        /// Check a token off the loop; answer ``Event/tokenVerified(_:_:)``.
        case verifyToken(AuthRequest, String)
        /// Carry out an admin call on the store (``AdminStore``); answered by ``Event/adminAnswered(_:_:)``.
        case admin(AdminCall)
        /// Read history from the store (``HistoryReader``); answered by ``Event/historyRead(_:_:)``.
        case readHistory(HistoryCall)
        /// Answer an HTTP request.
        case respond(RequestID, HTTPResponse)
        /// Start the feed's answer: 200, `text/event-stream`, no length, no cache; it stays open.
        case feedOpen(RequestID)
        /// Queue these bytes (whole events or a comment) to the open feed.
        case feedWrite(RequestID, [UInt8])
        /// End the feed: its queue first, then close the connection.
        case feedClose(RequestID)
        /// The stop is over: leave the event loop.
        case stop
    }

    /// Which history an HTTP request reads.
    package enum HistoryResource: Sendable, Equatable {
        /// `/history`: ops, newest first.
        case ops
        /// `/closed`: recently closed tabs.
        case closed
        /// The snapshot path with `?version=` or `?at=`: a past state.
        case state
    }

    /// Who waits for a token check: a session's Hello, or an HTTP request.
    package enum AuthRequest: Sendable, Equatable {
        case session(ConnectionID)
        case http(RequestID)
        case admin(RequestID)
    }

    /// How a group commit ended.
    package enum CommitResult: Sendable {
        /// Durable: acknowledge it.
        case stored
        /// Nothing stored (or, for `outcomeUnknown`, maybe stored): refuse and read back.
        case failed(StoreError)
        /// Nothing stored: other nodes committed to these workspaces first; what each missed, as
        /// read right after in the same store turn.
        case behind([String: CatchUpRead])
    }
}

/// An HTTP answer, written whole.
package struct HTTPResponse: Sendable, Equatable {
    package var status: UInt32
    package var contentType: String
    package var body: [UInt8]
    /// Extra header lines, each "Name: value\r\n".
    package var headers: String = ""

    package init(status: UInt32, contentType: String = "text/plain; charset=utf-8", body: String) {
        self.status = status
        self.contentType = contentType
        self.body = Array(body.utf8)
    }

    package init(status: UInt32, contentType: String, bytes: [UInt8]) {
        self.status = status
        self.contentType = contentType
        self.body = bytes
    }

    package static let notFound = HTTPResponse(status: 404, body: "not found\n")
    /// `/healthz` of a running server.
    package static let healthy = HTTPResponse(status: 200, body: "ok\n")
    /// `/healthz` once a graceful stop began.
    package static let draining = HTTPResponse(status: 503, body: "draining\n")
    /// No valid token for this workspace (missing, invalid, expired or for another workspace).
    package static let unauthorized = HTTPResponse(status: 401, body: "unauthorized\n")
    package static let storeUnavailable = HTTPResponse(status: 503, body: "store unavailable\n")
}
