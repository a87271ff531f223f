import Testing
import TabsyncCore

/// docs/design.md's worked examples (section "Ordering rules"), each played by real
/// `Replica` clients that compute their keys from what they see, against the server's `Sequencer`,
/// in every arrival order the example states. Every replica and the server must end with exactly the
/// stated list (and active tab, and answer). (The server's sessions around the `Sequencer` are the
/// real core's, simulated in `Tests/TabsyncServerCoreTests`.)
@Suite struct WorkedExampleTests {
    /// Three replicas and the server's sequencer; each client's Submits wait in flight until the
    /// server reads them, and every answer reaches the clients after the reads of one arrival.
    struct Table {
        var server = Sequencer(workspace: Workspace(id: "w", epoch: "e1"), limits: .default)
        var clients = (1...3).map { Replica(clientId: "c\($0)", workspace: Workspace(id: "w", epoch: "e1")) }
        var inFlight: [[Replica.PendingOp]] = [[], [], []]
        /// Per client, the answer to each seq: nil when applied, the code when refused.
        var answers: [[UInt64: ErrorCode?]] = [[:], [:], [:]]

        @discardableResult
        mutating func submit(_ i: Int, _ op: Operation) -> Replica.PendingOp {
            let p = clients[i].submit(op)
            inFlight[i].append(p)
            return p
        }

        /// The server reads the in-flight ops of the clients in `order`; then every client gets the
        /// applied ops, in order, and each submitter its refusals.
        mutating func arrive(_ order: [Int]) {
            var applied: [AppliedOp] = []
            var refused: [(client: Int, seq: UInt64, code: ErrorCode)] = []
            for i in order {
                for p in inFlight[i] {
                    switch server.submit(clientId: clients[i].clientId, seq: p.seq, baseVersion: p.baseVersion, op: p.op) {
                    case .applied(let ops): applied += ops
                    case .rejected(let error): refused.append((i, p.seq, error.code))
                    case let other: Issue.record("seq \(p.seq) of c\(i + 1) was \(other)")
                    }
                }
                inFlight[i] = []
            }
            for op in applied {
                for i in clients.indices {
                    #expect(clients[i].receive(applied: op) == .applied, "c\(i + 1) v\(op.version)")
                    if op.clientId == clients[i].clientId { answers[i][op.seq] = .some(nil) }
                }
            }
            for r in refused {
                #expect(clients[r.client].receive(rejectedSeq: r.seq) != nil)
                answers[r.client][r.seq] = r.code
            }
        }

        /// Every client's ops arrive, client 0's first.
        mutating func flush() { arrive(Array(clients.indices)) }
    }

    /// Client 0 sets up `tabs` (in order, each appended after the last it sees), optionally activates
    /// one, and everyone syncs. Clients 1 and 2 play the example.
    static func cluster(tabs: [String], active: String? = nil) -> Table {
        var sim = Table()
        for id in tabs {
            let last = sim.clients[0].optimistic.tabs.last?.key
            sim.submit(0, .add(tab: Tab(id: id, title: id), place: .key(PositionKey.between(last, nil)), activate: false))
        }
        if let active { sim.submit(0, .activate(.tabId(active))) }
        sim.flush()
        return sim
    }

    /// What client `i` sees.
    static func view(_ sim: Table, _ i: Int) -> Workspace { sim.clients[i].optimistic }

    static func key(_ w: Workspace, _ id: String) -> String { w.tab(id)!.key }

