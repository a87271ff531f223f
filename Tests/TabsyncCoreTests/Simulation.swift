import TabsyncCore
import TabsyncTestSupport

/// An in-process tabsync deployment for tests: the server's apply path (core `Sequencer`, with
/// docs/design.md's Hello / Welcome / resume / dedup answers on top), clients that each hold a core
/// `Replica`, and connections between them that can be delayed, interleaved and dropped.
///
/// The network model, per connection: client→server and server→client are each FIFO (WebSocket over
/// TCP); across connections anything interleaves, because the caller picks which message moves next.
/// Dropping a connection loses what the server had queued to the client, and loses the tail of what
/// the client had sent; a head of it (chosen by the caller) may still reach the server *after* the
/// drop, even after the client has reconnected — a server that has not noticed the close yet reads it.
/// The server answers such late messages into the closed connection (nobody gets them) but
/// broadcasts what they apply to every open session.
///
/// Every step checks what it can and appends to `failures` rather than trapping, so a run reports
/// every broken rule with its seed. ``checkQuiescent()`` checks the end state.
struct Simulation {
    enum ClientMessage {
        case hello(lastVersion: UInt64)
        case submit(Replica.PendingOp)
    }

    struct Welcome {
        var recovered: Bool
        var snapshot: Workspace?
        var missed: [AppliedOp]
        var lastSeq: UInt64
    }

    enum ServerMessage {
        case welcome(Welcome)
        /// `again`: a dedup answer to a resubmission (`Sequencer.Outcome.answeredAgain`), to the submitter only.
        case applied(AppliedOp, again: Bool)
        case rejected(seq: UInt64, OpError, again: Bool)
    }

    struct Connection {
        let client: Int
        var up: [ClientMessage] = []
        var upHead = 0
        var down: [ServerMessage] = []
        var downHead = 0
        /// Open: the server sends to it. Closed: nothing more reaches the client; `up` may still hold
        /// messages the server reads late.
        var open = true
        /// The server has read its Hello (it gets broadcasts from then on).
        var joined = false
    }

    /// How a client first learnt what became of one of its seqs.
    enum ClientAnswer: Equatable {
        case applied
        case rejected(ErrorCode)
        /// Dropped from pending because a `Welcome.lastSeq` covered it.
        case coveredByWelcome
    }

    /// What the server did with a (clientId, seq) the first time it read it.
    enum ServerOutcome: Equatable {
        case applied(version: UInt64)
        case rejected(ErrorCode)
    }

    struct Client {
        let id: String
        var replica: Replica
        /// Index into `connections` of the current connection, if any.
        var connection: Int?
        /// A Welcome arrived on the current connection (submits go out only after it).
        var welcomed = false
        var answers: [UInt64: ClientAnswer] = [:]
        /// A `Tab` id counter for ids this client makes.
        var madeTabs = 0
    }

    struct ClientSeq: Hashable {
        var client: String
        var seq: UInt64
    }

    private(set) var sequencer: Sequencer
    /// A plain client applying every op the server applied, in order (checks canonical ops apply).
    private(set) var mirror: Workspace
    /// The server's workspace at every version so far: every replica's confirmed state must be one
    /// of these, the one for its version.
    private(set) var history: [Workspace]
    private(set) var connections: [Connection] = []
    /// Connections that may still carry a message: open ones, and closed ones with late messages.
    private var live: [Int] = []
    var clients: [Client]
    private(set) var failures: [String] = []
    /// Every (clientId, seq) the server consumed, with what it did the first time.
    private(set) var consumed: [ClientSeq: ServerOutcome] = [:]
    /// Versions of the server-made rekeys so far.
    private(set) var rekeyVersions: [UInt64] = []
    /// Every tab id that ever existed or was asked for, for ops on tabs others removed.
    var knownTabIds: [String] = []
    private var knownTabIdSet: Set<String> = []
    /// Counters for the summary (and for tests that want a mix to have happened).
    var stats = Stats()
    /// Events so far, when tracing (set `trace` before running).
    var trace: Trace? = nil
    /// How clients choose places (see ``randomPlace(in:moving:using:)``).
    var placeMix = PlaceMix.usual

