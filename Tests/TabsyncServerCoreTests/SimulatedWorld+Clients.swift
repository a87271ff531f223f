import Foundation
import Logging
import SwiftProtobuf
import TabsyncCore
import TabsyncProto
import TabsyncStore
import TabsyncTestSupport
@testable import TabsyncClient
@testable import TabsyncServerCore

/// The simulated clients: real TabsyncClient `Session`s making seeded ops, history reads and
/// reconnects, and an operator kicking them.
extension SimulatedWorld {
    struct SimClient {
        var session: Session
        var link: ConnectionID?
        var attempt = 0
        /// Seqs this client saw acknowledged (its own `Applied`) and refused, with their versions,
        /// and the epoch each acknowledged op was applied in (an operator's delete erases the
        /// history before it).
        var acked: [UInt64: UInt64] = [:]
        var ackedEpoch: [UInt64: String] = [:]
        var refused: Set<UInt64> = []
        var madeTabs = 0
        /// An operator kicked it (4408), or revoked its token (4401): it stopped for good, as a
        /// real client does, and takes no further part; what it had acknowledged must still be stored.
        var kicked = false
        var revoked = false
        /// Its session was closed 4410: an operator deleted the workspace; it stopped for good.
        var deleted = false
        var stopped: Bool { kicked || revoked || deleted }
    }

    /// Client `c`'s token (with ``Options/accessControl``): the world's verifier takes it to
    /// ``grant(of:at:)``.
    static func token(of c: Int) -> String { "token-c\(c)" }

    /// What client `c`'s token grants: one of two subs (so a sub's quota is shared by sessions of
    /// several clients), every op on every workspace, for a day, under its own `jti`.
    static func grant(of c: Int, at now: Date) -> AccessGrant {
        AccessGrant(
            subject: "user\(c % 2)", workspaces: WorkspacePattern("*")!, role: .admin,
            expiresAt: now.addingTimeInterval(86_400), tokenId: "jti-c\(c)", issuedAt: nil)
    }

