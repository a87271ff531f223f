import Testing
import TabsyncCore
import TabsyncProto
@testable import TabsyncClient

/// History queries in the session, frame by frame: sent only when welcomed, failed when the
/// connection they went on ends, matched to their answer by id.
@Suite struct SessionHistoryTests {
    let format = WireFormat.json
    typealias Outcome = Result<Tabsync_V1_HistoryAnswer, ClientError>

    func welcome() -> [UInt8] {
        format.encode(.init(welcome: .init(
            sessionId: "s1", clientId: "c1", lastSeq: 0, limits: .default, snapshot: Workspace(id: "team", epoch: "e1"))))
    }

    /// Registers a query for `closed` tabs and returns the task waiting for its outcome, once registered.
    func ask(_ box: SessionBox) async -> Task<Outcome, Never> {
        let before = box.session.withLock { $0.waitingQueries }
        let task = Task {
            await withCheckedContinuation { (continuation: CheckedContinuation<Outcome, Never>) in
                box.withSession { session in
                    var query = Tabsync_V1_HistoryQuery()
                    query.id = session.makeQueryId()
                    query.what = .closed(5)
                    session.query(query, continuation: continuation)
                }
            }
        }
        while box.session.withLock({ $0.waitingQueries }) == before { await Task.yield() }
        return task
    }

    func sentQueries(_ box: SessionBox) throws -> [Tabsync_V1_HistoryQuery] {
        try box.withSession { $0.takeOutgoing(budget: 1 << 20) }.compactMap { frame in
            if case .history(let query) = try format.decodeClientMessage(frame).message { return query }
            return nil
        }
    }

    @Test func aQueryOnALostConnectionFailsAndOneAskedWhileDisconnectedGoesAfterTheWelcome() async throws {
        var session = Session(workspaceId: "team", clientId: "c1", clientName: "Ann", token: "", format: format)
        _ = session.start()
        session.connecting(attempt: 0)
        let box = SessionBox(session: session, handler: nil)
        _ = box.withSession { $0.opened() }
        _ = box.withSession { $0.received(welcome()) }

        let first = await ask(box)
        let sent = try sentQueries(box)
        #expect(sent.count == 1)
        _ = box.withSession { $0.closed(ConnectionEnding(kind: .lost, reason: "network down")) }
        #expect(await first.value == .failure(.connectionLost("network down")))

        // Asked while disconnected: kept, and sent once welcomed again.
        let second = await ask(box)
        #expect(try sentQueries(box).isEmpty)
        _ = box.withSession { $0.connecting(attempt: 1) }
        _ = box.withSession { $0.opened() }
        #expect(try sentQueries(box).isEmpty, "not before the Welcome")
        _ = box.withSession { $0.received(welcome()) }
        let resent = try sentQueries(box)
        #expect(resent.count == 1)
        var answer = Tabsync_V1_HistoryAnswer()
        answer.id = try #require(resent.first).id
        _ = box.withSession { $0.received(format.encode(.init(history: answer))) }
        #expect(await second.value == .success(answer))

        // Closing fails whatever still waits.
        let third = await ask(box)
        box.withSession { $0.close() }
        #expect(await third.value == .failure(.closed))
        #expect(box.session.withLock { $0.waitingQueries } == 0)
    }
}
