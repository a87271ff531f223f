import Foundation
import TabsyncCore
import TabsyncProto
import TabsyncServer
import TabsyncTestServer
import TabsyncTestSupport
import Testing

/// A peer view rebuilt from `Presence` messages the way proto/README.md#presence says, strictly:
/// a delta before the full list, a `left` naming a peer not held, or a full list after the first
/// (to a delta session) is recorded as a violation.
struct StrictPeerView {
    var peers: [String: Tabsync_V1_Peer] = [:]
    var othersCount = 0
    var fullLists = 0
    var deltas = 0
    var violations: [String] = []

    mutating func apply(_ presence: Tabsync_V1_Presence, wantsDeltas: Bool) {
        if presence.delta {
            deltas += 1
            if !wantsDeltas { violations.append("a delta to a session that did not ask for deltas") }
            if fullLists == 0 { violations.append("a delta before the full list") }
            for id in presence.left {
                if peers.removeValue(forKey: id) == nil { violations.append("left \(id), which was not held") }
            }
            for peer in presence.peers { peers[peer.sessionID] = peer }
        } else {
            fullLists += 1
            if wantsDeltas && fullLists > 1 { violations.append("a second full list to a delta session") }
            if !presence.left.isEmpty { violations.append("a full list with left") }
            peers = Dictionary(uniqueKeysWithValues: presence.peers.map { ($0.sessionID, $0) })
        }
        othersCount = Int(presence.othersCount)
    }

    /// "id:clientId:name:focus" of every named peer, sorted: what a view shows.
    var shown: [String] {
        peers.values.map { "\($0.sessionID):\($0.clientID):\($0.name):\($0.focusTabID)" }.sorted()
    }
}

/// A test client that keeps its peer view from every `Presence` it reads.
final class PresenceClient {
    let client: TestClient
    let sessionId: String
    let clientId: String
    let name: String
    let wantsDeltas: Bool
    var view = StrictPeerView()
    /// Every Presence read, in order.
    var received: [Tabsync_V1_Presence] = []

    init(_ server: TestServer, workspace: String, clientId: String, name: String = "", deltas: Bool,
         format: WireFormat = .json) throws {
        let (client, welcome) = try TestClient.joined(
            port: server.port, workspace: workspace, clientId: clientId, name: name, format: format,
            presenceDeltas: deltas)
        self.client = client
        sessionId = welcome.sessionID
        self.clientId = clientId
        self.name = name
        wantsDeltas = deltas
    }

    /// Reads the next Presence (skipping other messages) and applies it.
    @discardableResult
    func nextPresence(timeout: Double = 5) throws -> Tabsync_V1_Presence {
        let presence = try client.next(timeout: timeout) { if case .presence(let p) = $0 { return p } else { return nil } }
        received.append(presence)
        view.apply(presence, wantsDeltas: wantsDeltas)
        return presence
    }

    /// Reads Presence messages until `condition` holds on the view (or the deadline passes).
    func read(until condition: (StrictPeerView) -> Bool, timeout: Double = 5) throws -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while !condition(view) {
            let left = deadline.timeIntervalSinceNow
            guard left > 0 else { return false }
            do {
                try nextPresence(timeout: left)
            } catch let error as RawWebSocket.Failure {
                guard case .timeout = error else { throw error }
                return condition(view)
            }
        }
        return true
    }

    func focus(_ tabId: String) throws {
        try client.send(Tabsync_V1_ClientMessage(focus: Tabsync_V1_Focus(tabId: tabId)))
    }

    func leave() throws {
        try client.socket.sendClose()
    }
}

@Suite(.serialized) struct ServerPresenceDeltaTests {
    @Test(arguments: [WireFormat.json, .proto])
    func deltaSessionGetsTheFullListOnceThenJoinsRefocusesAndLeaves(format: WireFormat) throws {
        let server = try TestServer()
        defer { server.stop() }
        let a = try PresenceClient(server, workspace: "d", clientId: "a", name: "Ann", deltas: true, format: format)
        let first = try a.nextPresence()
        #expect(!first.delta)
        #expect(first.peers.map(\.sessionID) == [a.sessionId])

        let b = try PresenceClient(server, workspace: "d", clientId: "b", name: "Bob", deltas: true, format: format)
        let joined = try a.nextPresence()
        #expect(joined.delta)
        #expect(joined.peers.map(\.sessionID) == [b.sessionId])
        #expect(joined.peers.first?.name == "Bob")
        #expect(joined.left.isEmpty && joined.othersCount == 0)
        let bFirst = try b.nextPresence()
        #expect(!bFirst.delta)
        #expect(bFirst.peers.map(\.sessionID) == [a.sessionId, b.sessionId])

        try b.focus("t9")
        let refocused = try a.nextPresence()
        #expect(refocused.delta)
        #expect(refocused.peers.map { "\($0.sessionID) \($0.focusTabID)" } == ["\(b.sessionId) t9"])
        #expect(refocused.left.isEmpty)
        let bOwn = try b.nextPresence()  // its own focus, as a delta too
        #expect(bOwn.delta && bOwn.peers.map(\.focusTabID) == ["t9"])

        try b.leave()
        let left = try a.nextPresence()
        #expect(left.delta)
        #expect(left.peers.isEmpty)
        #expect(left.left == [b.sessionId])
        #expect(a.view.shown == ["\(a.sessionId):a:Ann:"])
        #expect(a.view.violations.isEmpty && b.view.violations.isEmpty)
    }