    /// The weights of the place kinds a client picks, and how often it drops a tab before the first.
    struct PlaceMix {
        /// Weights of: end, index, a key between neighbours, a key equal to a tab's, an empty key, a
        /// malformed key, a key of 40–128 bytes (a server rekey when over 64), a key over 128 bytes.
        var weights: [Int]
        /// The chance that a key place is computed for the gap before the first tab.
        var beforeFirst: Double

        static let usual = PlaceMix(weights: [12, 20, 40, 10, 2, 2, 6, 2], beforeFirst: 0)
        /// Rule 7's hard cases: many rekeys, keys before the first tab, keys equal to a tab's.
        static let rekeyHeavy = PlaceMix(weights: [4, 6, 40, 16, 1, 1, 14, 1], beforeFirst: 0.3)
    }

    /// A run's event log. A class so that logging needs no exclusive access to the simulation
    /// (messages are built only when tracing).
    final class Trace {
        var lines: [String] = []
    }

    struct Stats {
        var applied = 0
        var rejected: [ErrorCode: Int] = [:]
        var serverRekeys = 0
        /// Key places refused because a rekey since their baseVersion had left the log window.
        var staleKeyRefusals = 0
        /// Key places applied after translation through at least one rekey since their baseVersion.
        var translatedKeyPlaces = 0
        var answeredAgain = 0
        var ignored = 0
        var recoveredWelcomes = 0
        var snapshotWelcomes = 0
        var lateDelivered = 0
        var lost = 0
    }

    init(clients count: Int, limits: Limits, workspace: Workspace = Workspace(id: "w", epoch: "e1")) {
        sequencer = Sequencer(workspace: workspace, limits: limits)
        mirror = workspace
        history = [workspace]
        clients = (0..<count).map { Client(id: "c\($0 + 1)", replica: Replica(clientId: "c\($0 + 1)", workspace: workspace, limits: limits)) }
    }

    var limits: Limits { sequencer.limits }

    mutating func fail(_ message: String) {
        failures.append(message)
        log("FAIL " + message)
    }

    func log(_ event: @autoclosure () -> String) {
        trace?.lines.append(event())
    }

    mutating func noteTabId(_ id: String) {
        if knownTabIdSet.insert(id).inserted { knownTabIds.append(id) }
    }

    // MARK: - client actions

    /// The client adds an op locally (it shows in its optimistic state) and sends it if welcomed.
    @discardableResult
    mutating func submit(_ client: Int, _ op: Operation) -> Replica.PendingOp {
        let pending = clients[client].replica.submit(op)
        log("\(clients[client].id) submits seq \(pending.seq) base \(pending.baseVersion): \(op)")
        if clients[client].welcomed, let c = clients[client].connection {
            connections[c].up.append(.submit(pending))
        }
        checkOptimistic(client)
        return pending
    }

    /// Opens a new connection and sends Hello (`lastVersion` 0 when `fresh`, asking for a snapshot).
    mutating func connect(_ client: Int, fresh: Bool = false) {
        precondition(clients[client].connection == nil, "already connected")
        connections.append(Connection(client: client))
        let c = connections.count - 1
        live.append(c)
        clients[client].connection = c
        clients[client].welcomed = false
        let lastVersion = fresh ? 0 : clients[client].replica.confirmed.version
        connections[c].up.append(.hello(lastVersion: lastVersion))
        log("\(clients[client].id) connects (#\(c)) lastVersion \(lastVersion)")
    }

    /// Drops the client's connection: what the server queued is lost, and of what the client sent,
    /// the first `lateDelivered` messages still reach the server (later), the rest are lost.
    mutating func disconnect(_ client: Int, lateDelivered: Int) {
        guard let c = clients[client].connection else { return }
        connections[c].open = false
        connections[c].down.removeAll()
        connections[c].downHead = 0
        let keep = min(connections[c].upHead + lateDelivered, connections[c].up.count)
        stats.lateDelivered += keep - connections[c].upHead
        stats.lost += connections[c].up.count - keep
        connections[c].up.removeSubrange(keep...)
        clients[client].connection = nil
        clients[client].welcomed = false
        log("\(clients[client].id) drops #\(c), \(keep - connections[c].upHead) sent messages still in flight")
    }

