import Testing
import TabsyncClient
import TabsyncCore
import TabsyncProto
import TabsyncTestServer
import TabsyncTestSupport

/// History queries (`TabsyncClient.history`) and the ops that need history (restore, reopen)
/// against the real server over real sockets.
@Suite(.serialized) struct ClientHistoryTests {
    /// A ready client of `workspace` that added tabs a, b, c then closed b (versions 1–4).
    func seeded(_ server: TestServer, workspace: String) async throws -> TabsyncClient {
        let client = try server.client("h1", workspace: workspace)
        client.start()
        try await client.waitUntil { $0.connection == .ready }
        for id in ["a", "b", "c"] {
            client.submit(.add(tab: Tab(id: id, title: "Tab \(id)", url: "https://\(id).example"), place: .end, activate: false))
        }
        client.submit(.remove(tabId: "b"))
        try await client.waitUntil { $0.isSettled && $0.confirmed.version == 4 }
        return client
    }

    @Test func opsArePagedNewestFirstWithAuthorTimeAndSummary() async throws {
        let server = try TestServer.forClients()
        defer { server.stop() }
        let client = try await seeded(server, workspace: "hist-ops")
        defer { client.close() }

        let all = try await client.historyOps()
        #expect(all.ops.map(\.version) == [4, 3, 2, 1])
        #expect(all.next == 0, "the oldest op is in the page")
        #expect(all.ops.allSatisfy { $0.clientID == "h1" && !$0.summary.isEmpty && !$0.at.isEmpty })
        #expect(all.ops[0].author == "h1", "no token: the Hello's client name")

        let first = try await client.historyOps(limit: 3)
        #expect(first.ops.map(\.version) == [4, 3, 2])
        #expect(first.next == 2)
        let second = try await client.historyOps(before: first.next, limit: 3)
        #expect(second.ops.map(\.version) == [1])
        #expect(second.next == 0)
    }

    @Test func aStateAtAVersionOrATimeAndTheClosedTabs() async throws {
        let server = try TestServer.forClients()
        defer { server.stop() }
        let client = try await seeded(server, workspace: "hist-state")
        defer { client.close() }

        let atTwo = try await client.historyState(version: 2)
        #expect(atTwo.hasState)
        #expect(atTwo.state.version == 2)
        #expect(atTwo.state.tabs.map(\.id) == ["a", "b"])

        // A time after the newest op: the state now. (Not the newest op's own `at`: it is written
        // to the millisecond and the store compares commit times at full precision, so the
        // truncated time can fall just before that op.)
        let atTime = try await client.historyState(at: "2999-01-01T00:00:00Z")
        #expect(atTime.state.version == 4)
        #expect(atTime.state.tabs.map(\.id) == ["a", "c"])

        await #expect(throws: ClientError.self) { try await client.historyState(at: "2000-01-01T00:00:00Z") }

        let closed = try await client.recentlyClosed()
        #expect(closed.map(\.tab.id) == ["b"])
        #expect(closed.first?.version == 4)
        #expect(closed.first?.tab.title == "Tab b")
    }

    @Test func aQueryTheServerCannotAnswerThrowsItsError() async throws {
        let server = try TestServer.forClients()
        defer { server.stop() }
        let client = try await seeded(server, workspace: "hist-error")
        defer { client.close() }
        do {
            _ = try await client.historyState(version: 999)
            Issue.record("a state past the newest version was answered")
        } catch {
            guard case .queryFailed(let code, let message) = error else {
                Issue.record("unexpected \(error)")
                return
            }
            #expect(code != nil)
            #expect(!message.isEmpty)
        }
        // The connection is still good for the next query.
        #expect(try await client.historyOps(limit: 1).ops.count == 1)
    }

    @Test func queriesSentBeforeTheWelcomeWaitForItAndAClosedClientRefusesAtOnce() async throws {
        let server = try TestServer.forClients()
        defer { server.stop() }
        let seededClient = try await seeded(server, workspace: "hist-early")
        seededClient.close()

        let client = try server.client("h2", workspace: "hist-early")
        client.start()
        let answer = try await client.historyOps()  // sent once welcomed
        #expect(answer.ops.count == 4)
        client.close()
        await #expect(throws: ClientError.closed) { try await client.historyOps() }
    }

    @Test func aQueryTimesOutWhenNoAnswerComes() async throws {
        let server = try TestServer.forClients()
        defer { server.stop() }
        let client = try server.client("h3", workspace: "hist-timeout")
        defer { client.close() }
        // Never started: it never gets a Welcome, so the query waits until its deadline.
        await #expect(throws: ClientError.timedOut(.milliseconds(200))) {
            try await client.historyOps(timeout: .milliseconds(200))
        }
    }

    @Test func restoreAndReopenRoundTrip() async throws {
        let server = try TestServer.forClients()
        defer { server.stop() }
        let client = try await seeded(server, workspace: "hist-restore")
        defer { client.close() }
        let watcher = try server.client("w", workspace: "hist-restore")
        watcher.start()
        defer { watcher.close() }

        // Restore version 2 (a, b): the server resolves it to a canonical restore with the state.
        let seq = try #require(client.submit(.restore(version: 2, state: nil)))
        let restored = try await client.waitUntil { !$0.isWaiting(firstSeq: seq) }
        #expect(restored.rejections.isEmpty)
        #expect(restored.confirmed.version == 5)
        #expect(restored.confirmed.tabs.map(\.id) == ["a", "b"])
        let seen = try await watcher.waitUntil { $0.confirmed.version == 5 }
        #expect(seen.confirmed.tabs.map(\.id) == ["a", "b"])
        let log = try await client.historyOps(limit: 1)
        if case .restore(let version, let state?)? = try? Operation(log.ops[0].op) {
            #expect(version == 2)
            #expect(state.tabs.count == 2)
        } else {
            Issue.record("the stored op is not a canonical restore: \(log.ops[0])")
        }

        // Close a, then reopen the most recently closed tab: it comes back with its fields.
        client.submit(.remove(tabId: "a"))
        try await client.waitUntil { $0.isSettled && $0.confirmed.version == 6 }
        let closed = try await client.recentlyClosed(limit: 1)
        #expect(closed.map(\.tab.id) == ["a"])
        let reopenSeq = try #require(client.submit(.reopen(tabId: "a")))
        let reopened = try await client.waitUntil { !$0.isWaiting(firstSeq: reopenSeq) }
        #expect(reopened.rejections.isEmpty)
        #expect(reopened.confirmed.tab("a")?.title == "Tab a")
        #expect(reopened.confirmed.tab("a")?.url == "https://a.example")

        // Reopening a tab that is open is refused for good, with a message.
        let again = try #require(client.submit(.reopen(tabId: "a")))
        let refused = try await client.waitUntil { !$0.isWaiting(firstSeq: again) }
        let rejection = try #require(refused.rejections.last)
        #expect(rejection.firstSeq == again)
        #expect(!rejection.message.isEmpty)
    }
}
