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
    /// Admin-log entries made so far (their numbers count up), and the revocations among them
    /// (every node, and every new life of a node, has read them).
    var adminEntries: Int64 = 0
    var adminLog: [AdminEntry] = []
    /// Deletes an operator asked for (at most one a world).
    var deletes = 0
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
    /// HTTP writes made so far (SimulatedWorld+HTTPWrites.swift).
    var httpWrites: [SimWrite] = []

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
    /// The sessions whose close the node handling ``handling`` held for their answers before it.
    var heldBefore: Set<ConnectionID> = []

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
        oracle = RuleOracle(
            workspace: Workspace(id: workspace, epoch: store.epoch), limits: Self.limits(self.options),
            ratesLimited: self.options.opsPerSecondPerSub != nil)
        for _ in 0..<self.options.nodes { nodes.append(makeNode()) }
        for c in 0..<self.options.clients {
            var session = Session(
                workspaceId: workspace, clientId: "c\(c)", clientName: "client \(c)",
                token: self.options.accessControl ? Self.token(of: c) : "",
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
        settings.accessControl = options.accessControl
        settings.quotas = .init(maxOpsPerSecondPerSubject: options.opsPerSecondPerSub)
        settings.nodeName = "node\(lives)"
        settings.adminLog = adminLog  // a new life reads the log at start: the revocations in force
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

    mutating func randomStep() {
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
            options.accessControl ? 15 : 0,  // an operator revokes a client's token
            options.accessControl && options.nodes == 1 ? 25 : 0,  // an operator deletes the workspace (once)
            options.accessControl ? 0 : 400,  // an HTTP writer sends a write, or the same again
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
        case 10: kickSomeone()
        case 11: revokeSomeone()
        case 12: deleteWorkspace()
        default: httpWriteStep()
        }
    }

    mutating func pickLink(_ where: (Link) -> Bool) -> ConnectionID? {
        let ids = links.keys.sorted().filter { `where`(links[$0]!) }
        return ids.isEmpty ? nil : rng.pick(ids)
    }
}
