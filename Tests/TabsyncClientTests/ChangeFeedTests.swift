import Synchronization
import TabsyncClient
import TabsyncCore
import TabsyncLock
import TabsyncTestServer
import TabsyncTestSupport
import Testing

/// ``ChangeFeed`` against the real server on real sockets: a feed cut by the server (a restart of
/// the same SQLite store on the same port, twice, while ops are being made) resumes by itself and
/// hands on every version once, in order; a refusal ends it with its status.
@Suite struct ChangeFeedTests {
    @Test func aFeedCutByServerRestartsSeesEveryVersionOnceInOrder() async throws {
        let server = try TestServer(.sqlite) { $0.limits.maxOpsPerSecond = 100_000 }
        defer { server.stop() }
        let writer = try server.client("writer", workspace: "feed")
        writer.start()
        defer { writer.close() }
        try await writer.waitUntil(timeout: scaled(.seconds(20))) { $0.connection == .ready }

        let feed = ChangeFeed(.init(
            url: server.url, workspace: "feed", after: 0,
            backoff: Backoff(initial: .milliseconds(20), maximum: .milliseconds(200)), giveUpAfter: .seconds(60)))
        let seen = Lock([FeedItem]())
        let reader = Task {
            for try await item in feed.items() {
                seen.withLock { $0.append(item) }
            }
        }
        defer { feed.cancel() }
        #expect(await waitUntil(deadline: .seconds(20)) { feed.streamsOpened == 1 })

        let total = 300
        for index in 0..<total {
            writer.submit(.add(tab: Tab(id: "t\(index)"), place: .end, activate: false))
            if index == 100 || index == 200 {
                // The server closes every stream; the same store comes back on the same port.
                _ = try await writer.waitUntil(timeout: scaled(.seconds(30))) { $0.isSettled }
                #expect(await waitUntil(deadline: .seconds(20)) { seen.withLock { $0.count } == index + 1 })
                try server.restart()
            }
            if index % 10 == 0 { try await Task.sleep(for: .milliseconds(1)) }
        }
        _ = try await writer.waitUntil(timeout: scaled(.seconds(30))) { $0.isSettled && $0.confirmed.version == UInt64(total) }
        #expect(await waitUntil(deadline: .seconds(30)) { seen.withLock { $0.count } >= total })
        let items = seen.withLock { $0 }
        #expect(items.map(\.version) == Array(1...UInt64(total)), "every version once, in order")
        #expect(items.allSatisfy { if case .op = $0 { true } else { false } }, "ops only: the log held every one")
        #expect(feed.streamsOpened >= 3, "the restarts cut the stream twice")
        feed.cancel()
        try await reader.value
    }

    @Test func aRefusedFeedEndsWithItsStatus() async throws {
        let server = try TestServer.forClients()
        defer { server.stop() }
        // Not a workspace id: 404, and no retry.
        let feed = ChangeFeed(.init(url: server.url, workspace: "not an id"))
        await #expect(throws: ChangeFeed.Failure.refused(status: 404, message: "not found")) {
            for try await _ in feed.items() {}
        }
        #expect(feed.streamsOpened == 0)
    }

    @Test func aServerThatIsNotThereFailsAtOnce() async throws {
        let server = try TestServer.forClients()
        let url = server.url
        server.stop()
        let feed = ChangeFeed(.init(url: url, workspace: "w"))
        await #expect(throws: ChangeFeed.Failure.self) {
            for try await _ in feed.items() {}
        }
        // wss:// to a server that speaks plain HTTP: the handshake fails at once, saying so.
        let live = try TestServer.forClients()
        defer { live.stop() }
        let tls = ChangeFeed(.init(url: ServerURL(usesTLS: true, host: "127.0.0.1", port: live.port), workspace: "w",
                                   connectTimeout: .seconds(20)))
        do {
            for try await _ in tls.items() {}
            Issue.record("a plain server passed for TLS")
        } catch let failure as ChangeFeed.Failure {
            guard case .unreachable(let why) = failure else {
                Issue.record("\(failure)")
                return
            }
            #expect(why.hasPrefix("TLS: "), "\(why)")
        }
    }
}
