import Foundation
import Testing
import TabsyncClient
import TabsyncCore
import TabsyncLock
import TabsyncStore
import TabsyncTestServer
import TabsyncTestSupport

/// Issue 39, the Swift client's side, against the real server over real sockets: an op is settled
/// only by its own answer (never by `Welcome.lastSeq` alone), and a `Welcome` below a version seen
/// under the same epoch is another history, taken whole (docs/design.md, "Submit, seqs and dedup"
/// and "Durability").
@Suite(.serialized) struct ClientAnswerTests {
    static func client(
        port: Int, workspace: String, _ clientId: String, onEvent: (@Sendable (ClientEvent) -> Void)? = nil
    ) throws -> TabsyncClient {
        try TabsyncClient(.init(
            url: ServerURL(usesTLS: false, host: "127.0.0.1", port: port), workspace: workspace, clientId: clientId,
            clientName: clientId, format: .proto, backoff: Backoff(initial: .milliseconds(20), maximum: .milliseconds(200)),
            onEvent: onEvent))
    }

    /// The op is refused `RATE_LIMITED` and the connection breaks with the refusal on its way (a
    /// proxy drops it and cuts): the server consumed the seq, so the next `Welcome.lastSeq` covers
    /// it. The client sends it again with its seq, gets the stored refusal, and retries it as a new
    /// op: it lands. Taken as settled by `lastSeq`, it was lost (the tab the user closed came back
    /// in the extension). The rate is 1 a second and a session starts with one token: `a` takes
    /// it and `b`, submitted right behind it, is refused, unless the server read the two more than
    /// a second apart; the store tells, and a try where `b` was applied instead is made again.
    @Test func aRefusalLostWithItsConnectionIsAskedForAgainNotTakenAsSettled() async throws {
        let server = try TestServer { $0.limits.maxOpsPerSecond = 1 }
        defer { server.stop() }
        let proxy = try TCPFaultProxy(toHost: "127.0.0.1", port: server.port)
        defer { proxy.close() }
        let client = try Self.client(port: proxy.port, workspace: "answers", "closer")
        client.start()
        var refusedAndCut: UInt64?
        for attempt in 1...5 where refusedAndCut == nil {
            let ready = try await client.waitUntil(timeout: scaled(.seconds(20))) { $0.connection == .ready && $0.isSettled }
            // The two Submits go out back to back; the proxy forwards both, drops the server's
            // next bytes (an answer) and cuts both sides.
            let cuts = proxy.cuts
            proxy.arm(onBinaryFrame: 2, .afterAnswer)
            let a = try #require(client.submit(.add(tab: Tab(id: "a\(attempt)"), place: .end, activate: true)))
            let b = try #require(client.submit(.add(tab: Tab(id: "b\(attempt)"), place: .end, activate: false)))
            let settled = try await client.waitUntil(timeout: scaled(.seconds(30))) {
                $0.welcomes > ready.welcomes && !$0.isWaiting(firstSeq: a) && !$0.isWaiting(firstSeq: b) && $0.isSettled
            }
            #expect(proxy.cuts == cuts + 1)
            let stored = try server.store.load(workspaceId: "answers")
            guard stored?.rejections.contains(where: { $0.clientId == "closer" && $0.seq == b && $0.error.code == .rateLimited }) == true
            else { continue }  // read more than a second apart: both applied; try again
            refusedAndCut = b
            #expect(settled.lastTransientRefusal?.firstSeq == b, "the stored refusal was not asked for")
            #expect(settled.rejections.isEmpty, "\(settled.rejections)")
            #expect(settled.confirmed.tab("a\(attempt)") != nil)
            #expect(settled.confirmed.tab("b\(attempt)") != nil, "the refused op was taken as settled and lost")
        }
        #expect(refusedAndCut != nil, "the server never refused the op cut on its way in 5 tries: the test proved nothing")
        client.close()
    }

    /// A store brought back from a plain file copy (not `tabsync-server backup`, so unmarked: same
    /// epoch) at version 1 after the client saw version 4: its `Welcome` is a snapshot at version 1
    /// under the epoch the client holds. The client takes it whole as another history, says so
    /// (``ClientEvent/historyReplaced(_:)``), reports no op for what vanished, and goes on from it.
    @Test func aWelcomeBelowAVersionSeenUnderTheSameEpochIsAnotherHistory() async throws {
        let root = TemporaryDirectory(prefix: "tabsync-client-history")
        let live = root.path + "/live"
        let saved = root.path + "/copy.sqlite3"
        let file = live + "/" + SQLiteStore.fileName
        var store = try SQLiteStore(dataDirectory: live)
        var server = try TestServer(store: store) { $0.limits.maxOpsPerSecond = 100_000 }
        let port = server.port
        let events = Lock<[ClientEvent]>([])
        let client = try Self.client(port: port, workspace: "history", "viewer") { event in
            events.withLock { $0.append(event) }
        }
        client.start()
        try await client.waitUntil(timeout: scaled(.seconds(10))) { $0.connection == .ready }
        client.submit(.add(tab: Tab(id: "a"), place: .end, activate: true))
        let first = try await client.waitUntil(timeout: scaled(.seconds(10))) { $0.isSettled && $0.confirmed.version == 1 }

        // Restarts the server on the store file at `live`, on the same port.
        func restart(copying source: String? = nil) throws {
            server.stop()
            store.close()
            if let source {
                for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: file + suffix) }
                try FileManager.default.copyItem(atPath: source, toPath: file)
            }
            store = try SQLiteStore(dataDirectory: live)
            server = try TestServer(store: store) { $0.port = port; $0.limits.maxOpsPerSecond = 100_000 }
        }
        server.stop()
        store.close()
        try FileManager.default.copyItem(atPath: file, toPath: saved)  // closed: the WAL is in the file
        try restart()
        for id in ["b", "c", "d"] { client.submit(.add(tab: Tab(id: id), place: .end, activate: false)) }
        let seen = try await client.waitUntil(timeout: scaled(.seconds(20))) { $0.isSettled && $0.confirmed.version == 4 }
        #expect(seen.confirmed.epoch == first.confirmed.epoch)
        let before = events.withLock { $0.count }

        try restart(copying: saved)
        let replaced = try await client.waitUntil(timeout: scaled(.seconds(20))) { $0.historyReplacements == 1 && $0.isSettled }
        #expect(replaced.lastHistoryReplacement == HistoryReplacement(
            previousEpoch: first.confirmed.epoch, previousVersion: 4, epoch: first.confirmed.epoch, version: 1))
        #expect(replaced.confirmed.tabs.map(\.id) == ["a"])
        #expect(replaced.confirmed.version == 1)
        let after = events.withLock { Array($0[before...]) }
        #expect(after.contains { if case .historyReplaced = $0 { true } else { false } })
        #expect(!after.contains { if case .applied = $0 { true } else { false } }, "an op was reported for what vanished")

        // It goes on from the restored history: the next op is its version 2.
        client.submit(.add(tab: Tab(id: "e"), place: .end, activate: false))
        let next = try await client.waitUntil(timeout: scaled(.seconds(10))) { $0.isSettled && $0.confirmed.version == 2 }
        #expect(next.confirmed.tabs.map(\.id) == ["a", "e"])
        client.close()
        server.stop()
        store.close()
    }
}
