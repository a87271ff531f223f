import Logging
import SwiftProtobuf
import TabsyncCore
import TabsyncProto
import TabsyncStore
import TabsyncTestSupport
@testable import TabsyncClient
@testable import TabsyncServerCore

/// One seeded world for the deterministic simulation of the real server core (in the manner of
/// FoundationDB's simulator and TigerBeetle's VOPR): `nodes` ``ServerCore`` values sharing one
/// multi-writer ``MemoryStore`` and (with several nodes) one ``MemoryHolderTable`` on the virtual
/// clock, `clients` real client ``Session`` values (TabsyncClient's protocol
/// logic) submitting random ops to one workspace, and a network of FIFO connections. One seed
/// drives every choice: which message moves next, which store call completes, when the store fails
/// or its answer is lost, when a connection drops, a node crashes, a client reconnects, and what
/// op a client makes. A virtual clock moves only on ticks; there are no threads and no sleeps.
///
/// Invariants are checked as the world runs (``checkStep()``, and on every broadcast), on every
/// batch the store accepts (``RuleOracle``: docs/design.md's rules for each op against the state it
/// was applied to) and at the end (``finish()``); a broken one is appended to ``failures`` with the
/// step it was seen at.
struct SimulatedWorld {
    struct Options: CustomStringConvertible {
        var nodes = 1
        var clients = 3
        var steps = 400
        /// Chance that a store commit fails (nothing stored), and that its answer is lost after it
        /// was stored or not (`outcomeUnknown`).
        var commitFailure = 0.03
        var outcomeUnknown = 0.02
        var loadFailure = 0.02
        var disconnect = 0.02
        var crash = 0.004
        var logRetention = 100_000
        var maxTabs = Limits.default.maxTabs
        var maxResumeOps = Limits.default.maxResumeOps
        /// How clients choose places (``PlaceMix``).
        var placeMix = PlaceMix.usual
        /// Chance that a dropped connection's head (1-3 frames the client had sent) still reaches
        /// the server after the drop, even after the client reconnected: a server that has not
        /// noticed the close yet reads it.
        var lateDelivery = 0.5
        /// Clients connect to any node, so the workspace is split across nodes: half of the
        /// connections go to a node drawn at random (a proxy's spill, or a client that reached a
        /// node before the proxy marked it up or down), and the proxy sometimes moves the home to
        /// another node while the old home keeps its sessions. Off: they connect to its home node,
        /// which moves to the next node when the home crashes (docs/design.md, "Several nodes and
        /// placement"). A third of the worlds split (drawn apart from the rest, so the other worlds
        /// of a seed stay as they were); a split world has two nodes or more.
        var split = false
        /// The nodes' commit linger (``CommitPipeline/Linger``); zero: off. A third of the worlds
        /// linger (drawn apart from the rest, so the other worlds of a seed stay as they were).
        var commitLinger: Duration = .zero
        /// The nodes' idle timeout (``ServerCore/Settings/idleTimeout``): the core pings and drops
        /// silent sessions; some peers never answer pings, and some drops leave the connection
        /// half-open (the server never hears of them). Nil: no keepalive. A third of the worlds
        /// (drawn apart from the rest, so the other worlds of a seed stay as they were).
        var keepalive: Duration?

        /// Makes the world split, with at least `nodes` nodes.
        mutating func split(nodes atLeast: Int = 2) {
            split = true
            nodes = max(nodes, atLeast)
        }

        var description: String {
            "\(nodes) nodes\(split ? " (split)" : ""), \(clients) clients, \(steps) steps"
                + (placeMix == .rekeyHeavy ? ", rekey-heavy" : "")
                + (commitLinger > .zero ? ", linger \(commitLinger)" : "")
                + (keepalive.map { ", idle timeout \($0)" } ?? "")
                + (logRetention < 100_000 ? ", logRetention \(logRetention)" : "")
                + (maxTabs != Limits.default.maxTabs ? ", maxTabs \(maxTabs)" : "")
                + (maxResumeOps != Limits.default.maxResumeOps ? ", maxResumeOps \(maxResumeOps)" : "")
        }

        /// A world's shape from its seed: 1–3 nodes, 1–6 clients, 200–600 steps, fault rates from
        /// none to high; a quarter of the worlds rekey-heavy (rule 7's hard cases: 2-20 clients whose
        /// places are mostly keys, deep ones among them, a log window of 6-400 ops so that rekeys
        /// leave it), and a third of the others with a small log window or few tabs allowed.
        static func from(seed: UInt64) -> Options {
            var rng = SplitMix64(seed: seed ^ 0x5EED)
            var o = Options()
            o.nodes = rng.int(1...3)
            o.clients = rng.int(1...6)
            o.steps = rng.int(200...600)
            let faults = rng.pick([0.0, 0.5, 1.0, 2.0])
            o.commitFailure *= faults
            o.outcomeUnknown *= faults
            o.loadFailure *= faults
            o.disconnect *= faults
            o.crash *= faults
            if rng.chance(0.25) {
                o.placeMix = .rekeyHeavy
                o.clients = rng.int(2...20)
                o.logRetention = rng.int(6...400)
                o.maxTabs = rng.int(8...40)
                o.maxResumeOps = rng.int(1...200)
            } else if rng.chance(0.33) {
                o.logRetention = rng.int(6...200)
                o.maxTabs = rng.int(4...30)
                o.maxResumeOps = rng.int(1...60)
            }
            var lingerRng = SplitMix64(seed: seed ^ 0x11AE)
            if lingerRng.chance(0.33) { o.commitLinger = .milliseconds(lingerRng.int(5...120)) }
            var splitRng = SplitMix64(seed: seed ^ 0x5B17)
            if splitRng.chance(0.33) { o.split(nodes: splitRng.int(2...3)) }
            var keepaliveRng = SplitMix64(seed: seed ^ 0x1D1E)
            if keepaliveRng.chance(0.33) { o.keepalive = .milliseconds(keepaliveRng.pick([500, 1_000, 2_000])) }
            return o
        }
    }