    // MARK: - the server

    /// The server reads the next message the client sent on connection `c`.
    mutating func deliverToServer(_ c: Int) {
        let message = connections[c].up[connections[c].upHead]
        connections[c].upHead += 1
        let client = connections[c].client
        let clientId = clients[client].id
        switch message {
        case .hello(let lastVersion):
            guard connections[c].open else { return } // the session is gone
            connections[c].joined = true
            let lastSeq = sequencer.lastSeq(of: clientId)
            let welcome: Welcome
            if lastVersion > 0, let missed = sequencer.missed(after: lastVersion), missed.count <= limits.maxResumeOps {
                welcome = Welcome(recovered: true, snapshot: nil, missed: missed, lastSeq: lastSeq)
                stats.recoveredWelcomes += 1
            } else {
                welcome = Welcome(recovered: false, snapshot: sequencer.workspace, missed: [], lastSeq: lastSeq)
                stats.snapshotWelcomes += 1
            }
            log("server welcomes \(clientId) on #\(c): recovered \(welcome.recovered), \(welcome.missed.count) missed, lastSeq \(lastSeq), version \(sequencer.workspace.version)")
            connections[c].down.append(.welcome(welcome))

        case .submit(let p):
            let key = ClientSeq(client: clientId, seq: p.seq)
            let before = sequencer.workspace
            let heldRekeys = Set(sequencer.rekeys.map(\.version))
            let versionBefore = before.version
            let outcome = sequencer.submit(clientId: clientId, seq: p.seq, baseVersion: p.baseVersion, op: p.op)
            log("server reads \(clientId) seq \(p.seq) on #\(c)\(connections[c].open ? "" : " (closed)"): \(outcome)")
            switch outcome {
            case .applied(let ops):
                if consumed[key] != nil { fail("\(clientId) seq \(p.seq) applied after it was consumed") }
                consumed[key] = .applied(version: ops.last?.version ?? 0)
                var expected = versionBefore + 1
                for applied in ops {
                    if applied.version != expected { fail("version \(applied.version) after \(expected - 1): not contiguous") }
                    expected += 1
                    serverApplied(applied)
                }
                if let last = ops.last, last.clientId != clientId || last.seq != p.seq {
                    fail("the last applied op of seq \(p.seq) is \(last.clientId)/\(last.seq)")
                }
                if mirror != sequencer.workspace { fail("a plain client applying the Applied ops differs from the server at v\(sequencer.workspace.version)") }
                if ops.dropLast().contains(where: { $0.op.kind != .rekey || !$0.clientId.isEmpty || $0.seq != 0 }) {
                    fail("only a server rekey (clientId \"\", seq 0) may come before an op: \(ops)")
                }
            case .rejected(let error):
                if consumed[key] != nil { fail("\(clientId) seq \(p.seq) rejected after it was consumed") }
                consumed[key] = .rejected(error.code)
                stats.rejected[error.code, default: 0] += 1
                if sequencer.workspace.version != versionBefore { fail("a rejected op changed the version") }
                if connections[c].open { connections[c].down.append(.rejected(seq: p.seq, error, again: false)) }
            case .answeredAgain(let answer):
                stats.answeredAgain += 1
                switch (answer, consumed[key]) {
                case (.applied(let op), .applied(let version)?) where op.version == version && op.clientId == clientId && op.seq == p.seq:
                    if connections[c].open { connections[c].down.append(.applied(op, again: true)) }
                case (.rejected(let seq, let error), .rejected(let code)?) where seq == p.seq && error.code == code:
                    if connections[c].open { connections[c].down.append(.rejected(seq: seq, error, again: true)) }
                default:
                    fail("\(clientId) seq \(p.seq) answered again with \(answer), but it was \(String(describing: consumed[key]))")
                }
            case .ignored:
                stats.ignored += 1
                if consumed[key] == nil { fail("\(clientId) seq \(p.seq) ignored but never consumed") }
            }
            if sequencer.lastSeq(of: clientId) < p.seq { fail("lastSeq of \(clientId) is below the seq it just read") }
            checkRules(before: before, heldRekeys: heldRekeys, submitted: p, outcome: outcome)
        }
    }

