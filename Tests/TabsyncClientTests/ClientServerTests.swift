import Testing
import TabsyncClient
import TabsyncCore
import TabsyncProto
import TabsyncLock
import TabsyncTestServer
import TabsyncTestSupport

/// The client library against the real server over real sockets.
@Suite(.serialized) struct ClientServerTests {
    /// Every client submits `opsEach` random ops concurrently; then all must agree with each other.
    func converge(clients count: Int, opsEach: Int, sharedLoop: Bool, seed: UInt64) async throws {
        let server = try TestServer.forClients()
        defer { server.stop() }
        let loop = sharedLoop ? try ClientLoop() : nil
        defer { loop?.shutdown() }
        var clients: [TabsyncClient] = []
        for index in 0..<count {
            // Alternate the subprotocols: both encodings must agree.
            let client = try server.client(
                "c\(index)", workspace: "conv", format: index % 2 == 0 ? .proto : .json, loop: loop)
            client.start()
            clients.append(client)
        }
        for client in clients { try await client.waitUntil { $0.connection == .ready } }

        await withTaskGroup(of: Void.self) { group in
            for (index, client) in clients.enumerated() {
                group.addTask {
                    var ops = OpGenerator(seed: seed &+ UInt64(index), prefix: "c\(index)")
                    for _ in 0..<opsEach {
                        client.submit(ops.next(for: client.state.optimistic))
                        try? await Task.sleep(for: .microseconds(Int.random(in: 0...2_000)))
                    }
                }
            }
        }

        for client in clients { try await client.waitUntil(timeout: scaled(.seconds(30))) { $0.pending.isEmpty } }
        let target = clients.map { $0.state.confirmed.version }.max() ?? 0
        for client in clients {
            try await client.waitUntil(timeout: scaled(.seconds(30))) { $0.confirmed.version == target }
        }
        let reference = clients[0].state.confirmed
        #expect(reference.version > 0)
        for client in clients {
            let state = client.state
            #expect(state.confirmed == reference)
            #expect(state.optimistic == reference, "settled: optimistic state equals the server's")
            // Concurrent removes may leave an activate's index out of range; nothing else here is
            // malformed, and the rate limit is far away.
            let unexpected = state.rejections.filter { rejection in
                if case .activate(.index) = rejection.op { return rejection.code == .rateLimited }
                return rejection.code == .rateLimited || rejection.code == .invalidArgument
            }
            #expect(unexpected.isEmpty, "\(unexpected)")
        }
        // A newcomer's snapshot is the same workspace.
        let late = try server.client("late", workspace: "conv", loop: loop)
        late.start()
        let lateState = try await late.waitUntil { $0.connection == .ready }
        #expect(lateState.confirmed == reference)
        late.close()
        for client in clients { client.close() }
    }

    @Test func twoClientsConvergeUnderConcurrentRandomOps() async throws {
        try await converge(clients: 2, opsEach: 150, sharedLoop: false, seed: 1)
    }

    @Test func tenClientsOnOneLoopConvergeUnderConcurrentRandomOps() async throws {
        try await converge(clients: 10, opsEach: 60, sharedLoop: true, seed: 100)
    }