    enum Down: Equatable {
        case frame([UInt8])
        /// The server's close, after the frames before it.
        case close(UInt16)
        /// A keepalive ping (``ServerCore/Action/ping(_:)``); a client that answers puts a pong
        /// (an empty entry: no client message is empty) on its `up`, behind what it sent before.
        case ping
    }

    struct Link {
        let id: ConnectionID
        let client: Int
        let node: Int
        let format: WireFormat
        var up: [[UInt8]] = []
        var down: [Down] = []
        /// The client's end is gone (the network dropped it) but the server has not heard yet: it
        /// still reads what is left in `up`, its sends go nowhere, and it hears of the close once
        /// `up` is empty.
        var clientGone = false
        /// The version the session's Welcome brought it to: a broadcast `Applied` at or below it
        /// after the Welcome would be a Welcome ahead of an earlier `Applied`.
        var welcomedAt: UInt64?
        /// When the server last heard from it (connected, a frame or a pong read), on the world's
        /// clock: the core must close it once it is silent for the idle timeout, and never sooner.
        var lastHeard: Duration = .zero
        /// A peer that never answers pings (keepalive worlds).
        var silent = false
        /// Dropped without the server hearing of it: only the keepalive ends it at the server.
        var halfOpen = false
        /// The server closed it (the driver drops the socket): it hears of the close on the next tick.
        var serverClosed = false
    }

    struct Node {
        var core: ServerCore
        /// The node's name in the holder registry: a new one for each life (as a restarted
        /// PostgreSQL node's), so a crashed life's registrations stay until they expire.
        var name: String
        /// Workspaces whose registration (``ServerCore/Action/hold(_:)``) this life completed and
        /// has not released since: a read must come after one.
        var held: Set<String> = []
        /// When the core last asked for a heartbeat, and for a check of each workspace's holders.
        var lastBeat: Duration
        var lastCheck: [String: Duration] = [:]
        /// Store calls in the order they were asked (each node's store executor is serial).
        var storeCalls: [ServerCore.Action] = []
    }

    struct SimClient {
        var session: Session
        var link: ConnectionID?
        var attempt = 0
        /// Seqs this client saw acknowledged (its own `Applied`) and refused, with their versions.
        var acked: [UInt64: UInt64] = [:]
        var refused: Set<UInt64> = []
        var madeTabs = 0
        /// An operator kicked it (4408): it stopped for good, as a real client does, and takes no
        /// further part; what it had acknowledged must still be stored.
        var kicked = false
    }

    let seed: UInt64
    let options: Options
    let workspace = "w"
    var rng: SplitMix64
    /// The store every node shares, its faults in front (``SimulatedStore``).
    let store: SimulatedStore
    var nodes: [Node] = []
    /// The workspace's home node (where clients connect unless the options split it).
    var home = 0
    var clients: [SimClient] = []
    /// Admin-log entries made so far (their numbers count up).
    var adminEntries: Int64 = 0
    var links: [ConnectionID: Link] = [:]
    var nextId = 1
    let start = ContinuousClock.now
    var elapsed: Duration = .zero
    var step = 0
    var failures: [String] = []
    var stats = Stats()
    /// Events handled and frames delivered so far: the world's work, bounded by ``workBudget``.
    var work = 0
    /// Set once the world went over a budget (work or virtual time): every loop stops.
    var overBudget = false
    /// What happened, step by step, when tracing (`TABSYNC_SIM_TRACE=1` with one seed).
    var trace: [String]?
    /// docs/design.md's rules, checked on every batch the store accepts.
    var oracle: RuleOracle
    /// Every tab id a client made, for ops on tabs others removed.
    var knownTabIds: [String] = []

    mutating func note(_ line: @autoclosure () -> String) {
        if trace != nil { trace!.append("\(step) \(line())") }
    }
    /// Commits announced to the nodes the holder registry named when each was stored (their
    /// commit feed), by node name: a notification to a crashed life goes nowhere.
    var feed: [(to: String, version: UInt64)] = []
    /// Which node holds the workspace, on the virtual clock (multi-node worlds).
    let holders = MemoryHolderTable(timeout: SimulatedWorld.holderTimeout)
    /// Lives started so far (each node's crashes give it a new name).
    var lives = 0
    /// The event a node's core is handling (what its actions are answers to).
    var handling: ServerCore.Event?

    struct Stats {
        var delivered = 0
        var commits = 0
        var failedCommits = 0
        var unknownOutcomes = 0
        var behind = 0
        var crashes = 0
        var disconnects = 0
        /// Frames of dropped connections the server read after the drop.
        var lateDelivered = 0
        /// Wakes a lingering batch asked for and got.
        var lingerWakes = 0
        /// Timeouts handled: a core's deadline came (``ServerCore/nextDeadline``).
        var timeouts = 0
        /// Sessions an operator kicked (the admin log's entry read by the node holding them).
        var kicks = 0
        /// From the cores' metrics, over every life: Submits re-sequenced after `behind`, loads
        /// that found the workspace held by another live node (splits), workspaces handed to
        /// their newer holder (moves), checks for a newer holder.
        var resequenced = 0
        var splits = 0
        var moves = 0
        var holderChecks = 0
        /// Commits announced to another holder (the registry named it).
        var notified = 0

        /// History queries answered with ops, and the ops in them checked against the stored log.
        var historyReads = 0
        var historyOpsChecked = 0
        /// Keepalive: pings asked for, pongs read, connections left half-open, idle closes.
        var pings = 0
        var pongs = 0
        var halfOpen = 0
        var idleCloses = 0

        mutating func add(_ other: Stats) {
            delivered += other.delivered
            commits += other.commits
            failedCommits += other.failedCommits
            unknownOutcomes += other.unknownOutcomes
            behind += other.behind
            crashes += other.crashes
            disconnects += other.disconnects
            lateDelivered += other.lateDelivered
            lingerWakes += other.lingerWakes
            timeouts += other.timeouts
            kicks += other.kicks
            resequenced += other.resequenced
            splits += other.splits
            moves += other.moves
            holderChecks += other.holderChecks
            notified += other.notified
            historyReads += other.historyReads
            historyOpsChecked += other.historyOpsChecked
            pings += other.pings
            pongs += other.pongs
            halfOpen += other.halfOpen
            idleCloses += other.idleCloses
        }
    }

