import Dispatch
import Foundation
import SwiftProtobuf
import TabsyncCore
import TabsyncProto
import TabsyncServer
import TabsyncStore
import TabsyncTestServer
import Testing

/// A store whose commits take `delay` each, and which signals when a commit has started.
final class SlowStore: WorkspaceStore {
    let base: MemoryStore
    let delay: Double
    let commitStarted = DispatchSemaphore(value: 0)

    init(base: MemoryStore, delay: Double) {
        self.base = base
        self.delay = delay
    }

    var epoch: String { base.epoch }

    func load(workspaceId: String) throws(StoreError) -> StoredWorkspace? { try base.load(workspaceId: workspaceId) }

    func commit(_ batch: CommitBatch) throws(StoreError) {
        commitStarted.signal()
        Thread.sleep(forTimeInterval: delay)
        try base.commit(batch)
    }
}

/// A tabsync client for tests on ``RawWebSocket`` and the proto codec.
final class TestClient {
    let socket: RawWebSocket
    let format: WireFormat
    private(set) var nextSeq: UInt64 = 1

    /// Connects on `path`: `/` (the Hello alone names the workspace) or `/v1/workspaces/{id}/ws`.
    init(port: Int, path: String = "/", format: WireFormat = .json, receiveBuffer: Int? = nil, source: String? = nil) throws {
        socket = try RawWebSocket.open(
            port: port, path: path, subprotocol: format.subprotocol, receiveBuffer: receiveBuffer, source: source)
        self.format = format
    }

    /// Connects (from the local address `source` when given), says Hello and returns the Welcome.
    static func joined(
        port: Int, workspace: String, clientId: String, name: String = "", format: WireFormat = .json,
        lastVersion: UInt64 = 0, epoch: String = "", source: String? = nil, presenceDeltas: Bool = false,
        path: String = "/"
    ) throws -> (TestClient, Tabsync_V1_Welcome) {
        let client = try TestClient(port: port, path: path, format: format, source: source)
        try client.send(Tabsync_V1_ClientMessage(hello: Tabsync_V1_Hello(
            workspace: workspace, clientId: clientId, clientName: name, lastVersion: lastVersion, epoch: epoch,
            presenceDeltas: presenceDeltas)))
        let welcome = try client.next { if case .welcome(let w) = $0 { return w } else { return nil } }
        return (client, welcome)
    }

    func send(_ message: Tabsync_V1_ClientMessage) throws {
        let bytes = format.encode(message)
        if format.usesTextFrames { try socket.send(text: String(decoding: bytes, as: UTF8.self)) } else { try socket.send(binary: bytes) }
    }

    /// Submits an op with the next seq; returns the seq.
    @discardableResult
    func submit(_ op: TabsyncCore.Operation, baseVersion: UInt64 = 0) throws -> UInt64 {
        let seq = nextSeq
        nextSeq += 1
        try send(Tabsync_V1_ClientMessage(submit: Tabsync_V1_Submit(seq: seq, baseVersion: baseVersion, op: op)))
        return seq
    }

    /// Submits with an explicit seq (for dedup tests).
    func submit(_ op: TabsyncCore.Operation, seq: UInt64) throws {
        try send(Tabsync_V1_ClientMessage(submit: Tabsync_V1_Submit(seq: seq, op: op)))
    }

    /// The next server message (skipping none).
    func receive(timeout: Double = 5) throws -> Tabsync_V1_ServerMessage.OneOf_Message {
        switch try socket.receive(timeout: timeout) {
        case .text(let text):
            return try format.decodeServerMessage(Array(text.utf8)).message!
        case .binary(let bytes):
            return try format.decodeServerMessage(bytes).message!
        case .close(let code, let reason):
            throw ClientError.closed(code: code, reason: reason)
        case .ping, .pong:
            return try receive(timeout: timeout)
        }
    }

    /// Reads until `pick` returns a value, skipping other messages (presence, by default).
    func next<T>(timeout: Double = 5, _ pick: (Tabsync_V1_ServerMessage.OneOf_Message) -> T?) throws -> T {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            let message = try receive(timeout: max(0.01, deadline.timeIntervalSinceNow))
            if let value = pick(message) { return value }
        }
    }

    func nextApplied(timeout: Double = 5) throws -> AppliedOp {
        try next(timeout: timeout) { message in
            if case .applied(let a) = message { return try? AppliedOp(a) }
            return nil
        }
    }

    func nextRejected(timeout: Double = 5) throws -> Tabsync_V1_Rejected {
        try next(timeout: timeout) { if case .rejected(let r) = $0 { return r } else { return nil } }
    }

    /// Reads until the close frame; its code.
    func closeCode(timeout: Double = 5) throws -> UInt16 {
        try socket.receiveClose(timeout: timeout).code
    }

    enum ClientError: Error {
        case closed(code: UInt16, reason: String)
    }
}

extension Tab {
    static func named(_ id: String, title: String = "") -> Tab { Tab(id: id, title: title.isEmpty ? id : title) }
}

/// A workspace with tabs t1..tN added by one client, each acknowledged; returns the client.
func seed(_ server: TestServer, workspace: String, tabs: Int = 3, format: WireFormat = .json) throws -> TestClient {
    let (client, _) = try TestClient.joined(port: server.port, workspace: workspace, clientId: "seeder", format: format)
    for i in 1...tabs { try client.submit(.add(tab: .named("t\(i)"), place: .end, activate: i == 1)) }
    for _ in 1...tabs { _ = try client.nextApplied() }
    return client
}
