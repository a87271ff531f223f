import Dispatch
import Foundation
import TabsyncStore
import TabsyncCore
import TabsyncProto
import TabsyncTestServer
import Testing

@Suite("Sessions, ops and fan-out", .serialized)
struct ServerSessionTests {
    /// The example of docs/design.md ('The protocol in brief'), written against the JSON subprotocol as a client in another language
    /// would: plain text frames, no tabsync code.
    @Test func plainJSONClientDrivesAWorkspace() throws {
        let server = try TestServer()
        defer { server.stop() }
        let socket = try RawWebSocket.open(port: server.port, subprotocol: "tabsync.v1.json")
        try socket.send(text: #"{"hello":{"workspace":"team","clientId":"c1"}}"#)
        guard case .text(let welcome) = try socket.receive() else { Issue.record("no text welcome"); return }
        #expect(welcome.hasPrefix(#"{"welcome":{"#))
        #expect(welcome.contains(#""clientId":"c1""#))
        #expect(welcome.contains(#""maxTabs":500"#))
        try socket.send(text: #"{"submit":{"seq":"1","op":{"add":{"tab":{"id":"t1","title":"Docs"},"activate":true}}}}"#)
        var applied = ""
        while applied.isEmpty {
            guard case .text(let text) = try socket.receive() else { continue }
            if text.hasPrefix(#"{"applied""#) { applied = text }
        }
        #expect(applied == #"{"applied":{"version":"1","op":{"add":{"tab":{"id":"t1","title":"Docs","key":"a0"},"activate":true}},"clientId":"c1","seq":"1","activeTabId":"t1"}}"#)
        // Numbers are accepted for 64-bit fields on input.
        try socket.send(text: #"{"submit":{"seq":2,"op":{"update":{"tabId":"t1","badge":"3"}}}}"#)
        var second = ""
        while second.isEmpty {
            guard case .text(let text) = try socket.receive() else { continue }
            if text.hasPrefix(#"{"applied""#) { second = text }
        }
        #expect(second.contains(#""version":"2""#))
        try socket.sendClose()
        #expect(try socket.receiveClose().code == 1000)
    }

    @Test(arguments: [(WireFormat.json, WireFormat.proto), (.proto, .proto), (.json, .json)])
    func twoClientsConvergeAndEveryAppliedReachesBoth(formats: (WireFormat, WireFormat)) throws {
        let server = try TestServer()
        defer { server.stop() }
        let (a, _) = try TestClient.joined(port: server.port, workspace: "pair", clientId: "a", format: formats.0)
        let (b, _) = try TestClient.joined(port: server.port, workspace: "pair", clientId: "b", format: formats.1)
        for id in ["a1", "a2", "a3"] { try a.submit(.add(tab: .named(id), place: .end, activate: id == "a1")) }
        for _ in 0..<3 {
            _ = try a.nextApplied()
            _ = try b.nextApplied()
        }
        // Interleaved, concurrent submissions of several kinds, none of which can fail in any order.
        try a.submit(.move(tabId: "a1", place: .index(0)))
        try b.submit(.add(tab: .named("b1"), place: .index(0), activate: false))
        try a.submit(.add(tab: .named("a4"), place: .end, activate: false))
        try b.submit(.move(tabId: "a3", place: .end))
        try a.submit(.activate(.tabId("a2")))
        try b.submit(.update(TabUpdate(tabId: "a1", title: "one", badge: "9")))
        try a.submit(.update(TabUpdate(tabId: "a3", url: "https://example.com")))
        try b.submit(.open(tab: .named("b2"), place: .index(1)))
        try a.submit(.activate(.index(0)))
        let seenByA = try (0..<9).map { i in
            try a.next { message -> AppliedOp? in
                if case .rejected(let r) = message { Issue.record("op \(i): rejected \(r)") }
                if case .applied(let x) = message { return try? AppliedOp(x) }
                return nil
            }
        }
        let seenByB = try (0..<9).map { _ in try b.nextApplied() }
        #expect(seenByA == seenByB)
        #expect(seenByA.map(\.version) == Array(4...12))
        var replica = try #require(try server.snapshot("pair").map { _ in Workspace(id: "pair") })
        for op in try (1...3).map({ v in try #require(server.store.load(workspaceId: "pair")?.log.first { $0.version == v }) }) {
            try replica.apply(applied: op)
        }
        for applied in seenByA { try replica.apply(applied: applied) }
        let snapshot = try #require(try server.snapshot("pair"))
        #expect(replica.tabs == snapshot.tabs)
        #expect(seenByA.last?.activeTabId == snapshot.activeTabId)
        #expect(snapshot.version == 12)
        #expect(snapshot.tabs.count == 6)
    }

    @Test func presenceListsPeersAndFocus() throws {
        let server = try TestServer()
        defer { server.stop() }
        let (a, _) = try TestClient.joined(port: server.port, workspace: "p", clientId: "a", name: "Ann")
        let (b, _) = try TestClient.joined(port: server.port, workspace: "p", clientId: "b", name: "Bob")
        try b.send(Tabsync_V1_ClientMessage(focus: Tabsync_V1_Focus(tabId: "t9")))
        let peers = try a.next(timeout: 3) { message -> [Tabsync_V1_Peer]? in
            guard case .presence(let p) = message, p.peers.count == 2, p.peers.contains(where: { $0.focusTabID == "t9" }) else { return nil }
            return p.peers
        }
        #expect(Set(peers.map(\.name)) == ["Ann", "Bob"])
        #expect(peers.first { $0.clientID == "b" }?.focusTabID == "t9")
    }

    @Test func shutdownFinishesTheCommitInFlightThenClosesEveryClientWith1001() throws {
        let memory = MemoryStore()
        let slow = SlowStore(base: memory, delay: 0.5)
        let server = try TestServer(store: slow)
        let (a, _) = try TestClient.joined(port: server.port, workspace: "s", clientId: "a")
        let (b, _) = try TestClient.joined(port: server.port, workspace: "s", clientId: "b", format: .proto)
        try a.submit(.add(tab: .named("x"), place: .end, activate: true))
        #expect(slow.commitStarted.wait(timeout: .now() + 5) == .success)  // the op is being stored
        server.stop()  // returns once the stop is over (shutdownTimeout 5 s)
        let closeA = try a.socket.receiveClose()
        #expect(closeA.code == 1001)
        // The op being stored when the shutdown began was stored and acknowledged first.
        #expect(closeA.before.contains { if case .text(let t) = $0 { t.hasPrefix(#"{"applied""#) } else { false } })
        #expect(try b.closeCode() == 1001)
        #expect(try memory.load(workspaceId: "s")?.workspace.version == 1)
        #expect(throws: (any Error).self) { _ = try httpGet(port: server.port, path: "/healthz", timeout: 1) }
    }
}