    /// The holder registry's timing in the simulation: production's (2.5 s beats, 10 s timeout,
    /// a check at most once a minute after up to 1 s) scaled to worlds that last seconds.
    static let heartbeatInterval: Duration = .milliseconds(100)
    static let holderTimeout: Duration = .milliseconds(400)
    static let moveCheckInterval: Duration = .seconds(1)
    static let holderCheckPause: Duration = .milliseconds(200)
    static let tickLength: Duration = .milliseconds(50)

    init(seed: UInt64, options: Options? = nil) {
        self.seed = seed
        self.options = options ?? .from(seed: seed)
        rng = SplitMix64(seed: seed)
        store = SimulatedStore(seed: seed, options: self.options)
        oracle = RuleOracle(workspace: Workspace(id: workspace, epoch: store.epoch), limits: Self.limits(self.options))
        for _ in 0..<self.options.nodes { nodes.append(makeNode()) }
        for c in 0..<self.options.clients {
            var session = Session(
                workspaceId: workspace, clientId: "c\(c)", clientName: "client \(c)", token: "",
                format: rng.chance(0.5) ? .json : .proto)
            _ = session.start()
            clients.append(SimClient(session: session))
        }
    }

    var now: ContinuousClock.Instant { start + elapsed }

    /// Work (events handled by the cores, frames delivered) a world may do in all, its seeded steps
    /// and its settling together. Far above what a world does (the busiest of the default seeds
    /// stays under a tenth of it), so only a world that loops without settling reaches it: a broken
    /// rule fails it with a replay line instead of hanging the run.
    var workBudget: Int { 10_000 + options.steps * options.clients * 20 }
    /// Rounds of settling (each a tick: 50 ms of virtual time) a world has to settle in.
    static let settleRounds = 400

    /// Counts one unit of work; false (and one failure saying what the world still waits for)
    /// once the world is over its budget.
    mutating func spend() -> Bool {
        work += 1
        guard work > workBudget else { return !overBudget }
        if !overBudget {
            overBudget = true
            fail("the world did not settle within its budget of \(workBudget) events and deliveries "
                + "(at \(elapsed) of virtual time); waiting for: \(describeUnsettled())")
        }
        return false
    }

    static func limits(_ options: Options) -> Limits {
        var limits = Limits.default
        limits.maxOpsPerSecond = 1_000_000
        limits.logRetention = options.logRetention
        limits.maxTabs = options.maxTabs
        limits.maxResumeOps = options.maxResumeOps
        return limits
    }

    /// A new life of a node: a fresh core with a registry name of its own. Several nodes share the
    /// holder registry and move split workspaces home; their pauses come from the world's seed.
    mutating func makeNode() -> Node {
        lives += 1
        var settings = ServerCore.Settings(storeEpoch: store.epoch)
        settings.limits = Self.limits(options)
        settings.idleUnload = .seconds(1)
        if options.nodes > 1 {
            settings.sharedStorePollInterval = .milliseconds(500)
            settings.holderRegistry = .init(heartbeatInterval: Self.heartbeatInterval)
            settings.yieldsSplitWorkspaces = true
            settings.moveCheckInterval = Self.moveCheckInterval
            settings.holderCheckPause = Self.holderCheckPause
            settings.jitterSeed = seed &* 0x9E37_79B9_7F4A_7C15 &+ UInt64(lives)
        }
        settings.commitLinger = options.commitLinger
        settings.idleTimeout = options.keepalive
        let core = ServerCore(settings: settings, logger: Logger(label: "sim", factory: { _ in SwiftLogNoOpLogHandler() }), now: now)
        return Node(core: core, name: "node\(lives)", lastBeat: elapsed)
    }

    /// The registry handle of node `n`'s current life.
    func registry(_ n: Int) -> MemoryHolderRegistry {
        holders.node(nodes[n].name, heartbeatInterval: Self.heartbeatInterval)
    }

    /// Adds what node `n`'s core counted to the world's stats (before a crash ends its life, and
    /// at the end).
    mutating func harvest(_ n: Int) {
        let metrics = nodes[n].core.metrics
        stats.resequenced += Int(metrics.opsResequenced)
        stats.splits += Int(metrics.workspaceSplits)
        stats.moves += Int(metrics.moves)
    }

    mutating func fail(_ what: String) {
        failures.append("step \(step): \(what)")
    }

    // MARK: running

    /// Runs the seeded steps, then lets the world settle without faults and checks the end state.
    mutating func run() {
        while step < options.steps && failures.isEmpty {
            step += 1
            randomStep()
            checkStep()
        }
        if failures.isEmpty { finish() }
        for n in nodes.indices { harvest(n) }
        stats.failedCommits = store.failedCommits
        stats.unknownOutcomes = store.unknownOutcomes
    }

    private mutating func randomStep() {
        let weights: [Int] = [
            3_000,  // a client makes an op
            6_000,  // a frame reaches a server
            6_000,  // a frame reaches a client
            4_000,  // a store call completes
            1_000,  // time passes (a tick on every node)
            Int(options.disconnect * 50_000),
            Int(options.crash * 50_000),
            1_000,  // a disconnected client connects
            1_000,  // the commit feed tells a node of another's commit
            options.split ? 150 : 0,  // the proxy moves the workspace's home to another node
            40,  // an operator kicks a client's session
        ]
        switch rng.weighted(weights) {
        case 0: clientOp(rng.int(0...(clients.count - 1)))
        case 1: if let id = pickLink({ !$0.up.isEmpty }) { deliverUp(id) }
        case 2: if let id = pickLink({ !$0.down.isEmpty && !$0.clientGone }) { deliverDown(id) }
        case 3: completeStoreCall(rng.int(0...(nodes.count - 1)))
        case 4: tick()
        case 5: if let id = pickLink({ !$0.clientGone }) { dropLink(id) }
        case 6: crash(rng.int(0...(nodes.count - 1)))
        case 7: connectSomeone()
        case 8: tellFeed()
        case 9: moveHome()
        default: kickSomeone()
        }
    }