    /// The server reads the in-flight ops of the clients in `order`, then everything is delivered;
    /// checks the server and every replica (confirmed and optimistic) show `expected`, nothing is
    /// pending, and the server's state keeps the invariants.
    static func arrive(_ sim: inout Table, order: [Int], expect expected: [String], active: String? = nil,
                       sourceLocation: SourceLocation = #_sourceLocation) {
        sim.arrive(order)
        #expect(sim.server.workspace.invariantViolations(limits: .default).isEmpty, sourceLocation: sourceLocation)
        #expect(sim.server.workspace.tabs.map(\.id) == expected, "server, order \(order)", sourceLocation: sourceLocation)
        for c in sim.clients {
            #expect(c.pending.isEmpty, "\(c.clientId) pending", sourceLocation: sourceLocation)
            #expect(c.confirmed == sim.server.workspace, "\(c.clientId) confirmed, order \(order)", sourceLocation: sourceLocation)
            #expect(c.optimistic.tabs.map(\.id) == expected, "\(c.clientId) optimistic, order \(order)", sourceLocation: sourceLocation)
        }
        if let active { #expect(sim.server.workspace.activeTabId == active, sourceLocation: sourceLocation) }
    }

    static let bothOrders = [[1, 2], [2, 1]]

    /// `[A B C D]`: client 1 moves D to the front (key before A's); client 2 adds E with a key between
    /// B's and C's → `[D A B E C]`, either order.
    @Test(arguments: bothOrders)
    func moveToFrontAndAddBetweenGiveDABEC(order: [Int]) {
        var sim = Self.cluster(tabs: ["A", "B", "C", "D"])
        let v1 = Self.view(sim, 1)
        sim.submit(1, .move(tabId: "D", place: .key(PositionKey.between(nil, Self.key(v1, "A")))))
        let v2 = Self.view(sim, 2)
        sim.submit(2, .add(tab: Tab(id: "E"), place: .key(PositionKey.between(Self.key(v2, "B"), Self.key(v2, "C"))), activate: false))
        Self.arrive(&sim, order: order, expect: ["D", "A", "B", "E", "C"])
    }

    /// `[A B C D]`: client 1 moves A after D; client 2 moves D before A → `[D B C A]`, either order.
    @Test(arguments: bothOrders)
    func crossingMovesGiveDBCA(order: [Int]) {
        var sim = Self.cluster(tabs: ["A", "B", "C", "D"])
        let v1 = Self.view(sim, 1)
        sim.submit(1, .move(tabId: "A", place: .key(PositionKey.between(Self.key(v1, "D"), nil))))
        let v2 = Self.view(sim, 2)
        sim.submit(2, .move(tabId: "D", place: .key(PositionKey.between(nil, Self.key(v2, "A")))))
        Self.arrive(&sim, order: order, expect: ["D", "B", "C", "A"])
    }

    /// `[A B C D]`: client 1 moves C between A and B; client 2 moves A after D → `[C B D A]`, either order.
    @Test(arguments: bothOrders)
    func moveBetweenAndMoveToEndGiveCBDA(order: [Int]) {
        var sim = Self.cluster(tabs: ["A", "B", "C", "D"])
        let v1 = Self.view(sim, 1)
        sim.submit(1, .move(tabId: "C", place: .key(PositionKey.between(Self.key(v1, "A"), Self.key(v1, "B")))))
        let v2 = Self.view(sim, 2)
        sim.submit(2, .move(tabId: "A", place: .key(PositionKey.between(Self.key(v2, "D"), nil))))
        Self.arrive(&sim, order: order, expect: ["C", "B", "D", "A"])
    }

    /// `[A B C]`, B active: client 1 removes B, then client 2's move of B to the front arrives →
    /// `[A C]`, C active, client 2 gets `Rejected TAB_GONE`.
    @Test func removeWinsOverALaterMoveAndTheRightNeighbourBecomesActive() {
        var sim = Self.cluster(tabs: ["A", "B", "C"], active: "B")
        #expect(Self.view(sim, 1).activeTabId == "B")
        sim.submit(1, .remove(tabId: "B"))
        let v2 = Self.view(sim, 2)
        let move = sim.submit(2, .move(tabId: "B", place: .key(PositionKey.between(nil, Self.key(v2, "A")))))
        Self.arrive(&sim, order: [1, 2], expect: ["A", "C"], active: "C")
        #expect(sim.answers[2][move.seq] == .some(.tabGone))
    }

    /// `[A B C]`: clients 1 and 2 both add a tab with the same key between A's and B's (X, then Y) →
    /// `[A X Y B C]`; Y's Applied carries its new key.
    @Test func equalKeysInOneGapGiveAXYBC() {
        var sim = Self.cluster(tabs: ["A", "B", "C"])
        let v1 = Self.view(sim, 1)
        let keyX = PositionKey.between(Self.key(v1, "A"), Self.key(v1, "B"))
        sim.submit(1, .add(tab: Tab(id: "X"), place: .key(keyX), activate: false))
        let v2 = Self.view(sim, 2)
        let keyY = PositionKey.between(Self.key(v2, "A"), Self.key(v2, "B"))
        #expect(keyX == keyY, "both clients see the same gap, so compute the same key")
        sim.submit(2, .add(tab: Tab(id: "Y"), place: .key(keyY), activate: false))
        Self.arrive(&sim, order: [1, 2], expect: ["A", "X", "Y", "B", "C"])
        guard case .add(let y, _, _) = sim.server.log.last?.op else {
            Issue.record("the last applied op is not Y's add")
            return
        }
        #expect(y.id == "Y" && y.key != keyY && PositionKey.less(keyX, y.key))
    }
}