    @Test func twoHundredClientsShareOneLoopThread() async throws {
        let server = try TestServer.forClients()
        defer { server.stop() }
        let loop = try ClientLoop()
        let count = 200
        var clients: [TabsyncClient] = []
        for index in 0..<count {
            let client = try server.client("many\(index)", workspace: "many", loop: loop)
            client.start()
            clients.append(client)
        }
        for (index, client) in clients.enumerated() {
            try await client.waitUntil(timeout: scaled(.seconds(30))) { $0.connection == .ready }
            client.submit(.add(tab: Tab(id: "tab\(index)"), place: .end, activate: false))
        }
        for client in clients {
            let state = try await client.waitUntil(timeout: scaled(.seconds(60))) { $0.confirmed.version == UInt64(count) }
            #expect(state.confirmed.tabs.count == count)
            #expect(state.pending.isEmpty)
        }
        // Shutting the loop down closes every connection (1001) and every client with it.
        loop.shutdown()
        for client in clients { #expect(client.state.connection == .closed) }
    }

    @Test func aClientDroppedMidStreamLosesAndDuplicatesNothing() async throws {
        let server = try TestServer.forClients()
        defer { server.stop() }
        let seen = Lock<[UInt64]>([])
        let writer = try server.client("writer", workspace: "drops")
        let watcher = try server.client("watcher", workspace: "drops") { event in
            if case .applied(let applied) = event, applied.clientId == "writer" {
                seen.withLock { $0.append(applied.seq) }
            }
        }
        watcher.start()
        writer.start()
        try await writer.waitUntil { $0.connection == .ready }
        try await watcher.waitUntil { $0.connection == .ready }

        let total = 300
        for index in 0..<total {
            writer.submit(.add(tab: Tab(id: "t\(index)"), place: .end, activate: false))
            if index % 50 == 25 { writer.dropConnection() }
            if index % 10 == 0 { try await Task.sleep(for: .milliseconds(2)) }
        }
        let final = try await writer.waitUntil(timeout: scaled(.seconds(30))) { $0.isSettled && $0.confirmed.tabs.count == total }
        #expect(final.welcomes > 1, "the connection was dropped and resumed")
        #expect(final.rejections.isEmpty)
        #expect(final.confirmed.version == UInt64(total), "every op applied exactly once")
        #expect(final.confirmed.tabs.map(\.id) == (0..<total).map { "t\($0)" })
        let watched = try await watcher.waitUntil(timeout: scaled(.seconds(30))) { $0.confirmed.version == UInt64(total) }
        #expect(watched.confirmed == final.confirmed)
        #expect(seen.withLock { $0 } == Array(1...UInt64(total)), "the watcher saw each seq once, in order")
        writer.close()
        watcher.close()
    }

    @Test func aServerRestartMidStreamLosesAndDuplicatesNothing() async throws {
        let server = try TestServer.forClients()
        let writer = try server.client("writer", workspace: "restart", format: .json)
        let watcher = try server.client("watcher", workspace: "restart")
        writer.start()
        watcher.start()
        try await writer.waitUntil { $0.connection == .ready }
        let total = 200
        for index in 0..<total {
            writer.submit(.add(tab: Tab(id: "t\(index)"), place: .end, activate: false))
            if index == total / 2 {
                // Server-side close of every connection while ops are in flight, then the same
                // store comes back on the same port.
                try server.restart()
            }
            if index % 10 == 0 { try await Task.sleep(for: .milliseconds(1)) }
        }
        defer { server.stop() }
        let final = try await writer.waitUntil(timeout: scaled(.seconds(30))) { $0.isSettled && $0.confirmed.tabs.count == total }
        #expect(final.welcomes >= 2)
        #expect(final.rejections.isEmpty)
        #expect(final.confirmed.version == UInt64(total))
        #expect(final.confirmed.tabs.map(\.id) == (0..<total).map { "t\($0)" })
        let watched = try await watcher.waitUntil(timeout: scaled(.seconds(30))) { $0.confirmed.version == UInt64(total) }
        #expect(watched.confirmed == final.confirmed)
        writer.close()
        watcher.close()
    }

    @Test func reconnectAndResyncResumeWithoutLosingState() async throws {
        let server = try TestServer.forClients()
        defer { server.stop() }
        let client = try server.client("c1", workspace: "again")
        client.start()
        try await client.waitUntil { $0.connection == .ready }
        client.submit(.add(tab: Tab(id: "a"), place: .end, activate: true))
        let before = try await client.waitUntil { $0.isSettled && $0.confirmed.version == 1 }
        client.reconnect()
        let resumed = try await client.waitUntil { $0.welcomes == 2 && $0.connection == .ready }
        #expect(resumed.confirmed == before.confirmed)
        client.resync()
        let resynced = try await client.waitUntil { $0.welcomes == 3 && $0.connection == .ready }
        #expect(resynced.confirmed == before.confirmed)
        #expect(resynced.resyncs == 1)
        client.close()
    }

    @Test func editsMadeWhileTheServerIsDownAreSentAfterReconnecting() async throws {
        let server = try TestServer.forClients()
        let editor = try server.client("editor", workspace: "offline", format: .json)
        let viewer = try server.client("viewer", workspace: "offline")
        editor.start()
        viewer.start()
        try await editor.waitUntil { $0.connection == .ready }
        editor.submit(.add(tab: Tab(id: "before"), place: .end, activate: true))
        try await viewer.waitUntil { $0.confirmed.tabs.count == 1 }

        server.stop()  // every client is closed 1001 by the server
        let down = try await editor.waitUntil { state in
            if case .waiting = state.connection { return true }
            return false
        }
        #expect(down.lastEnding?.kind == .closedByServer)
        #expect(down.lastEnding?.code == 1001)

        editor.submit(.add(tab: Tab(id: "offline-1"), place: .end, activate: false))
        editor.submit(.add(tab: Tab(id: "offline-2"), place: .index(0), activate: true))
        editor.submit(.update(TabUpdate(tabId: "before", title: "edited offline")))
        let optimistic = editor.state.optimistic
        #expect(optimistic.tabs.map(\.id) == ["offline-2", "before", "offline-1"])
        #expect(editor.state.pending.count == 3)

        try server.restart()
        defer { server.stop() }
        let settled = try await editor.waitUntil(timeout: scaled(.seconds(20))) { $0.isSettled }
        #expect(settled.confirmed.tabs.map(\.id) == ["offline-2", "before", "offline-1"])
        #expect(settled.confirmed.tabs.first { $0.id == "before" }?.title == "edited offline")
        #expect(settled.confirmed.version == 4)
        let viewed = try await viewer.waitUntil(timeout: scaled(.seconds(20))) { $0.confirmed.version == 4 }
        #expect(viewed.confirmed == settled.confirmed)
        editor.close()
        viewer.close()
    }

    @Test func presenceAndFocusReachPeers() async throws {
        let server = try TestServer.forClients()
        defer { server.stop() }
        let ann = try server.client("ann", workspace: "presence")
        let bob = try server.client("bob", workspace: "presence", format: .json)
        ann.start()
        bob.start()
        try await ann.waitUntil { $0.connection == .ready }
        ann.submit(.add(tab: Tab(id: "docs"), place: .end, activate: true))
        ann.focus("docs")
        let seen = try await bob.waitUntil { state in
            state.peers.contains { $0.clientId == "ann" && $0.focusTabId == "docs" }
        }
        #expect(seen.peers.contains { $0.clientId == "bob" })
        ann.close()
        bob.close()
    }

    @Test func aRefusedOpIsReportedAndTheConnectionStays() async throws {
        let server = try TestServer.forClients()
        defer { server.stop() }
        let client = try server.client("c1", workspace: "refusals")
        client.start()
        try await client.waitUntil { $0.connection == .ready }
        let seq = client.submit(.remove(tabId: "ghost"))
        let state = try await client.waitUntil { !$0.rejections.isEmpty }
        #expect(state.rejections.first?.seq == seq)
        #expect(state.rejections.first?.code == .tabGone)
        #expect(state.rejections.first?.op == .remove(tabId: "ghost"))
        #expect(state.connection == .ready)
        client.close()
    }

    @Test func anInvalidHelloClosesTheClientForGood() async throws {
        let server = try TestServer.forClients()
        defer { server.stop() }
        let client = try server.client("bad id with spaces", workspace: "w")
        client.start()
        do {
            try await client.waitUntil { _ in false }
            Issue.record("waitUntil should throw")
        } catch {
            guard case .refused(let code, _) = error else { Issue.record("unexpected \(error)"); return }
            #expect(code == .invalidArgument)
        }
        #expect(client.state.connection == .closed)
    }
}