    mutating func clientOp(_ c: Int) {
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
    mutating func noteSent(_ c: Int, _ frame: [UInt8]) {
        guard let message = try? clients[c].session.format.decodeClientMessage(frame),
              case .submit(let submit)? = message.message else { return }
        let op = submit.hasOp ? try? TabsyncCore.Operation(submit.op) : nil
        if let problem = oracle.sent(client: "c\(c)", seq: submit.seq, baseVersion: submit.baseVersion, op: op) { fail(problem) }
    }

    /// Moves what the client queued onto its connection, and reads its events.
    mutating func pumpClient(_ c: Int) {
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
                clients[c].ackedEpoch[op.seq] = clients[c].session.state.confirmed.epoch
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
    mutating func checkHistory(_ c: Int, _ answer: Tabsync_V1_HistoryAnswer) {
        guard !answer.hasError else { return }  // a failed read (the store's faults) says so
        // An answer about a history an operator's delete erased since is not checked against the new one.
        guard clients[c].session.state.confirmed.epoch == oracle.current.epoch else { return }
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
    mutating func connectSomeone() {
        let idle = clients.indices.filter { clients[$0].link == nil && clients[$0].session.phase != .closed }
        guard !idle.isEmpty else { return }
        let c = rng.pick(idle)
        connect(c, to: options.split && rng.chance(0.5) ? rng.int(0...(nodes.count - 1)) : home)
    }

    /// An operator kicks one client's session (docs/operating.md, "The admin API"): the node holding
    /// it reads a `kickSession` entry from the admin log, as it would one another node appended.
    /// The session must be closed 4408 at once; the client stops for good, and everything it had
    /// acknowledged stays stored (checked at the end).
    mutating func kickSomeone() {
        let clients = self.clients
        guard clients.filter({ !$0.stopped }).count > 1,
              let id = pickLink({ !$0.clientGone && clients[$0.client].session.phase == .ready && !clients[$0.client].stopped })
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
        let held = nodes[n].core.heldCloses[id] != nil && nodes[n].core.sessions[id]?.closing == .kicked
        guard held || links[id] == nil || links[id]!.down.last == .close(CloseReason.kicked.code) else {
            return fail("link \(id) was kicked on node \(n) and not closed 4408")
        }
        stats.kicks += 1
    }

    /// An operator revokes one client's token (docs/operating.md, "The admin API"): every node
    /// reads the entry from the admin log (and every later life of a node reads it at start). Each
    /// session of that token must be closed 4401 at once and no later one admitted; the client
    /// stops for good, and everything it had acknowledged stays stored (checked at the end).
    mutating func revokeSomeone() {
        let live = clients.indices.filter { !clients[$0].stopped }
        guard options.accessControl, live.count > 1 else { return }
        let c = rng.pick(live)
        adminEntries += 1
        let entry = AdminEntry(number: adminEntries, at: nodes[home].core.wallNow, command: .revokeToken(jti: "jti-c\(c)"))
        adminLog.append(entry)
        clients[c].revoked = true
        stats.revocations += 1
        note("an operator revokes c\(c)'s token")
        for n in nodes.indices {
            handle(n, .adminAnswered(ServerCore.AdminCall(request: nil, work: .readLog(after: 0)), .success(.entries([entry]))))
            for id in links.keys.sorted() where links[id]!.node == n && links[id]!.client == c && !links[id]!.clientGone {
                // A session whose token is still being checked is refused when the check comes back.
                guard let session = nodes[n].core.sessions[id], session.closing == nil, session.access != nil else { continue }
                fail("node \(n) read the revocation of c\(c)'s token and left its session \(id) open")
            }
        }
    }

    /// The operator's token: the world's verifier grants it the admin API on every workspace.
    static let operatorToken = "operator-token"

    /// An operator deletes the workspace through the admin API of its home node (docs/operating.md,
    /// "The admin API"), once per world, in worlds of one node with access control: its sessions
    /// are closed 4410 at once and their clients stop for good; the store delete goes once nothing
    /// of it is left in the commit pipeline, and the workspace starts again at version 0 under a
    /// new epoch for the clients that were not connected (their pending ops go to the new history).
    mutating func deleteWorkspace() {
        guard options.accessControl, options.nodes == 1, deletes == 0 else { return }
        deletes += 1
        let n = home
        note("an operator deletes the workspace on node \(n)")
        handle(n, .adminRequested(RequestID(deletes), .deleteWorkspace(workspace), bearerToken: Self.operatorToken))
    }

    /// The store deleted the workspace: the history the oracle follows starts again at the new
    /// epoch, and no session of the old one may be left open.
    mutating func workspaceDeleted(on n: Int) {
        guard let stored = try? store.base.load(workspaceId: workspace) else { return fail("the deleted workspace left nothing behind") }
        guard stored.workspace.version == 0, stored.workspace.epoch != oracle.current.epoch else {
            return fail("the deleted workspace is at v\(stored.workspace.version) epoch \(stored.workspace.epoch), not a new epoch at v0")
        }
        // The store delete goes only after the workspace drained: no session of it is left open.
        for (id, session) in nodes[n].core.sessions where session.workspaceId == workspace && session.closing == nil {
            if case .joined = session.phase { return fail("node \(n) deleted the workspace with session \(id) still joined to it") }
        }
        stats.deletes += 1
        note("the store deleted the workspace; new epoch \(stored.workspace.epoch)")
        oracle.restart(at: stored.workspace)
        // What clients sent that is still on its way may be consumed in the new history.
        for id in links.keys.sorted() {
            for frame in links[id]!.up { noteSent(links[id]!.client, frame) }
        }
    }

    /// The proxy sends the workspace's new sessions to another node from now on (a node came back
    /// or went out of its ring); the sessions on the old home stay there.
    mutating func moveHome() {
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
}