    private mutating func pickLink(_ where: (Link) -> Bool) -> ConnectionID? {
        let ids = links.keys.sorted().filter { `where`(links[$0]!) }
        return ids.isEmpty ? nil : rng.pick(ids)
    }

    // MARK: clients

    private mutating func clientOp(_ c: Int) {
        // Now and then a history read instead, over the client's session (docs/design.md, "History").
        if rng.chance(0.05), clients[c].session.phase == .ready, let id = clients[c].link, links[id] != nil {
            var query = Tabsync_V1_HistoryQuery()
            query.id = UInt32(rng.int(1...1_000_000))
            var page = Tabsync_V1_HistoryPage()
            page.limit = UInt32(rng.int(1...30))
            query.ops = page
            var message = Tabsync_V1_ClientMessage()
            message.history = query
            links[id]!.up.append(clients[c].session.format.encode(message))
            note("c\(c) asks for the newest \(page.limit) ops of history")
            return
        }
        let op = randomOp(for: c)
        let seq = clients[c].session.submit(op)
        let base = clients[c].session.state.confirmed.version
        note("c\(c) submits seq \(seq.map(String.init) ?? "-") base \(base) \(op)")
        pumpClient(c)
    }

    /// Tells the oracle of a Submit in a frame client `c` sends, as the server will decode it.
    private mutating func noteSent(_ c: Int, _ frame: [UInt8]) {
        guard let message = try? clients[c].session.format.decodeClientMessage(frame),
              case .submit(let submit)? = message.message else { return }
        let op = submit.hasOp ? try? TabsyncCore.Operation(submit.op) : nil
        if let problem = oracle.sent(client: "c\(c)", seq: submit.seq, baseVersion: submit.baseVersion, op: op) { fail(problem) }
    }

    /// Moves what the client queued onto its connection, and reads its events.
    private mutating func pumpClient(_ c: Int) {
        let frames = clients[c].session.takeOutgoing(budget: .max)
        if let id = clients[c].link, links[id] != nil {
            for frame in frames { noteSent(c, frame) }
            links[id]!.up.append(contentsOf: frames)
        }
        for event in clients[c].session.takeEvents() {
            switch event {
            case .applied(let op) where op.clientId == "c\(c)" && op.seq > 0:
                if let earlier = clients[c].acked[op.seq], earlier != op.version {
                    fail("c\(c) seq \(op.seq) acknowledged at v\(earlier) and again at v\(op.version)")
                }
                clients[c].acked[op.seq] = op.version
            case .rejected(let rejection):
                clients[c].refused.insert(rejection.seq)
            case .history(let answer):
                checkHistory(c, answer)
            default:
                break
            }
        }
    }

    /// A history answer is a prefix of the acknowledged log: newest first, contiguous, each op the
    /// very op the store accepted at its version, none past what it accepted.
    private mutating func checkHistory(_ c: Int, _ answer: Tabsync_V1_HistoryAnswer) {
        guard !answer.hasError else { return }  // a failed read (the store's faults) says so
        stats.historyReads += 1
        var previous: UInt64?
        for entry in answer.ops {
            let v = entry.version
            if let previous, v != previous - 1 { return fail("c\(c)'s history answer jumps from v\(previous) to v\(v)") }
            previous = v
            guard v >= 1, Int(v) <= oracle.log.count else {
                return fail("c\(c)'s history answer names v\(v); the store accepted \(oracle.log.count) ops")
            }
            let stored = oracle.log[Int(v) - 1]
            let op = try? TabsyncCore.Operation(entry.op)
            if op != stored.op || entry.clientID != stored.clientId || entry.seq != stored.seq || entry.activeTabID != stored.activeTabId {
                return fail("c\(c)'s history answer has \(entry.clientID) seq \(entry.seq) at v\(v); the store \(stored.clientId) seq \(stored.seq)")
            }
            stats.historyOpsChecked += 1
        }
    }

    /// A client that is not connected opens a connection to a node (any node: a workspace may be
    /// split across nodes, as several nodes allow).
    private mutating func connectSomeone() {
        let idle = clients.indices.filter { clients[$0].link == nil && clients[$0].session.phase != .closed }
        guard !idle.isEmpty else { return }
        let c = rng.pick(idle)
        connect(c, to: options.split && rng.chance(0.5) ? rng.int(0...(nodes.count - 1)) : home)
    }

    /// An operator kicks one client's session (docs/operating.md, "The admin API"): the node holding
    /// it reads a `kickSession` entry from the admin log, as it would one another node appended.
    /// The session must be closed 4408 at once; the client stops for good, and everything it had
    /// acknowledged stays stored (checked at the end).
    private mutating func kickSomeone() {
        let clients = self.clients
        guard clients.filter({ !$0.kicked }).count > 1,
              let id = pickLink({ !$0.clientGone && clients[$0.client].session.phase == .ready && !clients[$0.client].kicked })
        else { return }
        let n = links[id]!.node
        let c = links[id]!.client
        // A session the node is closing already (for another reason) is not kicked again.
        guard let session = nodes[n].core.sessions[id], session.closing == nil else { return }
        adminEntries += 1
        let entry = AdminEntry(
            number: adminEntries, at: nodes[n].core.wallNow,
            command: .kickSession(id: nodes[n].core.adminSessionId(id)))
        note("an operator kicks link \(id) (c\(c)) on node \(n)")
        handle(n, .adminAnswered(ServerCore.AdminCall(request: nil, work: .readLog(after: 0)), .success(.entries([entry]))))
        guard links[id] == nil || links[id]!.down.last == .close(CloseReason.kicked.code) else {
            return fail("link \(id) was kicked on node \(n) and not closed 4408")
        }
        stats.kicks += 1
    }

    /// The proxy sends the workspace's new sessions to another node from now on (a node came back
    /// or went out of its ring); the sessions on the old home stay there.
    private mutating func moveHome() {
        let next = (home + rng.int(1...(nodes.count - 1))) % nodes.count
        home = next
        note("the proxy's home of the workspace is node \(next) now")
    }

