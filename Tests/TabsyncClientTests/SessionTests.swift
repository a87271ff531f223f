import Testing
import TabsyncCore
import TabsyncProto
@testable import TabsyncClient

/// The session's protocol logic, driven frame by frame without sockets.
@Suite struct SessionTests {
    let format = WireFormat.json

    func makeSession() -> Session {
        var session = Session(workspaceId: "team", clientId: "c1", clientName: "Ann", token: "", format: format)
        let r1 = session.start()
        #expect(r1)
        session.connecting(attempt: 0)
        return session
    }

    func hello(_ bytes: [UInt8]) throws -> Tabsync_V1_Hello {
        let message = try format.decodeClientMessage(bytes)
        guard case .hello(let hello) = message.message else { Issue.record("not a hello"); return .init() }
        return hello
    }

    func submits(_ frames: [[UInt8]]) throws -> [Tabsync_V1_Submit] {
        try frames.compactMap { frame in
            if case .submit(let submit) = try format.decodeClientMessage(frame).message { return submit }
            return nil
        }
    }

    func frame(_ message: Tabsync_V1_ServerMessage) -> [UInt8] { format.encode(message) }

    func welcome(_ workspace: Workspace, lastSeq: UInt64) -> [UInt8] {
        frame(.init(welcome: .init(sessionId: "s1", clientId: "c1", lastSeq: lastSeq, limits: .default, snapshot: workspace)))
    }

    func applied(_ version: UInt64, _ op: Operation, clientId: String, seq: UInt64, active: String) -> [UInt8] {
        frame(.init(applied: AppliedOp(version: version, op: op, clientId: clientId, seq: seq, activeTabId: active)))
    }

    @Test func firstHelloAsksForASnapshotAndOpsWaitForTheWelcome() throws {
        var session = makeSession()
        let r2 = session.submit(.add(tab: Tab(id: "a"), place: .end, activate: true))
        #expect(r2 == nil)
        let first = try hello(session.opened())
        #expect(first.workspace == "team" && first.clientID == "c1" && first.clientName == "Ann")
        #expect(first.lastVersion == 0 && first.epoch.isEmpty)
        let r3 = session.takeOutgoing(budget: 1 << 20)
        #expect(r3.isEmpty, "nothing but the hello before the welcome")

        // The server already consumed seqs up to 7 for this client id (an earlier run).
        let r4 = session.received(welcome(Workspace(id: "team", epoch: "e1"), lastSeq: 7))
        #expect(r4 == nil)
        let sent = try submits(session.takeOutgoing(budget: 1 << 20))
        #expect(sent.map(\.seq) == [8])
        #expect(session.state.connection == .ready)
        #expect(session.state.optimistic.tabs.map(\.id) == ["a"])
        #expect(session.state.pending.map(\.seq) == [8])
    }

    @Test func pendingOpsAreResubmittedWithTheSameSeqAndBaseAfterAReconnect() throws {
        var session = makeSession()
        _ = session.opened()
        _ = session.received(welcome(Workspace(id: "team", epoch: "e1"), lastSeq: 0))
        let s1 = session.submit(.add(tab: Tab(id: "a"), place: .end, activate: true))
        let s2 = session.submit(.add(tab: Tab(id: "b"), place: .end, activate: false))
        #expect(s1 == 1 && s2 == 2)
        let r5 = session.takeOutgoing(budget: 1 << 20)
        #expect(try submits(r5).map(\.seq) == [1, 2])
        // Seq 1 is applied; the connection drops before seq 2's answer.
        let addA = Operation.add(tab: Tab(id: "a", key: "a0"), place: .key("a0"), activate: true)
        _ = session.received(applied(1, addA, clientId: "c1", seq: 1, active: "a"))
        let r6 = session.closed(ConnectionEnding(kind: .lost))
        #expect(r6 == .retry)
        // Edits while disconnected stay pending.
        let s3 = session.submit(.activate(.tabId("a")))
        #expect(s3 == 3)
        let r7 = session.takeOutgoing(budget: 1 << 20)
        #expect(r7.isEmpty)

        session.connecting(attempt: 1)
        let resume = try hello(session.opened())
        #expect(resume.lastVersion == 1 && resume.epoch == "e1")
        // The server had consumed seq 2 (its Applied, version 2, is among the missed ops).
        let addB = Operation.add(tab: Tab(id: "b", key: "a1"), place: .key("a1"), activate: false)
        let missed = AppliedOp(version: 2, op: addB, clientId: "c1", seq: 2, activeTabId: "a")
        _ = session.received(frame(.init(welcome: .init(
            sessionId: "s2", clientId: "c1", lastSeq: 2, limits: .default, epoch: "e1", missed: [missed]))))
        let resent = try submits(session.takeOutgoing(budget: 1 << 20))
        #expect(resent.map(\.seq) == [3])
        #expect(resent.first?.baseVersion == 1)
        #expect(session.state.confirmed.version == 2)
        #expect(session.state.optimistic.tabs.map(\.id) == ["a", "b"])
    }

