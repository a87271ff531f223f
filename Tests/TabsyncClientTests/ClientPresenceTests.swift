import TabsyncClient
import TabsyncCore
import TabsyncProto
import TabsyncTestServer
import TabsyncTestSupport
import Testing

/// The client library asks for presence deltas and keeps `state.peers` as the whole list its
/// users always had: checked against the sessions actually connected, over real sockets.
@Suite(.serialized) struct ClientPresenceTests {
    @Test(arguments: [(UInt64(0xBEEF_0001), 1_000), (0xBEEF_0002, 3)])
    func peersEqualTheConnectedSessionsAfterChurn(seed: UInt64, cap: Int) async throws {
        let server = try TestServer {
            $0.presenceInterval = .milliseconds(30)
            $0.maxPresencePeers = cap
        }
        defer { server.stop() }
        let loop = try ClientLoop()
        defer { loop.shutdown() }
        var random = SplitMix64(seed: seed)
        let observer = try server.client("observer", workspace: "pres", loop: loop)
        observer.start()
        try await observer.waitUntil { $0.connection == .ready }
        var live: [(client: TabsyncClient, focus: String)] = []
        var made = 0
        for _ in 0..<30 {
            switch random.next() % 3 {
            case 0 where live.count < 8, _ where live.isEmpty:
                made += 1
                let client = try server.client(
                    "c\(made)", workspace: "pres", format: random.next() % 2 == 0 ? .json : .proto, loop: loop)
                client.start()
                try await client.waitUntil { $0.connection == .ready }
                live.append((client, ""))
            case 1:
                live.remove(at: Int(random.next() % UInt64(live.count))).client.close()
            default:
                let index = Int(random.next() % UInt64(live.count))
                let tab = "t\(random.next() % 4)"
                live[index].client.focus(tab)
                live[index].focus = tab
            }
        }
        var expected = [Peer(sessionId: observer.state.sessionId, clientId: "observer", name: "observer", focusTabId: "")]
        for (client, focus) in live {
            let id = client.configuration.clientId
            expected.append(Peer(sessionId: client.state.sessionId, clientId: id, name: id, focusTabId: focus))
        }
        expected.sort { UInt64($0.sessionId)! < UInt64($1.sessionId)! }
        let total = expected.count
        let settled: Bool = await waitUntil(deadline: .seconds(10)) {
            let state = observer.state
            if cap >= total { return state.peers == expected && state.othersCount == 0 }
            return state.peers.count == cap && state.othersCount == total - cap
                && state.peers.allSatisfy { expected.contains($0) }
                && state.peers.map(\.sessionId) == state.peers.map(\.sessionId).sorted { UInt64($0)! < UInt64($1)! }
        }
        let state = observer.state
        #expect(settled, "seed \(seed): peers \(state.peers) others \(state.othersCount), expected \(expected)")
        for (client, _) in live { client.close() }
        observer.close()
    }

    @Test func peersAreRebuiltAfterAReconnect() async throws {
        let server = try TestServer.forClients()
        defer { server.stop() }
        let a = try server.client("a", workspace: "re")
        let b = try server.client("b", workspace: "re")
        defer { a.close(); b.close() }
        a.start()
        b.start()
        try await a.waitUntil { $0.peers.count == 2 }
        b.focus("t1")
        try await a.waitUntil { $0.peers.contains { $0.clientId == "b" && $0.focusTabId == "t1" } }
        try server.restart()
        // New sessions after the restart: the new full list replaces the old view entirely.
        let state = try await a.waitUntil(timeout: .seconds(10)) { state in
            state.connection == .ready && state.peers.count == 2 && state.peers.contains { $0.sessionId == state.sessionId }
                && state.peers.contains { $0.clientId == "b" && $0.focusTabId == "t1" }
        }
        #expect(state.othersCount == 0)
        #expect(Set(state.peers.map(\.clientId)) == ["a", "b"])
    }
}