    /// One op the server applied: check it, mirror it, broadcast it.
    private mutating func serverApplied(_ applied: AppliedOp) {
        stats.applied += 1
        if applied.op.kind == .rekey {
            stats.serverRekeys += 1
            rekeyVersions.append(applied.version)
        }
        do {
            try mirror.apply(applied: applied)
        } catch {
            fail("the canonical op v\(applied.version) \(applied.op) does not apply to a plain client: \(error)")
        }
        let problems = mirror.invariantViolations(limits: limits)
        if !problems.isEmpty { fail("invariants broken after v\(applied.version) \(applied.op): \(problems)") }
        if mirror.tabs.contains(where: { $0.key.utf8.count > PositionKey.maxStoredLength }) {
            fail("a key over \(PositionKey.maxStoredLength) bytes stored at v\(applied.version)")
        }
        for tab in mirror.tabs { noteTabId(tab.id) }
        history.append(mirror)
        for c in connections.indices where connections[c].open && connections[c].joined {
            connections[c].down.append(.applied(applied, again: false))
        }
    }

    // MARK: - clients receiving

    /// The client reads the next message the server sent on connection `c`.
    mutating func deliverToClient(_ c: Int) {
        let message = connections[c].down[connections[c].downHead]
        connections[c].downHead += 1
        let client = connections[c].client
        precondition(clients[client].connection == c, "only an open connection has messages to deliver")
        switch message {
        case .welcome(let welcome):
            receiveWelcome(client, welcome)
        case .applied(let applied, let again):
            receiveApplied(client, applied, again: again, fromMissed: false)
        case .rejected(let seq, let error, let again):
            receiveRejected(client, seq: seq, error, again: again)
        }
    }

    private mutating func receiveWelcome(_ client: Int, _ welcome: Welcome) {
        let id = clients[client].id
        if clients[client].welcomed { fail("\(id): a second Welcome on one connection") }
        let pendingBefore = clients[client].replica.pending.map(\.seq)
        if welcome.recovered {
            clients[client].replica.resume(lastSeq: welcome.lastSeq)
        } else {
            clients[client].replica.reset(to: welcome.snapshot!, lastSeq: welcome.lastSeq)
        }
        let stillPending = Set(clients[client].replica.pending.map(\.seq))
        for seq in pendingBefore where !stillPending.contains(seq) {
            if seq > welcome.lastSeq { fail("\(id): seq \(seq) above lastSeq \(welcome.lastSeq) left pending") }
            record(client, seq: seq, .coveredByWelcome)
        }
        if stillPending.contains(where: { $0 <= welcome.lastSeq }) { fail("\(id): a seq at or below lastSeq stayed pending") }
        checkConfirmed(client)
        for applied in welcome.missed { receiveApplied(client, applied, again: false, fromMissed: true) }
        clients[client].welcomed = true
        log("\(id) welcomed at v\(clients[client].replica.confirmed.version); resubmits \(clients[client].replica.pending.map(\.seq))")
        let c = clients[client].connection!
        for p in clients[client].replica.pending { connections[c].up.append(.submit(p)) }
    }