    @Test func aVersionGapReconnectsAtOnceAndResumes() throws {
        var session = makeSession()
        _ = session.opened()
        _ = session.received(welcome(Workspace(id: "team", epoch: "e1"), lastSeq: 0))
        let addA = Operation.add(tab: Tab(id: "a", key: "a0"), place: .key("a0"), activate: true)
        let r8 = session.received(applied(1, addA, clientId: "c2", seq: 1, active: "a"))
        #expect(r8 == nil)
        let addC = Operation.add(tab: Tab(id: "c", key: "a2"), place: .key("a2"), activate: false)
        let close = session.received(applied(3, addC, clientId: "c2", seq: 3, active: "a"))
        #expect(close?.code == 1000)
        let r9 = session.closed(ConnectionEnding(kind: .closedLocally, code: 1000))
        #expect(r9 == .reconnectNow)
        session.connecting(attempt: 0)
        let r10 = session.opened()
        #expect(try hello(r10).lastVersion == 1)
    }

    @Test func anEpochChangeOnResumeAsksForASnapshot() throws {
        var session = makeSession()
        _ = session.opened()
        _ = session.received(welcome(Workspace(id: "team", version: 5, epoch: "e1", tabs: [], activeTabId: "", editable: true), lastSeq: 0))
        _ = session.closed(ConnectionEnding(kind: .lost))
        session.connecting(attempt: 1)
        let r11 = session.opened()
        #expect(try hello(r11).lastVersion == 5)
        let close = session.received(frame(.init(welcome: .init(
            sessionId: "s2", clientId: "c1", lastSeq: 0, limits: .default, epoch: "e2", missed: []))))
        #expect(close != nil)
        let r12 = session.closed(ConnectionEnding(kind: .closedLocally, code: 1000))
        #expect(r12 == .reconnectNow)
        session.connecting(attempt: 0)
        let r13 = session.opened()
        #expect(try hello(r13).lastVersion == 0)
    }

    /// docs/design.md, 'Transient refusals are retried': UNAVAILABLE holds the op (still shown, not
    /// a rejection), asks the loop for a retry, and the retry sends it as a new op with a new seq and
    /// its first base version; RATE_LIMITED waits a second; a Welcome sends held ops at once.
    @Test func aTransientRefusalHoldsTheOpAndRetriesItUnderANewSeq() throws {
        var session = makeSession()
        _ = session.opened()
        _ = session.received(welcome(Workspace(id: "team", epoch: "e1"), lastSeq: 0))
        let submitted = session.submit(.add(tab: Tab(id: "a"), place: .end, activate: true))
        let seq = try #require(submitted)
        _ = session.takeOutgoing(budget: 1 << 20)
        let none = session.takeRetryRequest()
        #expect(none == nil)
        _ = session.received(frame(.init(rejected: .init(seq: seq, code: .unavailable, message: "store unavailable"))))
        #expect(session.state.rejections.isEmpty, "a transient refusal was reported as final")
        #expect(session.state.held.map(\.firstSeq) == [seq])
        #expect(session.state.optimistic.tabs.map(\.id) == ["a"], "the held op was rolled back")
        #expect(session.state.isWaiting(firstSeq: seq))
        #expect(!session.state.isSettled)
        let request = session.takeRetryRequest()
        let delay = try #require(request)
        #expect(delay > .zero && delay <= Session.retryBackoff.maximum)
        let second = session.takeRetryRequest()
        #expect(second == nil, "one timer per request")
        let early = session.takeOutgoing(budget: 1 << 20)
        #expect(early.isEmpty, "sent again before its back-off")
        let released = session.releaseHeld()
        #expect(released)
        let again = try submits(session.takeOutgoing(budget: 1 << 20))
        #expect(again.map(\.seq) == [seq + 1])
        #expect(again.first?.baseVersion == 0)
        #expect(session.state.pending.map(\.firstSeq) == [seq])

        // Over the rate: a second's wait, then applied; the back-off starts over after an Applied.
        _ = session.received(frame(.init(rejected: .init(seq: seq + 1, code: .rateLimited, message: "slow down"))))
        let wait = session.takeRetryRequest()
        #expect(wait == Session.rateLimitedWait)
        let releasedAgain = session.releaseHeld()
        #expect(releasedAgain)
        let third = try submits(session.takeOutgoing(budget: 1 << 20))
        #expect(third.map(\.seq) == [seq + 2])
        let addA = Operation.add(tab: Tab(id: "a", key: "a0"), place: .key("a0"), activate: true)
        _ = session.received(applied(1, addA, clientId: "c1", seq: seq + 2, active: "a"))
        #expect(session.state.isSettled)
        #expect(session.state.retries == 2)

        // Held while the connection drops: the next Welcome sends it with a seq above lastSeq.
        let removal = session.submit(.remove(tabId: "a"))
        let removeSeq = try #require(removal)
        _ = session.received(frame(.init(rejected: .init(seq: removeSeq, code: .unavailable, message: "store unavailable"))))
        let next = session.closed(ConnectionEnding(kind: .lost))
        #expect(next == .retry)
        let offline = session.releaseHeld()
        #expect(!offline, "nothing is sent without a connection")
        session.connecting(attempt: 1)
        _ = session.opened()
        _ = session.received(frame(.init(welcome: .init(
            sessionId: "s2", clientId: "c1", lastSeq: removeSeq, limits: .default, epoch: "e1", missed: []))))
        let resent = try submits(session.takeOutgoing(budget: 1 << 20))
        #expect(resent.map(\.seq) == [removeSeq + 1])
        #expect(session.state.held.isEmpty && session.state.pending.map(\.firstSeq) == [removeSeq])
    }