    @Test func sessionWithoutDeltasKeepsGettingWholeLists() throws {
        let server = try TestServer()
        defer { server.stop() }
        let legacy = try PresenceClient(server, workspace: "l", clientId: "old", deltas: false)
        #expect(try legacy.nextPresence().peers.count == 1)
        let modern = try PresenceClient(server, workspace: "l", clientId: "new", deltas: true)
        var list = try legacy.nextPresence()
        #expect(!list.delta && list.left.isEmpty)
        #expect(list.peers.map(\.sessionID) == [legacy.sessionId, modern.sessionId])
        try modern.focus("t1")
        list = try legacy.nextPresence()
        #expect(!list.delta)
        #expect(list.peers.map { "\($0.clientID) \($0.focusTabID)" } == ["old ", "new t1"])
        try modern.leave()
        list = try legacy.nextPresence()
        #expect(!list.delta && list.left.isEmpty)
        #expect(list.peers.map(\.sessionID) == [legacy.sessionId])
        #expect(legacy.view.violations.isEmpty)
        #expect(legacy.view.fullLists == 4 && legacy.view.deltas == 0)
    }

    /// Sessions join in the middle of a (long) interval: each gets the list as of the flush after
    /// its join, and from then on exactly the changes made after that flush; one that joins and
    /// leaves within an interval is never seen by anyone.
    @Test func joiningMidIntervalNeitherMissesNorDoublesAChange() throws {
        let server = try TestServer { $0.presenceInterval = .seconds(1) }
        defer { server.stop() }
        let observer = try PresenceClient(server, workspace: "g", clientId: "o", deltas: true)
        try observer.nextPresence()  // the first flush: the interval starts
        let early = try PresenceClient(server, workspace: "g", clientId: "early", deltas: true)
        try early.focus("t1")
        let ghost = try PresenceClient(server, workspace: "g", clientId: "ghost", deltas: true)
        try ghost.leave()
        let late = try PresenceClient(server, workspace: "g", clientId: "late", deltas: true)
        try late.focus("t2")

        // One flush for all of it: the observer gets one delta, the joiners their full lists.
        let delta = try observer.nextPresence()
        #expect(delta.delta)
        #expect(Set(delta.peers.map(\.sessionID)) == [early.sessionId, late.sessionId])
        #expect(delta.left.isEmpty)
        #expect(!delta.peers.contains { $0.sessionID == ghost.sessionId })
        let expected = observer.view.shown
        #expect(expected == [
            "\(early.sessionId):early::t1", "\(late.sessionId):late::t2", "\(observer.sessionId):o::",
        ].sorted())
        for joiner in [early, late] {
            let full = try joiner.nextPresence()
            #expect(!full.delta)
            #expect(joiner.view.shown == expected)
        }

        // After the flush, everyone hears only what changed after it.
        try early.focus("t3")
        for client in [observer, early, late] {
            let next = try client.nextPresence()
            #expect(next.delta)
            #expect(next.peers.map { "\($0.sessionID) \($0.focusTabID)" } == ["\(early.sessionId) t3"])
            #expect(client.view.violations.isEmpty)
        }
        #expect(Set([observer.view.shown, early.view.shown, late.view.shown]).count == 1)
    }

    @Test func pastTheCapListsNameThatManyAndCountTheRest() throws {
        let server = try TestServer { $0.maxPresencePeers = 2 }
        defer { server.stop() }
        let a = try PresenceClient(server, workspace: "c", clientId: "a", deltas: true)
        try a.nextPresence()
        let b = try PresenceClient(server, workspace: "c", clientId: "b", deltas: true)
        #expect(try a.read { $0.peers.count == 2 })
        let c = try PresenceClient(server, workspace: "c", clientId: "c", deltas: true)
        let legacy = try PresenceClient(server, workspace: "c", clientId: "legacy", deltas: false)
        #expect(try a.read { $0.othersCount == 2 })
        #expect(Set(a.view.peers.keys) == [a.sessionId, b.sessionId])

        // The legacy session's whole list: two peers and a count.
        #expect(try legacy.read { $0.othersCount == 2 })
        #expect(legacy.received.last.map { !$0.delta && $0.peers.count == 2 } == true)
        #expect(Set(legacy.view.peers.keys) == [a.sessionId, b.sessionId])

        // c is not named: its focus goes in no list until it is.
        try c.focus("t1")
        // A named session leaves: the longest-waiting unnamed one (c) takes its place.
        try a.leave()
        #expect(try b.read { $0.othersCount == 1 && $0.peers[c.sessionId]?.focusTabID == "t1" })
        #expect(b.received.contains { $0.delta && $0.left == [a.sessionId] })
        #expect(b.received.allSatisfy { $0.peers.count <= 2 })
        #expect(Set(b.view.peers.keys) == [b.sessionId, c.sessionId])
        #expect(try c.read { $0.peers.count == 2 && $0.othersCount == 1 })
        #expect(Set(c.view.peers.keys) == [b.sessionId, c.sessionId])
        for client in [a, b, c, legacy] { #expect(client.view.violations.isEmpty) }
    }

    /// Seeded churn of joins, leaves and focus changes (delta and whole-list sessions mixed): the
    /// observers' views, rebuilt from what they received, end equal to the sessions connected.
    @Test(arguments: [(UInt64(0x5EED_0001), 1_000), (0x5EED_0002, 1_000), (0x5EED_0003, 3)])
    func reconstructedViewsMatchTheSessionsAfterChurn(seed: UInt64, cap: Int) throws {
        let server = try TestServer {
            $0.presenceInterval = .milliseconds(30)
            $0.maxPresencePeers = cap
        }
        defer { server.stop() }
        var random = SplitMix64(seed: seed)
        let deltaObserver = try PresenceClient(server, workspace: "churn", clientId: "obs-d", deltas: true, format: .proto)
        let legacyObserver = try PresenceClient(server, workspace: "churn", clientId: "obs-l", deltas: false)
        var live: [PresenceClient] = []
        var focus: [String: String] = [:]
        var made = 0
        for _ in 0..<60 {
            switch random.next() % 3 {
            case 0 where live.count < 10, _ where live.isEmpty:
                made += 1
                let client = try PresenceClient(
                    server, workspace: "churn", clientId: "c\(made)", name: "n\(made)", deltas: random.next() % 2 == 0,
                    format: random.next() % 2 == 0 ? .json : .proto)
                live.append(client)
            case 1:
                let client = live.remove(at: Int(random.next() % UInt64(live.count)))
                try client.leave()
                focus[client.sessionId] = nil
            default:
                let client = live[Int(random.next() % UInt64(live.count))]
                let tab = "t\(random.next() % 4)"
                try client.focus(tab)
                focus[client.sessionId] = tab
            }
            // Keep the observers' sockets drained without waiting on anything.
            while (try? deltaObserver.nextPresence(timeout: 0.001)) != nil {}
        }
        var expected: [String: String] = [:]  // session id -> "clientId:name:focus"
        for client in [deltaObserver, legacyObserver] + live {
            expected[client.sessionId] = "\(client.clientId):\(client.name):\(focus[client.sessionId] ?? "")"
        }
        let total = expected.count
        for observer in [deltaObserver, legacyObserver] {
            let converged = try observer.read(until: { view in
                if cap >= total {
                    return view.othersCount == 0 && view.peers.count == total
                        && view.peers.allSatisfy { expected[$0.key] == "\($0.value.clientID):\($0.value.name):\($0.value.focusTabID)" }
                }
                return view.peers.count == cap && view.othersCount == total - cap
                    && view.peers.allSatisfy { expected[$0.key] == "\($0.value.clientID):\($0.value.name):\($0.value.focusTabID)" }
            }, timeout: 10)
            #expect(converged, "seed \(seed): view \(observer.view.shown) others \(observer.view.othersCount), expected \(expected.sorted { $0.key < $1.key })")
            #expect(observer.view.violations.isEmpty, "seed \(seed): \(observer.view.violations)")
        }
        #expect(deltaObserver.view.fullLists == 1)
    }
}