    mutating func connect(_ c: Int, to n: Int) {
        let id = nextId
        nextId += 1
        clients[c].attempt += 1
        clients[c].session.connecting(attempt: clients[c].attempt)
        let hello = clients[c].session.opened()
        var up = [hello]
        if rng.chance(0.3) {
            // Resubmitted before the Welcome, as an eager client may (the client resubmits them
            // again after it): the server defers them, then answers each seq once more from dedup.
            let format = clients[c].session.format
            for pending in clients[c].session.state.pending {
                up.append(format.encode(Tabsync_V1_ClientMessage(
                    submit: .init(seq: pending.seq, baseVersion: pending.baseVersion, op: pending.op))))
            }
        }
        for frame in up.dropFirst() { noteSent(c, frame) }
        links[id] = Link(id: id, client: c, node: n, format: clients[c].session.format, up: up)
        links[id]!.lastHeard = elapsed
        if options.keepalive != nil, rng.chance(0.15) { links[id]!.silent = true }
        note("c\(c) connects to node \(n) as link \(id)")
        clients[c].link = id
        handle(n, .connected(id, format: clients[c].session.format, echo: false))
        pumpClient(c)
    }

    // MARK: the network

    private mutating func deliverUp(_ id: ConnectionID) {
        guard let link = links[id], !link.up.isEmpty else { return }
        let frame = links[id]!.up.removeFirst()
        stats.delivered += 1
        if trace != nil, let m = try? link.format.decodeClientMessage(frame) { note("link \(id) c\(link.client) -> node \(link.node): \(m.textFormatString().replacingOccurrences(of: "\n", with: " "))") }
        if link.clientGone { stats.lateDelivered += 1 }
        links[id]!.lastHeard = elapsed
        if frame.isEmpty {
            stats.pongs += 1
            note("link \(id) c\(link.client) -> node \(link.node): pong")
            handle(link.node, .pong(id))
        } else {
            handle(link.node, .frame(id, frame, binary: !link.format.usesTextFrames))
        }
        if let link = links[id], link.clientGone, link.up.isEmpty { serverHearsClose(id) }
    }

    private mutating func deliverDown(_ id: ConnectionID) {
        guard let link = links[id], !link.down.isEmpty, spend() else { return }
        let item = links[id]!.down.removeFirst()
        stats.delivered += 1
        if trace != nil {
            switch item {
            case .frame(let bytes):
                if let m = try? link.format.decodeServerMessage(bytes) { note("link \(id) node \(link.node) -> c\(link.client): \(m.textFormatString().replacingOccurrences(of: "\n", with: " ").prefix(300))") }
            case .close(let code): note("link \(id) node \(link.node) -> c\(link.client): close \(code)")
            case .ping: note("link \(id) node \(link.node) -> c\(link.client): ping\(link.silent ? " (not answered)" : "")")
            }
        }
        let c = link.client
        switch item {
        case .frame(let bytes):
            if let close = clients[c].session.received(bytes) {
                // The client closes: the server hears of it as a closed connection.
                endLink(id, ending: ConnectionEnding(kind: .closedLocally, code: close.code, reason: close.reason))
            } else {
                pumpClient(c)
            }
        case .close(let code):
            endLink(id, ending: ConnectionEnding(kind: .closedByServer, code: code))
        case .ping:
            if !link.silent { links[id]!.up.append([]) }  // the WebSocket stack answers, behind what it sent
        }
    }

    /// The network drops a connection: what the server had queued to the client is lost, and of
    /// what the client had sent, the tail is lost and sometimes a head of 1-3 frames still reaches
    /// the server later (``Options/lateDelivery``), maybe after the client reconnected. The client
    /// learns of the drop at once; the server when it has read that head.
    private mutating func dropLink(_ id: ConnectionID) {
        stats.disconnects += 1
        if options.keepalive != nil, links[id] != nil, rng.chance(0.5) {
            // Half-open: nothing more crosses, and the server is never told; its keepalive must
            // find out (within the idle timeout + 10%, checked every tick).
            stats.halfOpen += 1
            links[id]!.up.removeAll()
            links[id]!.down.removeAll()
            links[id]!.clientGone = true
            links[id]!.halfOpen = true
            let c = links[id]!.client
            note("link \(id) c\(c) dropped half-open: the server is not told")
            if clients[c].link == id {
                clients[c].link = nil
                if case .stop = clients[c].session.closed(ConnectionEnding(kind: .lost)) { fail("c\(c) stopped for good after a lost connection") }
                pumpClient(c)
            }
            return
        }
        guard let link = links[id], !link.up.isEmpty, rng.chance(options.lateDelivery) else {
            return endLink(id, ending: ConnectionEnding(kind: .lost))
        }
        let keep = min(rng.int(1...3), link.up.count)
        links[id]!.up.removeSubrange(keep...)
        links[id]!.down.removeAll()
        links[id]!.clientGone = true
        note("link \(id) c\(link.client) node \(link.node) dropped; \(keep) sent frames still in flight to the server")
        let c = link.client
        if clients[c].link == id {
            clients[c].link = nil
            let next = clients[c].session.closed(ConnectionEnding(kind: .lost))
            if case .stop = next { fail("c\(c) stopped for good after a lost connection") }
            pumpClient(c)
        }
    }

    /// The server hears that a connection whose client end is gone has closed.
    private mutating func serverHearsClose(_ id: ConnectionID) {
        guard let link = links.removeValue(forKey: id) else { return }
        note("link \(id) c\(link.client) node \(link.node): the server hears of the drop")
        handle(link.node, .disconnected(id))
    }

    private mutating func endLink(_ id: ConnectionID, ending: ConnectionEnding) {
        guard let link = links.removeValue(forKey: id) else { return }
        note("link \(id) c\(link.client) node \(link.node) ends: \(ending)")
        let c = link.client
        if clients[c].link == id {
            clients[c].link = nil
            let next = clients[c].session.closed(ending)
            if ending.code == CloseReason.kicked.code {
                guard case .stop = next else { return fail("c\(c) was kicked and did not stop") }
                clients[c].kicked = true
            } else if case .stop = next, ending.code != 1001 {
                fail("c\(c) stopped for good after \(ending)")
            }
            pumpClient(c)
        }
        handle(link.node, .disconnected(id))
    }

