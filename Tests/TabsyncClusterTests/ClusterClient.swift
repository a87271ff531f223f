import Foundation
import Synchronization
import TabsyncClient
import TabsyncCore
import TabsyncLock
import TabsyncTestServer
import TabsyncTestSupport

/// One test client on a cluster: a real ``TabsyncClient`` (hello and resume by `lastVersion` +
/// epoch, resubmission of pending ops with the same seq, reconnect with back-off) and everything it
/// was told, in order. It checks as it goes that the versions it is given are contiguous.
final class ClusterClient: Sendable {
    /// What the client saw.
    struct Record: Sendable {
        /// Every `Applied` the client took (its own acks included), in order.
        var applied: [AppliedOp] = []
        /// Its own ops the server applied: seq → the `Applied` (its ack, or the same op in `missed`).
        var acks: [UInt64: AppliedOp] = [:]
        /// Its own ops refused, seq → code (those refused for now and sent again under a new seq too).
        var rejections: [UInt64: ErrorCode?] = [:]
        /// Refusals for now (`UNAVAILABLE`, `RATE_LIMITED`) whose op the client sent again.
        var retried = 0
        /// Each op as submitted (seq, base version, op), when still pending right after `submit`.
        var submitted: [UInt64: Replica.PendingOp] = [:]
        /// `Welcome.recovered` of each welcome, in order.
        var welcomes: [Bool] = []
        /// Versions that did not follow the one before (should stay empty), and resyncs.
        var gaps: [String] = []
        var lastVersion: UInt64?
        var disconnects = 0
    }

    /// The record, written by the client's event handler (on its loop thread) and read by the test.
    final class Recorder: Sendable {
        let state = Lock(Record())
        func withLock<T: Sendable>(_ body: (inout Record) -> T) -> T { state.withLock { body(&$0) } }
    }

    let name: String
    let clientId: String
    let client: TabsyncClient
    let record: Recorder

    /// Joins `workspace` at `ws://127.0.0.1:port` on `loop`; call ``start()`` to connect.
    init(name: String, port: Int, workspace: String, clientId: String, loop: ClientLoop) throws {
        self.name = name
        self.clientId = clientId
        let record = Recorder()
        self.record = record
        let configuration = TabsyncClient.Configuration(
            url: ServerURL(usesTLS: false, host: "127.0.0.1", port: port), workspace: workspace, clientId: clientId,
            clientName: name, backoff: Backoff(initial: .milliseconds(50), maximum: .milliseconds(500)),
            onEvent: { event in record.withLock { Self.take(event, clientId: clientId, into: &$0) } })
        client = try TabsyncClient(configuration, loop: loop)
    }

    func start() { client.start() }

    private static func take(_ event: ClientEvent, clientId: String, into record: inout Record) {
        switch event {
        case .applied(let op):
            if let last = record.lastVersion, op.version != last + 1 {
                record.gaps.append("version \(op.version) after \(last)")
            }
            record.lastVersion = op.version
            record.applied.append(op)
            if op.clientId == clientId {
                if let earlier = record.acks[op.seq] { record.gaps.append("seq \(op.seq) applied twice: v\(earlier.version) and v\(op.version)") }
                record.acks[op.seq] = op
            }
        case .rejected(let rejection):
            record.rejections[rejection.seq] = rejection.code
        case .retrying(let rejection, _):
            // Refused for now (UNAVAILABLE consumes nothing, RATE_LIMITED its seq): that seq is
            // answered; the op goes again under a new seq, acknowledged or refused in its turn.
            record.rejections[rejection.seq] = rejection.code
            record.retried += 1
        case .welcomed(let recovered):
            record.welcomes.append(recovered)
            // A snapshot restarts the count (its version is not in the event); a recovered resume
            // continues it (the missed ops came as `applied` before this event).
            if !recovered { record.lastVersion = nil }
        case .resync(let reason):
            record.gaps.append("resync: \(reason)")
        case .disconnected:
            record.disconnects += 1
        default:
            break
        }
    }

    /// Submits one op from `generator` against what the client shows now; returns its seq.
    @discardableResult
    func submitNext(_ generator: inout OpGenerator) -> UInt64? {
        let op = generator.next(for: client.state.optimistic)
        guard let seq = client.submit(op) else { return nil }
        if let pending = client.state.pending.first(where: { $0.seq == seq }) {
            record.withLock { $0.submitted[seq] = pending }
        }
        return seq
    }

    /// Keeps up to `window` ops in flight while connected, `count` ops in all (or until `stop`).
    func drive(seed: UInt64, count: Int, window: Int, stop: Flag? = nil) async {
        var generator = OpGenerator(seed: seed, prefix: clientId)
        var sent = 0
        while sent < count, !(stop?.isSet ?? false) {
            let room = try? await client.waitUntil(timeout: .milliseconds(500)) {
                $0.connection == .ready && $0.pending.count + $0.unsequenced < window
            }
            guard room != nil else { continue }
            if submitNext(&generator) != nil { sent += 1 }
        }
    }

    /// Waits until nothing is pending and the client is connected.
    func settle(timeout: Duration = .seconds(30)) async -> Bool {
        (try? await client.waitUntil(timeout: timeout) { $0.isSettled }) != nil
    }

    var snapshot: Record { record.withLock { $0 } }
}

/// A stop flag set by one task and read by others.
final class Flag: Sendable {
    private let value = Atomic<Bool>(false)
    var isSet: Bool { value.load(ordering: .relaxed) }
    func set() { value.store(true, ordering: .relaxed) }
}
