import Testing
import TabsyncClient
import TabsyncCore
import TabsyncTestServer

/// The worked examples of docs/design.md ('Ordering rules') played by two real clients over real
/// sockets against the real server. Each client computes its op from the workspace it sees before
/// either op arrives; the ops then reach the server in each stated order ("then" = arrival order),
/// or race.
@Suite(.serialized) struct WorkedExamplesOverSocketsTests {
    enum Arrival: CaseIterable { case firstThenSecond, secondThenFirst, racing }

    /// Sets the workspace up with `ids` (tab id = title), makes `active` active, then lets two clients
    /// submit their ops in `arrival` order; returns the settled workspace and the clients' rejections.
    func play(
        _ ids: [String], active: String, arrival: Arrival, workspace: String, setupOps: [Operation] = [],
        first: (Workspace) -> Operation, second: (Workspace) -> Operation
    ) async throws -> (Workspace, [Rejection], [Rejection]) {
        let server = try TestServer.forClients()
        defer { server.stop() }
        let setup = try server.client("setup", workspace: workspace)
        setup.start()
        try await setup.waitUntil { $0.connection == .ready }
        for id in ids { setup.submit(.add(tab: Tab(id: id, title: id), place: .end, activate: id == active)) }
        for op in setupOps { setup.submit(op) }
        try await setup.waitUntil { $0.pending.isEmpty && $0.unsequenced == 0 }
        let setupVersion = setup.state.confirmed.version
        setup.close()

        let one = try server.client("one", workspace: workspace, format: .json)
        let two = try server.client("two", workspace: workspace, format: .proto)
        one.start()
        two.start()
        for c in [one, two] { try await c.waitUntil { $0.connection == .ready && $0.confirmed.version == setupVersion } }
        // Both compute against the same view.
        let op1 = first(one.state.optimistic)
        let op2 = second(two.state.optimistic)
        switch arrival {
        case .firstThenSecond:
            one.submit(op1)
            try await one.waitUntil { $0.pending.isEmpty }
            two.submit(op2)
        case .secondThenFirst:
            two.submit(op2)
            try await two.waitUntil { $0.pending.isEmpty }
            one.submit(op1)
        case .racing:
            one.submit(op1)
            two.submit(op2)
        }
        // Each client's own op is answered (applied or refused)...
        for c in [one, two] { try await c.waitUntil { $0.pending.isEmpty && $0.unsequenced == 0 } }
        // ...then both see the final version (one op may be refused, so it may be setupVersion + 1).
        let final = max(one.state.confirmed.version, two.state.confirmed.version)
        for c in [one, two] { try await c.waitUntil { $0.confirmed.version == final && $0.pending.isEmpty } }
        #expect(one.state.confirmed == two.state.confirmed)
        #expect(one.state.optimistic == one.state.confirmed)
        let result = (one.state.confirmed, one.state.rejections, two.state.rejections)
        one.close()
        two.close()
        return result
    }

    func key(_ ws: Workspace, _ id: String) -> String { ws.tab(id)!.key }
    func names(_ ws: Workspace) -> [String] { ws.tabs.map(\.title) }

    @Test(arguments: Arrival.allCases)
    func moveToFrontAndAddBetweenGiveDABEC(arrival: Arrival) async throws {
        let (ws, r1, r2) = try await play(
            ["A", "B", "C", "D"], active: "A", arrival: arrival, workspace: "ex1",
            first: { .move(tabId: "D", place: .key(PositionKey.between(nil, self.key($0, "A")))) },
            second: { .add(tab: Tab(id: "E", title: "E"), place: .key(PositionKey.between(self.key($0, "B"), self.key($0, "C"))), activate: false) })
        #expect(names(ws) == ["D", "A", "B", "E", "C"])
        #expect(r1.isEmpty && r2.isEmpty)
    }