    @Test func aRejectionRemovesThePendingOpAndIsReported() throws {
        var session = makeSession()
        _ = session.opened()
        _ = session.received(welcome(Workspace(id: "team", epoch: "e1"), lastSeq: 0))
        let submitted = session.submit(.remove(tabId: "ghost"))
        let seq = try #require(submitted)
        _ = session.received(frame(.init(rejected: .init(seq: seq, code: .tabGone, message: "tab ghost does not exist"))))
        #expect(session.state.pending.isEmpty)
        #expect(session.state.rejections == [Rejection(seq: seq, code: .tabGone, message: "tab ghost does not exist", op: .remove(tabId: "ghost"))])
    }

    @Test func aRefusedHelloClosesForGood() throws {
        var session = makeSession()
        _ = session.opened()
        _ = session.received(frame(.init(error: .init(code: .invalidArgument, message: "bad client id"))))
        let r14 = session.closed(ConnectionEnding(kind: .closedByServer, code: 4400, reason: "bad hello"))
        #expect(r14 == .stop)
        #expect(session.state.connection == .closed)
        #expect(session.state.refusal == .refused(.invalidArgument, "bad client id"))
    }

    @Test func aHelloTimedOutByABusyServerIsRetried() throws {
        var session = makeSession()
        _ = session.opened()
        _ = session.received(frame(.init(error: .init(code: .protocolError, message: "no Hello within 10 seconds"))))
        let next = session.closed(ConnectionEnding(kind: .closedByServer, code: 4400, reason: "PROTOCOL_ERROR"))
        // Refused before its Welcome: retried, with a back-off that grows over such refusals.
        #expect(next == .retryAfterRefusal)
        #expect(session.state.refusal == nil)
    }

    @Test func aQuotaRefusalIsRetriedAndRemembered() throws {
        var session = makeSession()
        _ = session.opened()
        let why = "bob already has 2 sessions: the limit per sub is 2 (--max-connections-per-sub)"
        _ = session.received(frame(.init(error: .init(code: .limitExceeded, message: why))))
        let next = session.closed(ConnectionEnding(kind: .closedByServer, code: 4429, reason: "over a quota: LIMIT_EXCEEDED"))
        #expect(next == .retryAfterRefusal)
        #expect(session.state.refusal == nil)
        #expect(session.state.lastServerError == .refused(.limitExceeded, why))
    }

    @Test(arguments: [(UInt16(4408), "closed by an operator"), (UInt16(4410), "the workspace was deleted")])
    func anOperatorsEndingIsFinal(code: UInt16, reason: String) throws {
        var session = makeSession()
        _ = session.opened()
        _ = session.received(welcome(Workspace(id: "team", epoch: "e1"), lastSeq: 0))
        let next = session.closed(ConnectionEnding(kind: .closedByServer, code: code, reason: reason))
        #expect(next == .stop)
        #expect(session.state.connection == .closed)
        #expect(session.state.refusal == .ended(code: code, reason: reason))
    }

