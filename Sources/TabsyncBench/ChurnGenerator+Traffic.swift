import Foundation
import TabsyncCore
import TabsyncProto

/// Counts of what the churn bench did and saw.
struct ChurnStats {
    var connects = 0
    var welcomes = 0
    var recovered = 0
    var snapshots = 0
    var connectFailures = 0
    var drops = 0
    var midSubmitDrops = 0
    var stalls = 0
    var serverCloses: [String: Int] = [:]
    var sent = 0
    var resent = 0
    var notSent = 0
    var rejected: [String: Int] = [:]
    var gaps = 0
    var serverErrors: [String: Int] = [:]
}

/// What the churn clients send and how answers count: Hello with resume, the ops (each client's own
/// tabs only), resubmission of what was not answered, every `Applied` into the ledger; and the
/// tick, which drops, stalls, reconnects and paces the ops.
extension ChurnGenerator {
    // MARK: connection events

    func hello(for client: ChurnClient) -> [UInt8] {
        var hello = Tabsync_V1_Hello(workspace: workspaceNames[client.workspace], clientId: client.clientId, clientName: "churn")
        if !client.verifying && client.lastVersion > 0 && !client.epoch.isEmpty {
            hello.lastVersion = client.lastVersion
            hello.epoch = client.epoch
        }
        return format.encode(Tabsync_V1_ClientMessage(hello: hello))
    }

    func connectFailed(_ client: ChurnClient, reason: String, now: UInt64) {
        stats.connectFailures += 1
        client.generation &+= 1
        client.resetTransport()
        client.state = .waiting
        backOff(client, now: now)
    }

    /// The server closed the connection or it dropped (`code` 1006 then).
    func serverClosed(_ client: ChurnClient, code: UInt16, now: UInt64) {
        stats.serverCloses["\(code)", default: 0] += 1
        client.state = .waiting
        backOff(client, now: now)
    }

    /// Reconnect after a window of 0.25 s, doubling up to `--reconnect-max`, with full jitter: at a
    /// random moment in the window (as the Swift and JS clients do), so clients dropped together do
    /// not return together.
    private func backOff(_ client: ChurnClient, now: UInt64) {
        client.backoffSeconds = min(configuration.reconnectMax, max(0.25, client.backoffSeconds * 2))
        let share = Double(random.next() % 1_000_000) / 1_000_000
        client.reconnectAt = now + UInt64(client.backoffSeconds * share * 1e9)
    }

    // MARK: receiving

    func received(_ client: ChurnClient, _ bytes: [UInt8]) {
        guard let message = try? format.decodeServerMessage(bytes) else {
            ledger.problem("\(client.clientId): undecodable server message")
            return
        }
        switch message.message {
        case .welcome(let welcome)?:
            welcomed(client, welcome)
        case .applied(let applied)?:
            record(applied, at: client)
            if applied.version == client.lastVersion + 1 {
                client.lastVersion = applied.version
            } else if applied.version > client.lastVersion + 1 {
                // Versions are contiguous on one connection: a gap means resume from what we hold.
                stats.gaps += 1
                drop(client)
                client.reconnectAt = monotonicNanos()
            }
        case .rejected(let rejected)?:
            let code = errorCodeName(rejected.code)
            stats.rejected[code, default: 0] += 1
            client.answered(seq: UInt32(truncatingIfNeeded: rejected.seq), applied: false)
        case .error(let error)?:
            stats.serverErrors[errorCodeName(error.code), default: 0] += 1
        default:
            break
        }
    }

    private func welcomed(_ client: ChurnClient, _ welcome: Tabsync_V1_Welcome) {
        guard client.state == .open else { return }
        stats.welcomes += 1
        welcomeLog?.record(client: client.index)
        client.backoffSeconds = 0
        ledger.sawEpoch(welcome.epoch, workspace: client.workspace, name: workspaceNames[client.workspace])
        client.epoch = welcome.epoch
        if welcome.hasSnapshot && !welcome.recovered {
            stats.snapshots += 1
            if client.verifying {
                verify(client, snapshot: welcome.snapshot)
                return
            }
            client.lastVersion = welcome.snapshot.version
        } else {
            stats.recovered += 1
            for applied in welcome.missed {
                record(applied, at: client)
                client.lastVersion = max(client.lastVersion, applied.version)
            }
        }
        client.state = .ready
        // Every op not answered yet goes again, same seq, in order: the server applies those it never
        // received and answers the others as it did the first time.
        for seq in client.pending.keys.sorted() {
            if ledger.isAcknowledged(workspace: client.workspace, client: client.id, seq: seq) {
                client.answered(seq: seq, applied: true)
            } else if let pending = client.pending[seq] {
                send(pending.frame, on: client)
                stats.resent += 1
            }
        }
        let now = monotonicNanos()
        if phase == .churn && !configuration.storm {
            let life = -log1p(-Double(random.next() % 1_000_000) / 1_000_000) * configuration.lifetime
            client.dropAt = now + UInt64(min(max(life, 0.2), configuration.lifetime * 6) * 1e9)
            if Double(random.next() % 1_000_000) / 1_000_000 < configuration.slowReaders {
                client.stallAt = now + UInt64(Double(random.next() % 5_000) / 1000 * 1e9)
            }
        }
    }