    @Test(arguments: Arrival.allCases)
    func crossingMovesOfDifferentTabsGiveDBCA(arrival: Arrival) async throws {
        let (ws, r1, r2) = try await play(
            ["A", "B", "C", "D"], active: "A", arrival: arrival, workspace: "ex2",
            first: { .move(tabId: "A", place: .key(PositionKey.between(self.key($0, "D"), nil))) },
            second: { .move(tabId: "D", place: .key(PositionKey.between(nil, self.key($0, "A")))) })
        #expect(names(ws) == ["D", "B", "C", "A"])
        #expect(r1.isEmpty && r2.isEmpty)
    }

    @Test(arguments: Arrival.allCases)
    func moveBetweenAndMoveAfterGiveCBDA(arrival: Arrival) async throws {
        let (ws, r1, r2) = try await play(
            ["A", "B", "C", "D"], active: "A", arrival: arrival, workspace: "ex3",
            first: { .move(tabId: "C", place: .key(PositionKey.between(self.key($0, "A"), self.key($0, "B")))) },
            second: { .move(tabId: "A", place: .key(PositionKey.between(self.key($0, "D"), nil))) })
        #expect(names(ws) == ["C", "B", "D", "A"])
        #expect(r1.isEmpty && r2.isEmpty)
    }

    @Test func removeWinsOverALaterMove() async throws {
        let (ws, r1, r2) = try await play(
            ["A", "B", "C"], active: "B", arrival: .firstThenSecond, workspace: "ex4",
            first: { _ in .remove(tabId: "B") },
            second: { .move(tabId: "B", place: .key(PositionKey.between(nil, self.key($0, "A")))) })
        #expect(names(ws) == ["A", "C"])
        #expect(ws.activeTabId == "C")
        #expect(r1.isEmpty)
        #expect(r2.map(\.code) == [.tabGone])
    }

    @Test func equalKeysInOneGapGiveAXYBC() async throws {
        let (ws, r1, r2) = try await play(
            ["A", "B", "C"], active: "A", arrival: .firstThenSecond, workspace: "ex5",
            first: { .add(tab: Tab(id: "X", title: "X"), place: .key(PositionKey.between(self.key($0, "A"), self.key($0, "B"))), activate: false) },
            second: { .add(tab: Tab(id: "Y", title: "Y"), place: .key(PositionKey.between(self.key($0, "A"), self.key($0, "B"))), activate: false) })
        #expect(names(ws) == ["A", "X", "Y", "B", "C"])
        #expect(r1.isEmpty && r2.isEmpty)
    }

    /// docs/design.md, "Tab groups", the last worked example: `[a(G) b(G) x]`, client 1 (JSON) moves x
    /// between a and b, client 2 (protobuf) ungroups b. `[a(G) x(G) b]` when the move arrives first,
    /// `[a(G) x b]` when the ungroup does; racing, one of the two. Either way G stays contiguous and
    /// both clients hold the same groups, applied from the `Applied`s alone.
    @Test(arguments: Arrival.allCases)
    func aMoveIntoAGroupAndAnUngroupKeepTheGroupWhole(arrival: Arrival) async throws {
        let (ws, r1, r2) = try await play(
            ["a", "b", "x"], active: "a", arrival: arrival, workspace: "groups-\(arrival)",
            setupOps: [.group(GroupTabs(tabIds: ["a", "b"], groupId: "G", title: "Work", color: "cyan"))],
            first: { .move(tabId: "x", place: .key(PositionKey.between(self.key($0, "a"), self.key($0, "b")))) },
            second: { _ in .ungroup(UngroupTabs(tabIds: ["b"])) })
        let listed = ws.tabs.map { $0.group.isEmpty ? $0.id : "\($0.id)(\($0.group))" }.joined(separator: " ")
        switch arrival {
        case .firstThenSecond: #expect(listed == "a(G) x(G) b")
        case .secondThenFirst: #expect(listed == "a(G) x b")
        case .racing: #expect(["a(G) x(G) b", "a(G) x b"].contains(listed))
        }
        #expect(ws.groups == [TabGroup(id: "G", title: "Work", color: "cyan")])
        #expect(ws.invariantViolations(limits: Limits()) == [])
        #expect(r1.isEmpty && r2.isEmpty)
    }
}