    // MARK: nodes

    private mutating func tick() {
        elapsed += Self.tickLength
        holders.advance(to: elapsed)
        for n in nodes.indices {
            // Time reaches a core only at its own deadline: nothing is due in between.
            if let deadline = nodes[n].core.nextDeadline, deadline <= now {
                stats.timeouts += 1
                handle(n, .timeout)
                if let next = nodes[n].core.nextDeadline, next <= now {
                    fail("node \(n) (\(nodes[n].name)) names \(next - start) as its next deadline after a timeout at \(elapsed): "
                        + "what was due was not done")
                }
            }
            checkKeepalive(n)
            if nodes[n].core.settings.holderRegistry != nil, !nodes[n].core.isDraining,
               elapsed - nodes[n].lastBeat > Self.heartbeatInterval + Self.tickLength {
                fail("node \(n) (\(nodes[n].name)) last asked for a heartbeat at \(nodes[n].lastBeat), now \(elapsed): "
                    + "its holds would expire while it runs")
            }
        }
    }

    /// Every connection the node's core still holds open was heard from within the idle timeout +
    /// 10% (and a tick, the world's clock step); a half-open one it closed goes now.
    private mutating func checkKeepalive(_ n: Int) {
        guard let idle = options.keepalive else { return }
        for id in links.keys.sorted() where links[id]!.node == n {
            let link = links[id]!
            if link.serverClosed {
                serverHearsClose(id)
            } else if let session = nodes[n].core.sessions[id], session.closing == nil,
                      elapsed - link.lastHeard > idle * 1.1 + Self.tickLength {
                fail("node \(n) holds link \(id)\(link.halfOpen ? " (half-open)" : link.silent ? " (silent)" : "") open "
                    + "\(elapsed - link.lastHeard) after it last heard from it (idle timeout \(idle))")
            }
        }
    }

    /// A node's process dies: every connection to it drops; a store call under way was stored or
    /// not, unknown to anyone; a new core starts empty on the same store.
    private mutating func crash(_ n: Int) {
        stats.crashes += 1
        note("node \(n) crashes")
        if let call = nodes[n].storeCalls.first, case .commit(_, let batch) = call, rng.chance(0.5) {
            try? store.commitWithoutFaults(batch)
            tookStored(from: n)
        }
        for id in links.keys.sorted() where links[id]!.node == n {
            let c = links[id]!.client
            links[id] = nil
            if clients[c].link == id {
                clients[c].link = nil
                _ = clients[c].session.closed(ConnectionEnding(kind: .lost))
                pumpClient(c)
            }
        }
        harvest(n)
        nodes[n] = makeNode()
        if n == home { home = (home + 1) % nodes.count }
    }