    /// An `Applied` received by `client`: into the ledger, and an answer when it is `client`'s own.
    private func record(_ applied: Tabsync_V1_Applied, at client: ChurnClient) {
        let workspace = client.workspace
        guard !applied.clientID.isEmpty else {
            ledger.serverOp(workspace: workspace, version: applied.version)
            return
        }
        guard applied.clientID.hasPrefix("c"), let index = Int(applied.clientID.dropFirst()),
              index >= 0, index < clients.count, clients[index].workspace == workspace
        else {
            ledger.problem("\(workspaceNames[workspace]): an op by \(applied.clientID), not a client of this bench")
            return
        }
        let submitter = clients[index]
        let seq = UInt32(truncatingIfNeeded: applied.seq)
        guard let op = submitter.pending[seq]?.op ?? ChurnGenerator.decode(applied.op, client: submitter.id) else {
            ledger.problem("\(workspaceNames[workspace]): c\(index) seq \(seq) applied as an op the bench did not send")
            return
        }
        ledger.applied(workspace: workspace, name: workspaceNames[workspace], client: submitter.id, seq: seq,
                       version: applied.version, op: op)
        submitter.answered(seq: seq, applied: true)
    }

    /// The churn op an applied op is (for an op whose submitter no longer holds it as pending).
    static func decode(_ op: Tabsync_V1_Op, client: Int32) -> ChurnOp? {
        func tab(_ id: String) -> UInt32? {
            let prefix = "k\(client)-"
            guard id.hasPrefix(prefix) else { return nil }
            return UInt32(id.dropFirst(prefix.count))
        }
        func titleSeq(_ title: String) -> UInt32? {
            guard let space = title.lastIndex(of: "s") else { return nil }
            return UInt32(title[title.index(after: space)...])
        }
        switch op.kind {
        case .add(let add)?:
            guard let id = tab(add.tab.id), let seq = titleSeq(add.tab.title) else { return nil }
            return ChurnOp(kind: .add, tab: id, titleSeq: seq)
        case .update(let update)?:
            guard let id = tab(update.tabID), let seq = titleSeq(update.title) else { return nil }
            return ChurnOp(kind: .update, tab: id, titleSeq: seq)
        case .remove(let remove)?:
            guard let id = tab(remove.tabID) else { return nil }
            return ChurnOp(kind: .remove, tab: id, titleSeq: 0)
        default:
            return nil
        }
    }

    // MARK: sending

    /// Plans, encodes, records and sends `client`'s next op.
    func submit(on client: ChurnClient) {
        let op = client.plan(random: &random)
        let id = ChurnOp.tabId(client: client.id, tab: op.tab)
        let title = ChurnOp.title(client: client.id, seq: op.titleSeq)
        let operation: TabsyncCore.Operation
        switch op.kind {
        case .add: operation = .add(tab: Tab(id: id, title: title, url: "https://example.com/\(id)"), place: .end, activate: false)
        case .update: operation = .update(TabUpdate(tabId: id, title: title))
        case .remove: operation = .remove(tabId: id)
        }
        let frame = format.encode(Tabsync_V1_ClientMessage(submit: Tabsync_V1_Submit(seq: UInt64(client.seq), op: operation)))
        client.pending[client.seq] = ChurnClient.Pending(frame: frame, op: op)
        stats.sent += 1
        send(frame, on: client)
    }

    // MARK: verifying

    private func verify(_ client: ChurnClient, snapshot: Tabsync_V1_Snapshot) {
        client.verified = true
        let name = workspaceNames[client.workspace]
        let expected = ledger.expected(workspace: client.workspace)
        if snapshot.version != expected.version {
            ledger.problem("\(name): the server is at version \(snapshot.version), the acknowledged ops make \(expected.version)")
        }
        var held: [String: String] = [:]
        for tab in snapshot.tabs { held[tab.id] = tab.title }
        if held != expected.tabs {
            let missing = expected.tabs.keys.filter { held[$0] == nil }.count
            let extra = held.keys.filter { expected.tabs[$0] == nil }.count
            let titles = expected.tabs.filter { held[$0.key] != nil && held[$0.key] != $0.value }.count
            ledger.problem("\(name): tabs differ from the acknowledged ops: \(missing) missing, \(extra) extra, \(titles) with another title")
        }
        drop(client)
    }
}
