import Logging
import SwiftProtobuf
import TabsyncCore
import TabsyncProto
import TabsyncStore
import TabsyncTestSupport
@testable import TabsyncClient
@testable import TabsyncServerCore

/// The simulated nodes: each a real `ServerCore` with its store turns, crashes, the holder
/// registry, the commit feed and the proxy moving the home node.
extension SimulatedWorld {
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

    mutating func tick() {
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

    /// A node's process dies: every connection to it drops; a store call under way was stored or
    /// not, unknown to anyone; a new core starts empty on the same store.
    mutating func crash(_ n: Int) {
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
        writesLost(at: n)
        nodes[n] = makeNode()
        if n == home { home = (home + 1) % nodes.count }
    }

    /// Completes the oldest store call of a node: the production ``StoreTurn`` against the
    /// simulated store (its faults drawn there) and the node's registry, then the answer to the
    /// node. What it stored goes to the oracle and is announced to the other holders.
    mutating func completeStoreCall(_ n: Int) {
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
        let answer: ServerCore.Event?
        if case .verifyToken(let request, let token) = call {
            // The world's verifier: every client's token checks out (a revoked one is the core's
            // to refuse, from the admin log it read), and the operator's.
            if token == Self.operatorToken {
                let grant = AccessGrant(
                    subject: "operator", workspaces: WorkspacePattern("*")!, role: .admin,
                    expiresAt: nodes[n].core.wallNow.addingTimeInterval(86_400))
                answer = .tokenVerified(request, .success(grant))
            } else if let c = clients.indices.first(where: { Self.token(of: $0) == token }) {
                answer = .tokenVerified(request, .success(Self.grant(of: c, at: nodes[n].core.wallNow)))
            } else {
                return fail("node \(n) asked to verify a token no client holds")
            }
        } else {
            answer = turn(n).answer(call)
        }
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
        if case .admin(let admin) = call, case .delete = admin.work, case .adminAnswered(_, .success(.deleted(true)))? = answer {
            workspaceDeleted(on: n)
        }
        if let answer { handle(n, answer) }
    }

    /// Node `n`'s store turn: the simulated store, and with several nodes its registry handle.
    func turn(_ n: Int) -> StoreTurn {
        let instant = now
        let registry = options.nodes > 1 ? SimulatedRegistry(base: registry(n), store: store) : nil
        return StoreTurn(stores: StoreCapabilities(withoutWebhooks: store), holders: registry, clock: { instant })
    }

    /// The batches the store accepted in the last turn: the oracle checks each, and each is
    /// announced to the other holders (a commit whose answer was lost notifies all the same).
    mutating func tookStored(from n: Int) {
        for batch in store.takeStored() {
            for problem in oracle.stored(batch) { fail(problem) }
            announce(batch, from: n)
        }
    }

    /// A stored commit is announced to every other live node the holder registry names as a holder
    /// of the workspace (PostgreSQL's `pg_notify` to the holders only); nodes not registered learn
    /// of it by their poll.
    mutating func announce(_ batch: CommitBatch, from n: Int) {
        guard let version = batch.workspaces[workspace]?.version else { return }
        for name in holders.liveHolders(of: workspace) where name != nodes[n].name {
            stats.notified += 1
            feed.append((name, version))
        }
    }

    /// The commit feed delivers the oldest announcement, if its node's life is still running.
    mutating func tellFeed() {
        guard !feed.isEmpty else { return }
        let (to, version) = feed.removeFirst()
        guard let n = nodes.firstIndex(where: { $0.name == to }) else { return }
        handle(n, .heard(.committed(CommitNotification(workspaceId: workspace, version: version))))
    }

    /// Hands one event to a node's core and carries out its actions.
    mutating func handle(_ n: Int, _ event: ServerCore.Event) {
        guard spend() else { return }
        var actions: [ServerCore.Action] = []
        heldBefore = Set(nodes[n].core.heldCloses.keys)
        nodes[n].core.handle(event, now: now, into: &actions)
        handling = event
        defer { handling = nil }
        for action in actions { perform(n, action) }
    }

    mutating func perform(_ n: Int, _ action: ServerCore.Action) {
        switch action {
        case .send(let id, let message):
            guard let link = links[id] else { return }
            guard !link.clientGone else { return }
            if case .welcome? = message.message, clients[link.client].revoked {
                fail("node \(n) welcomed session \(id) of c\(link.client), whose token was revoked")
            }
            if case .rejected(let rejected)? = message.message, ErrorCode(rejected.code) == .rateLimited {
                stats.quotaRefusals += 1
            }
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
            // Any close of a half-open connection: the driver drops the socket, and the server hears
            // of it on the next tick (a delete's 4410 waits for that to drain the workspace).
            if let link = links[id], link.halfOpen { links[id]!.serverClosed = true }
            // The server sends a pending answer before any close (docs/design.md, "Close codes").
            if reason.waitsForAnswers, nodes[n].core.commits.owesAnswer(to: id) {
                fail("node \(n) closes session \(id) \(reason.code) while an answer it owes the session waits in the pipeline")
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
        case .verifyToken:
            nodes[n].storeCalls.append(action)  // answered in turn, as the driver's verifier does off the loop
        case .respond(let request, let response):
            if writeAnswered(n, request, response) { return }
            if case .adminRequested? = handling, response.status != 200 { fail("node \(n) answered the operator's delete \(response.status)") }
        case .echo, .stop, .feedOpen, .feedWrite, .feedClose:
            break  // the simulated worlds open no change feed (FeedRuleTests and Tests/thirdparty/test_feed.py do)
        }
    }
}