    private mutating func receiveApplied(_ client: Int, _ applied: AppliedOp, again: Bool, fromMissed: Bool) {
        let id = clients[client].id
        let wasPending = applied.clientId == id && clients[client].replica.pending.contains { $0.seq == applied.seq }
        let below = applied.clientId == id ? pendingSeqs(client, below: applied.seq) : []
        let receipt = clients[client].replica.receive(applied: applied)
        recordCovered(client, below)
        switch (receipt, again) {
        case (.applied, false), (.stale, true):
            break
        default:
            fail("\(id): Applied v\(applied.version) (again: \(again)) at confirmed v\(clients[client].replica.confirmed.version) gave \(receipt)")
        }
        checkConfirmed(client)
        guard applied.clientId == id else { return }
        if wasPending {
            record(client, seq: applied.seq, .applied)
        } else if let earlier = clients[client].answers[applied.seq] {
            // A replay in a Welcome's missed ops, or a dedup answer to a resubmission.
            if !(again || fromMissed) || !(earlier == .applied || earlier == .coveredByWelcome) {
                fail("\(id): a second answer (Applied, again: \(again)) to seq \(applied.seq), first \(earlier)")
            }
        } else {
            fail("\(id): Applied for seq \(applied.seq), which was never pending")
        }
    }

    private mutating func receiveRejected(_ client: Int, seq: UInt64, _ error: OpError, again: Bool) {
        let id = clients[client].id
        let below = pendingSeqs(client, below: seq)
        defer { recordCovered(client, below) }
        if clients[client].replica.receive(rejectedSeq: seq) != nil {
            record(client, seq: seq, .rejected(error.code))
        } else if let earlier = clients[client].answers[seq] {
            if !again || !(earlier == .rejected(error.code) || earlier == .coveredByWelcome) {
                fail("\(id): a second answer (Rejected \(error.code.wireName), again: \(again)) to seq \(seq), first \(earlier)")
            }
        } else {
            fail("\(id): Rejected for seq \(seq), which was never pending")
        }
    }

    /// The client's pending seqs below `seq`: an answer to `seq` settles them (the replica drops
    /// them, as a `Welcome.lastSeq` would).
    private func pendingSeqs(_ client: Int, below seq: UInt64) -> [UInt64] {
        clients[client].replica.pending.map(\.seq).filter { $0 < seq }
    }

    private mutating func recordCovered(_ client: Int, _ seqs: [UInt64]) {
        for seq in seqs where !clients[client].replica.pending.contains(where: { $0.seq == seq }) {
            record(client, seq: seq, .coveredByWelcome)
        }
    }

    private mutating func record(_ client: Int, seq: UInt64, _ answer: ClientAnswer) {
        if let earlier = clients[client].answers[seq] {
            fail("\(clients[client].id): seq \(seq) answered twice: \(earlier), then \(answer)")
        }
        clients[client].answers[seq] = answer
    }

    /// The replica's confirmed state is exactly the server's at the same version (so it keeps the
    /// invariants, which the server's states are checked for after every applied op).
    private mutating func checkConfirmed(_ client: Int) {
        let confirmed = clients[client].replica.confirmed
        if confirmed != history[Int(confirmed.version)] {
            fail("\(clients[client].id): confirmed \(describe(confirmed)) is not the server's \(describe(history[Int(confirmed.version)]))")
        }
    }

    /// The replica's optimistic state keeps the invariants (pending ops replay through the same
    /// apply). Checked after each local submit and at the end; `confirmed` is checked after every
    /// Applied and Welcome (``checkConfirmed(_:)``).
    private mutating func checkOptimistic(_ client: Int) {
        let problems = clients[client].replica.optimistic.invariantViolations(limits: limits)
        if !problems.isEmpty { fail("\(clients[client].id): optimistic state invariants: \(problems)") }
    }

    // MARK: - running to quiescence

    /// Open connections with messages for their client, and connections with messages for the server.
    mutating func deliverable() -> (toClients: [Int], toServer: [Int]) {
        var toClients: [Int] = []
        var toServer: [Int] = []
        live.removeAll { !connections[$0].open && connections[$0].upHead == connections[$0].up.count }
        for c in live {
            if connections[c].open && connections[c].downHead < connections[c].down.count { toClients.append(c) }
            if connections[c].upHead < connections[c].up.count { toServer.append(c) }
        }
        return (toClients, toServer)
    }

