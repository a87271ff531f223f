import Logging
import TabsyncCore
import TabsyncProto
import TabsyncStore
@testable import TabsyncServerCore

/// A ``ServerCore`` driven by hand: events in, the actions out, a clock that moves only when told.
/// No sockets, no threads; the store is whatever the test answers.
struct CoreHarness {
    var core: ServerCore
    let start = ContinuousClock.now
    var elapsed: Duration = .zero
    var now: ContinuousClock.Instant { start + elapsed }

    init(_ configure: (inout ServerCore.Settings) -> Void = { _ in }) {
        var settings = ServerCore.Settings(storeEpoch: "e1")
        settings.limits.maxOpsPerSecond = 100_000
        configure(&settings)
        core = ServerCore(settings: settings, logger: Logger(label: "core-test", factory: { _ in SwiftLogNoOpLogHandler() }), now: start)
    }

    /// Handles one event and returns its actions.
    @discardableResult
    mutating func handle(_ event: ServerCore.Event) -> [ServerCore.Action] {
        var actions: [ServerCore.Action] = []
        core.handle(event, now: now, into: &actions)
        return actions
    }

    mutating func advance(_ by: Duration) { elapsed += by }

    /// A client message as a frame of the protobuf subprotocol.
    static func frame(_ message: Tabsync_V1_ClientMessage) -> [UInt8] { WireFormat.proto.encode(message) }
}

extension CoreHarness {
    /// Opens connection `id` (protobuf) and says Hello for `workspace` as `client`.
    @discardableResult
    mutating func hello(_ id: ConnectionID, client: String, workspace: String = "w", lastVersion: UInt64 = 0, epoch: String = "")
        -> [ServerCore.Action]
    {
        var actions = handle(.connected(id, format: .proto, echo: false))
        actions += send(id, .init(hello: .init(workspace: workspace, clientId: client, lastVersion: lastVersion, epoch: epoch)))
        return actions
    }

    @discardableResult
    mutating func send(_ id: ConnectionID, _ message: Tabsync_V1_ClientMessage) -> [ServerCore.Action] {
        handle(.frame(id, Self.frame(message), binary: true))
    }

    @discardableResult
    mutating func submit(_ id: ConnectionID, seq: UInt64, _ op: TabsyncCore.Operation) -> [ServerCore.Action] {
        send(id, .init(submit: .init(seq: seq, op: op)))
    }

    static func add(_ tabId: String) -> TabsyncCore.Operation { .add(tab: Tab(id: tabId), place: .end, activate: false) }
}

/// What a list of actions says, in words a test can compare.
enum Said: Equatable, CustomStringConvertible {
    case welcome(to: ConnectionID, snapshotVersion: UInt64, missed: Int)
    case applied(to: [ConnectionID], version: UInt64, seq: UInt64)
    case rejected(to: ConnectionID, seq: UInt64, code: ErrorCode?)
    case error(to: ConnectionID, code: ErrorCode?)
    case close(ConnectionID, UInt16)
    case hold(String)
    case load(String)
    case commit(UInt64, records: Int)
    case other

    var description: String {
        switch self {
        case .welcome(let to, let v, let m): "welcome(\(to), v\(v), missed \(m))"
        case .applied(let to, let v, let s): "applied(\(to.sorted()), v\(v), seq \(s))"
        case .rejected(let to, let s, let c): "rejected(\(to), seq \(s), \(c.map { "\($0)" } ?? "-"))"
        case .error(let to, let c): "error(\(to), \(c.map { "\($0)" } ?? "-"))"
        case .close(let id, let code): "close(\(id), \(code))"
        case .hold(let w): "hold(\(w))"
        case .load(let w): "load(\(w))"
        case .commit(let id, let n): "commit(\(id), \(n) records)"
        case .other: "other"
        }
    }

    static func of(_ actions: [ServerCore.Action]) -> [Said] {
        actions.compactMap { action -> Said? in
            switch action {
            case .send(let id, let message): return said(message, to: [id])
            case .broadcast(let ids, let message): return said(message, to: ids)
            case .close(let id, let reason, _): return .close(id, reason.code)
            case .hold(let w): return .hold(w)
            case .load(let w): return .load(w)
            case .commit(let id, let batch): return .commit(id, records: batch.records.count)
            default: return .other
            }
        }
    }

    private static func said(_ message: Tabsync_V1_ServerMessage, to ids: [ConnectionID]) -> Said? {
        switch message.message {
        case .welcome(let w)?:
            return .welcome(to: ids[0], snapshotVersion: w.recovered ? 0 : w.snapshot.version, missed: w.missed.count)
        case .applied(let a)?:
            return .applied(to: ids.sorted(), version: a.version, seq: a.seq)
        case .rejected(let r)?:
            return .rejected(to: ids[0], seq: r.seq, code: ErrorCode(r.code))
        case .error(let e)?:
            return .error(to: ids[0], code: ErrorCode(e.code))
        case .presence?:
            return nil
        default:
            return .other
        }
    }
}

extension [ServerCore.Action] {
    /// The id of the commit action among these, if any.
    var commitId: UInt64? {
        for case .commit(let id, _) in self { return id }
        return nil
    }
}