    /// Completes the oldest store call of a node: the production ``StoreTurn`` against the
    /// simulated store (its faults drawn there) and the node's registry, then the answer to the
    /// node. What it stored goes to the oracle and is announced to the other holders.
    private mutating func completeStoreCall(_ n: Int) {
        guard !nodes[n].storeCalls.isEmpty else { return }
        let call = nodes[n].storeCalls.removeFirst()
        if trace != nil {
            switch call {
            case .commit(let id, let batch): note("node \(n) store: commit \(id) base \(batch.baseVersions) records \(batch.records.map { "\($0.clientId)#\($0.seq)" })")
            default: note("node \(n) store: \(call)")
            }
        }
        switch call {
        case .load(let id) where nodes[n].core.settings.holderRegistry != nil && !nodes[n].held.contains(id):
            fail("node \(n) (\(nodes[n].name)) reads \(id) without having registered as its holder first")
        case .commit:
            stats.commits += 1
        case .checkHolders:
            stats.holderChecks += 1
        default:
            break
        }
        let answer = turn(n).answer(call)
        tookStored(from: n)
        switch (call, answer) {
        case (.hold(let id), .held(_, .success)?):
            nodes[n].held.insert(id)
        case (.release(let id), _):
            nodes[n].held.remove(id)
        case (.commit(let batchId, _), .committed(_, .behind(let reads), _)?):
            stats.behind += 1
            note("node \(n) batch \(batchId) behind \(reads.keys.sorted())")
        case (.checkHolders(let id), .holdersChecked(_, let newer)?):
            let (name, live) = (nodes[n].name, holders.liveHolders(of: id))
            note("node \(n) (\(name)) checks holders of \(id): newer \(newer) (live \(live))")
        default:
            break
        }
        if let answer { handle(n, answer) }
    }

    /// Node `n`'s store turn: the simulated store, and with several nodes its registry handle.
    func turn(_ n: Int) -> StoreTurn {
        let instant = now
        let registry = options.nodes > 1 ? SimulatedRegistry(base: registry(n), store: store) : nil
        return StoreTurn(store: store, holders: registry, clock: { instant })
    }

    /// The batches the store accepted in the last turn: the oracle checks each, and each is
    /// announced to the other holders (a commit whose answer was lost notifies all the same).
    private mutating func tookStored(from n: Int) {
        for batch in store.takeStored() {
            for problem in oracle.stored(batch) { fail(problem) }
            announce(batch, from: n)
        }
    }

    /// A stored commit is announced to every other live node the holder registry names as a holder
    /// of the workspace (PostgreSQL's `pg_notify` to the holders only); nodes not registered learn
    /// of it by their poll.
    private mutating func announce(_ batch: CommitBatch, from n: Int) {
        guard let version = batch.workspaces[workspace]?.version else { return }
        for name in holders.liveHolders(of: workspace) where name != nodes[n].name {
            stats.notified += 1
            feed.append((name, version))
        }
    }

    /// The commit feed delivers the oldest announcement, if its node's life is still running.
    private mutating func tellFeed() {
        guard !feed.isEmpty else { return }
        let (to, version) = feed.removeFirst()
        guard let n = nodes.firstIndex(where: { $0.name == to }) else { return }
        handle(n, .heard(.committed(CommitNotification(workspaceId: workspace, version: version))))
    }

    /// Hands one event to a node's core and carries out its actions.
    mutating func handle(_ n: Int, _ event: ServerCore.Event) {
        guard spend() else { return }
        var actions: [ServerCore.Action] = []
        nodes[n].core.handle(event, now: now, into: &actions)
        handling = event
        defer { handling = nil }
        for action in actions { perform(n, action) }
    }

    private mutating func perform(_ n: Int, _ action: ServerCore.Action) {
        switch action {
        case .send(let id, let message):
            guard let link = links[id] else { return }
            guard !link.clientGone else { return }
            if case .welcome(let welcome)? = message.message {
                links[id]!.welcomedAt = welcome.recovered ? (welcome.missed.last?.version ?? 0) : welcome.snapshot.version
            }
            links[id]!.down.append(.frame(link.format.encode(message)))
        case .broadcast(let ids, let message):
            for id in ids {
                guard let link = links[id], !link.clientGone else { continue }
                if case .applied(let applied)? = message.message, let welcomedAt = link.welcomedAt,
                   applied.version <= welcomedAt {
                    fail("session \(id) was sent Applied v\(applied.version) after its Welcome at v\(welcomedAt)")
                }
                links[id]!.down.append(.frame(link.format.encode(message)))
            }
        case .close(let id, let reason, _):
            if reason.code == CloseReason.moved.code { checkMove(n, id) }
            if reason == .idleTimeout, let link = links[id] {
                stats.idleCloses += 1
                if let idle = options.keepalive, elapsed - link.lastHeard < idle {
                    fail("node \(n) closed link \(id) for silence \(elapsed - link.lastHeard) after it last heard from it (idle timeout \(idle))")
                }
                if link.clientGone { links[id]!.serverClosed = true }  // the driver drops the socket
            }
            guard let link = links[id], !link.clientGone else { return }
            if !reason.flushesQueue { links[id]!.down.removeAll() }
            links[id]!.down.append(.close(reason.code))
        case .release(let id):
            nodes[n].lastCheck[id] = nil  // unloaded: a later load is a new holder, checked afresh
            nodes[n].storeCalls.append(action)
        case .commit:
            if case .timeout? = handling { stats.lingerWakes += 1 }  // only a lingering batch waits for a deadline
            nodes[n].storeCalls.append(action)
        case .load, .readChanges, .pollVersions, .hold, .admin, .readHistory:
            nodes[n].storeCalls.append(action)
        case .heartbeat:
            nodes[n].lastBeat = elapsed
            nodes[n].storeCalls.append(action)
        case .checkHolders(let id):
            checkHolderCheck(n, id)
            nodes[n].storeCalls.append(action)
        case .ping(let id):
            stats.pings += 1
            guard let link = links[id], !link.clientGone else { return }
            links[id]!.down.append(.ping)
        case .echo, .verifyToken, .respond, .stop:
            break
        }
    }

    // MARK: invariants

    /// A check for a newer holder goes at most once per ``Settings/moveCheckInterval`` per
    /// workspace while it stays loaded, and only from a timeout: after its random pause, never at
    /// the moment the other node's ops were taken.
    private mutating func checkHolderCheck(_ n: Int, _ id: String) {
        // Decided at most once per interval, each going after a pause of up to holderCheckPause.
        if let last = nodes[n].lastCheck[id], elapsed - last < Self.moveCheckInterval - Self.holderCheckPause {
            fail("node \(n) (\(nodes[n].name)) checks the holders of \(id) at \(elapsed), again since \(last)")
        }
        nodes[n].lastCheck[id] = elapsed
        if case .timeout? = handling {} else {
            fail("node \(n) checks the holders of \(id) while handling \(handling.map { "\($0)".prefix(40) } ?? "nothing"), "
                + "not after its pause at a timeout")
        }
    }

    /// A session is closed "moved" only when the registry just answered that a newer holder of its
    /// workspace exists.
    private mutating func checkMove(_ n: Int, _ id: ConnectionID) {
        guard case .holdersChecked(_, true)? = handling else {
            return fail("node \(n) closes session \(id) moved while handling \(handling.map { "\($0)".prefix(60) } ?? "nothing"), "
                + "not a registry answer that a newer holder exists")
        }
    }

    /// After every step: no session's deferred messages past their bound, no session the core
    /// holds for a connection that is gone at the core.
    private mutating func checkStep() {
        for n in nodes.indices {
            for (id, session) in nodes[n].core.sessions where session.deferred.count > SessionMachine.maxDeferredMessages {
                fail("node \(n) session \(id) holds \(session.deferred.count) deferred messages")
            }
            let open = links.values.filter { $0.node == n }.count
            if nodes[n].core.sessions.count > open {
                fail("node \(n) holds \(nodes[n].core.sessions.count) sessions for \(open) connections")
            }
        }
    }

    /// Faults off: every client connects, everything is delivered and stored, time passes; then
    /// the end state is checked against the store.
    mutating func finish() {
        store.faults = false
        for round in 0..<Self.settleRounds where !overBudget {
            var moved = false
            for c in clients.indices where clients[c].link == nil && clients[c].session.phase != .closed {
                connect(c, to: options.split ? c % nodes.count : home)
                moved = true
            }
            // Each round moves what was queued when it began (and, on a link, the answers to it):
            // what that causes waits for the next round, so a world that loops (a commit that
            // keeps coming back behind, two ends that keep answering each other) runs out of
            // rounds, 50 ms of virtual time each, instead of spinning inside one.
            for id in links.keys.sorted() {
                guard let link = links[id] else { continue }
                for _ in 0..<(2 * (link.up.count + link.down.count)) where !overBudget {
                    guard links[id] != nil, !links[id]!.up.isEmpty || !links[id]!.down.isEmpty else { break }
                    // Keepalive traffic (pings, pongs) goes on whatever happens: it moves nothing.
                    if !Self.isKeepalive(links[id]!) { moved = true }
                    if !links[id]!.up.isEmpty { deliverUp(id) }
                    if links[id] != nil && !links[id]!.down.isEmpty { deliverDown(id) }
                }
            }
            for n in nodes.indices {
                for _ in 0..<nodes[n].storeCalls.count where !overBudget {
                    if !Self.isPeriodic(nodes[n].storeCalls[0]) { moved = true }
                    completeStoreCall(n)
                }
            }
            for _ in 0..<feed.count where !overBudget {
                tellFeed()
                moved = true
            }
            tick()
            if !moved && round > 40 && settled() { break }
            if round == Self.settleRounds - 1 && !settled() {
                return fail("the world did not settle within \(Self.settleRounds) rounds (\(elapsed) of virtual time); "
                    + "waiting for: \(describeUnsettled())")
            }
        }
        if overBudget || !settled() { return }
        checkEnd()
    }

    private func settled() -> Bool {
        clients.allSatisfy { c in
            c.kicked || (c.session.phase == .ready && c.session.state.pending.isEmpty && c.session.state.unsequenced == 0)
        } && links.values.allSatisfy(Self.isKeepalive)
            && nodes.allSatisfy { $0.storeCalls.allSatisfy(Self.isPeriodic) }
    }

    /// Nothing but keepalive traffic (or nothing at all) is in flight on the link: it goes on on the
    /// nodes' clocks whatever happens.
    static func isKeepalive(_ link: Link) -> Bool {
        link.up.allSatisfy(\.isEmpty) && link.down.allSatisfy { $0 == .ping }
    }

    /// Store calls a node makes on its clock whatever happens (heartbeats, polls): a world whose
    /// only calls left are these has settled. What a poll finds goes on in calls that are not.
    static func isPeriodic(_ action: ServerCore.Action) -> Bool {
        switch action {
        case .heartbeat, .pollVersions: true
        default: false
        }
    }

    /// The end: every acknowledged op is in the log exactly once; per-client seq order holds;
    /// versions have no gaps; every client holds the store's workspace. The store's log keeps only
    /// its window (`logRetention`), so the whole history is read from the batches it accepted
    /// (``RuleOracle``), and the log must be their tail.
    private mutating func checkEnd() {
        for n in nodes.indices {
            // What a node unloaded it released: its registrations are what it holds in memory.
            let registered = holders.registrations(of: nodes[n].name)
            let inMemory = nodes[n].core.workspaces.ids
            for id in registered.sorted() where !inMemory.contains(id) {
                fail("node \(n) (\(nodes[n].name)) is still registered as a holder of \(id), which it unloaded")
            }
        }
        let stored = try? store.base.load(workspaceId: workspace)
        let log = stored?.log ?? []
        let final = stored?.workspace ?? Workspace(id: workspace, epoch: store.epoch)
        let first = log.first?.version ?? final.version + 1
        for (i, op) in log.enumerated() where op.version != first + UInt64(i) {
            return fail("log version \(op.version) at position \(i + 1) after v\(first): a gap or a version written twice")
        }
        if log.count < min(options.logRetention, Int(final.version)) || (log.last?.version ?? 0) != final.version {
            fail("log holds v\(first)...v\(log.last?.version ?? 0) for version \(final.version) (retention \(options.logRetention))")
        }
        if oracle.current != final {
            fail("the store holds v\(final.version) \(final.tabs.map(\.id)), its accepted batches make "
                + "v\(oracle.current.version) \(oracle.current.tabs.map(\.id))")
        }
        if log != Array(oracle.log.suffix(log.count)) { fail("the store's log is not the tail of the ops its batches brought") }
        for (c, client) in clients.enumerated() {
            for (seq, version) in client.acked.sorted(by: { $0.key < $1.key })
            where oracle.appliedAt[RuleOracle.ClientSeq(client: "c\(c)", seq: seq)] != version {
                fail("c\(c) seq \(seq) acknowledged at v\(version) is not stored there")
            }
            let confirmed = client.session.state.confirmed
            if !client.kicked && confirmed != final {
                fail("c\(c) holds v\(confirmed.version) \(confirmed.tabs.map(\.id)), the store v\(final.version) \(final.tabs.map(\.id))")
            }
        }
    }

    /// What keeps the world from settling: clients not ready or with ops pending, frames still in
    /// flight, store calls not answered, commits not yet told to the other nodes.
    func describeUnsettled() -> String {
        var parts = clients.enumerated().compactMap { c, client -> String? in
            let pending = client.session.state.pending.map(\.seq)
            guard client.session.phase != .ready || !pending.isEmpty || client.session.state.unsequenced > 0 else { return nil }
            return "c\(c) \(client.session.phase) pending \(pending)"
        }
        for id in links.keys.sorted() where !links[id]!.up.isEmpty || !links[id]!.down.isEmpty {
            let link = links[id]!
            parts.append("link \(id) (c\(link.client), node \(link.node)) \(link.up.count) up \(link.down.count) down")
        }
        for n in nodes.indices {
            for (id, session) in nodes[n].core.sessions.sorted(by: { $0.key < $1.key })
            where session.historyHold || !session.deferred.isEmpty {
                parts.append("node \(n) session \(id) \(session.historyHold ? "waits for a history read" : "") "
                    + "\(session.deferred.count) messages deferred")
            }
        }
        for n in nodes.indices where !nodes[n].storeCalls.isEmpty {
            parts.append("node \(n) \(nodes[n].storeCalls.count) store calls (first \(Self.name(nodes[n].storeCalls[0])))")
        }
        if !feed.isEmpty { parts.append("\(feed.count) commits not yet told") }
        if stats.behind > 0 { parts.append("(\(stats.behind) batches came back behind so far)") }
        return parts.isEmpty ? "nothing (settled)" : parts.joined(separator: ", ")
    }

    static func name(_ action: ServerCore.Action) -> String {
        switch action {
        case .commit(let id, let batch): "commit \(id) of \(batch.records.count) records"
        case .load(let id): "load \(id)"
        case .hold(let id): "hold \(id)"
        case .checkHolders(let id): "check holders of \(id)"
        case .heartbeat: "heartbeat"
        case .readChanges(let versions): "read changes after \(versions)"
        case .pollVersions: "poll"
        default: "\(action)".prefix(60).description
        }
    }
}