    /// Connects every client that is not connected and delivers everything, picking the next message
    /// with `rng` (pass a fixed-order generator for a deterministic order).
    mutating func settle<R: RandomNumberGenerator>(using rng: inout R) {
        for i in clients.indices where clients[i].connection == nil { connect(i) }
        while true {
            let (toClients, toServer) = deliverable()
            if toClients.isEmpty && toServer.isEmpty { break }
            if !toServer.isEmpty && (toClients.isEmpty || rng.chance(0.5)) {
                deliverToServer(rng.pick(toServer))
            } else {
                deliverToClient(rng.pick(toClients))
            }
        }
    }

    /// Delivers everything in a fixed order (all messages to the server, oldest connection first, then
    /// all messages to clients) until nothing is in flight. Does not reconnect anyone.
    mutating func flush() {
        while true {
            let (toClients, toServer) = deliverable()
            if toClients.isEmpty && toServer.isEmpty { break }
            for c in toServer { while connections[c].upHead < connections[c].up.count { deliverToServer(c) } }
            for c in toClients where connections[c].open {
                while connections[c].downHead < connections[c].down.count { deliverToClient(c) }
            }
        }
    }

    /// After ``settle(using:)``: every replica equals the server, nothing is pending, every seq was
    /// answered once and consumed once, every op applied at most once, versions contiguous.
    mutating func checkQuiescent() {
        let server = sequencer.workspace
        if mirror != server { fail("a plain client applying every Applied has \(mirror.tabs.map(\.id)), the server \(server.tabs.map(\.id))") }
        let violations = server.invariantViolations(limits: limits)
        if !violations.isEmpty { fail("server invariants: \(violations)") }
        for client in clients.indices {
            let r = clients[client].replica
            let id = clients[client].id
            if !r.pending.isEmpty { fail("\(id): still pending after quiescence: \(r.pending.map(\.seq))") }
            if r.confirmed != server { fail("\(id): confirmed \(describe(r.confirmed)) != server \(describe(server))") }
            if r.optimistic != server { fail("\(id): optimistic \(describe(r.optimistic)) != server \(describe(server))") }
            checkOptimistic(client)
            for seq in 1..<r.nextSeq {
                if clients[client].answers[seq] == nil { fail("\(id): seq \(seq) never answered") }
                let serverOutcome = consumed[ClientSeq(client: id, seq: seq)]
                switch (clients[client].answers[seq], serverOutcome) {
                case (_, nil): fail("\(id): seq \(seq) never consumed by the server")
                case (.applied?, .applied?), (.coveredByWelcome?, _), (nil, _): break
                case (.rejected(let code)?, .rejected(let serverCode)?) where code == serverCode: break
                case (let answer, let outcome): fail("\(id): seq \(seq) answered \(String(describing: answer)), server did \(String(describing: outcome))")
                }
            }
        }
        if consumed.count != clients.reduce(0, { $0 + Int($1.replica.nextSeq - 1) }) {
            fail("the server consumed \(consumed.count) seqs, clients submitted \(clients.reduce(0) { $0 + Int($1.replica.nextSeq - 1) })")
        }
        // Each op applied at most once, versions contiguous over what the log still holds.
        let log = sequencer.log
        var seen = Set<ClientSeq>()
        for (i, applied) in log.enumerated() {
            if i > 0 && applied.version != log[i - 1].version + 1 { fail("log versions not contiguous at \(applied.version)") }
            if !applied.clientId.isEmpty && !seen.insert(ClientSeq(client: applied.clientId, seq: applied.seq)).inserted {
                fail("\(applied.clientId) seq \(applied.seq) applied twice")
            }
        }
        if let last = log.last, last.version != server.version { fail("the log ends at \(last.version), the workspace is at \(server.version)") }
        let appliedBySeqs = consumed.values.filter { if case .applied = $0 { true } else { false } }.count
        if appliedBySeqs + stats.serverRekeys != Int(server.version) {
            fail("\(appliedBySeqs) client ops and \(stats.serverRekeys) rekeys applied, but the version is \(server.version)")
        }
    }

    func describe(_ w: Workspace) -> String {
        "v\(w.version) \(w.tabs.map { "\($0.id)@\($0.key)" }) active \(w.activeTabId) editable \(w.editable)"
    }
}