    @Test func aRevokedTokenEndsWithItsReason() throws {
        var session = makeSession()
        _ = session.opened()
        _ = session.received(welcome(Workspace(id: "team", epoch: "e1"), lastSeq: 0))
        _ = session.received(frame(.init(error: .init(code: .unauthorized, message: "the token has been revoked"))))
        let next = session.closed(ConnectionEnding(kind: .closedByServer, code: 4401, reason: "UNAUTHORIZED"))
        #expect(next == .stop)
        #expect(session.state.refusal == .refused(.unauthorized, "the token has been revoked"))
    }

    /// Issue 39: pending ops at or below `Welcome.lastSeq` are sent again with their seqs and
    /// settled only by their own answers: a stale `Applied` again, the stored `Rejected`, or
    /// `ANSWER_GONE`, which is not a refusal.
    @Test func opsAtOrBelowLastSeqAreAskedForTheirAnswers() throws {
        var session = makeSession()
        _ = session.opened()
        _ = session.received(welcome(Workspace(id: "team", epoch: "e1"), lastSeq: 0))
        for id in ["a", "b", "c"] { session.submit(.add(tab: Tab(id: id), place: .end, activate: false)) }
        _ = session.takeOutgoing(budget: 1 << 20)
        _ = session.closed(ConnectionEnding(kind: .lost))
        session.connecting(attempt: 1)
        _ = session.opened()
        // The server consumed all three; seq 1 was applied (version 1), seq 2 refused, seq 3 is old.
        let snapshot = Workspace(
            id: "team", version: 1, epoch: "e1", tabs: [Tab(id: "a", key: "a0")], activeTabId: "", editable: true)
        _ = session.received(welcome(snapshot, lastSeq: 3))
        #expect(try submits(session.takeOutgoing(budget: 1 << 20)).map(\.seq) == [1, 2, 3])
        #expect(session.state.pending.map(\.seq) == [1, 2, 3], "lastSeq settled ops without their answers")
        let addA = Operation.add(tab: Tab(id: "a", key: "a0"), place: .key("a0"), activate: false)
        _ = session.received(applied(1, addA, clientId: "c1", seq: 1, active: ""))
        #expect(session.state.pending.map(\.seq) == [2, 3], "the stale Applied answers seq 1")
        _ = session.received(frame(.init(rejected: .init(seq: 3, code: .answerGone, message: "gone"))))
        #expect(session.state.pending.map(\.seq) == [2])
        #expect(session.state.rejections.isEmpty, "ANSWER_GONE is not a refusal")
        _ = session.received(frame(.init(rejected: .init(seq: 2, code: .tabExists, message: "tab b already exists"))))
        #expect(session.state.pending.isEmpty)
        #expect(session.state.rejections.map(\.seq) == [2])
        let events = session.takeEvents()
        #expect(events.contains(.answerGone(seq: 3, firstSeq: 3)))
        #expect(session.submit(.activate(.tabId("a"))) == 4)
    }

    /// A snapshot under the client's own epoch below a version it saw is another history (a store
    /// brought back from a copy): taken whole, reported once, the next Hello resumes from it.
    @Test func aSnapshotBelowAVersionSeenIsAnotherHistory() throws {
        var session = makeSession()
        _ = session.opened()
        let v4 = Workspace(
            id: "team", version: 4, epoch: "e1", tabs: [Tab(id: "a", key: "a0"), Tab(id: "b", key: "a1")],
            activeTabId: "", editable: true)
        _ = session.received(welcome(v4, lastSeq: 0))
        _ = session.closed(ConnectionEnding(kind: .lost))
        session.connecting(attempt: 1)
        #expect(try hello(session.opened()).lastVersion == 4)
        let v1 = Workspace(id: "team", version: 1, epoch: "e1", tabs: [Tab(id: "a", key: "a0")], activeTabId: "", editable: true)
        _ = session.takeEvents()
        _ = session.received(welcome(v1, lastSeq: 0))
        let replaced = HistoryReplacement(previousEpoch: "e1", previousVersion: 4, epoch: "e1", version: 1)
        let events = session.takeEvents()
        #expect(events.contains(.historyReplaced(replaced)))
        #expect(!events.contains { if case .applied = $0 { true } else { false } })
        #expect(session.state.historyReplacements == 1 && session.state.confirmed == v1)
        _ = session.closed(ConnectionEnding(kind: .lost))
        session.connecting(attempt: 2)
        #expect(try hello(session.opened()).lastVersion == 1)
        _ = session.received(welcome(v1, lastSeq: 0))
        #expect(session.state.historyReplacements == 1, "the same history again is not another one")
    }
}
