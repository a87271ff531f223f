import Foundation
import Synchronization
import TabsyncCore
import TabsyncLock
import TabsyncProto
import TabsyncStore
import TabsyncTestSupport
import Testing

/// docs/design.md's durability rule ('Durability') as an operator sees it: the real `tabsync-server` on a data dir is
/// killed with SIGKILL under load, several times, and restarted on the same dir. Nothing any client
/// saw acknowledged may be lost or applied twice, and the state must be the replay of the log.
///
/// `TABSYNC_CRASH_SEED=N` replays a run (the seed is printed).
@Suite("Crash recovery (tabsync-server under SIGKILL)", .serialized)
struct CrashRecoveryTests {
    typealias Child = ServerExecutableTests.Child

    /// Every answer a client received for its own seqs.
    final class Acks: Sendable {
        struct State {
            /// (clientId, seq) → the `Applied` the submitter received (its ack).
            var applied: [String: AppliedOp] = [:]
            /// (clientId, seq) → the refusal's code.
            var rejected: [String: String] = [:]
            /// Highest seq each client sent so far.
            var sent: [String: UInt64] = [:]
            /// `Welcome.lastSeq` of each client's latest join.
            var welcomeLastSeq: [String: UInt64] = [:]
        }

        let state = Lock(State())

        static func key(_ clientId: String, _ seq: UInt64) -> String { "\(clientId)#\(seq)" }
    }

    static let workspaces = ["crash-a", "crash-b"]
    static let clientsPerWorkspace = 2

    /// The server's flags: a fast op rate (the load is the point) and a resume window covering the run.
    static func serverArguments(port: Int = 0, dataDir: String) -> [String] {
        ["--port", "\(port)", "--data-dir", dataDir, "--log-level", "error", "--max-ops-per-second", "100000",
         "--max-resume-ops", "100000", "--log-retention", "100000"]
    }

    /// One client's run: joins, then keeps up to `window` ops in flight until the connection drops
    /// (the server was killed) or `stop` is set. Seqs continue from the Welcome's `lastSeq`.
    static func runClient(
        port: Int, workspace: String, clientId: String, seed: UInt64, acks: Acks, stop: StopFlag
    ) {
        var rng = SplitMix64(seed: seed)
        guard let (client, welcome) = try? TestClient.joined(port: port, workspace: workspace, clientId: clientId) else { return }
        acks.state.withLock { $0.welcomeLastSeq[clientId] = welcome.lastSeq }
        var nextSeq = welcome.lastSeq + 1
        var inFlight = 0
        let window = 8
        // The client's own tabs, as its acks tell (no other client touches them).
        var live = welcome.snapshot.tabs.map(\.id).filter { $0.hasPrefix(clientId + "-") }
        while !stop.isSet {
            while inFlight < window {
                let op = randomOp(clientId: clientId, seq: nextSeq, live: live, rng: &rng)
                do { try client.submit(op, seq: nextSeq) } catch { return }
                acks.state.withLock { $0.sent[clientId] = nextSeq }
                nextSeq += 1
                inFlight += 1
            }
            let message: Tabsync_V1_ServerMessage.OneOf_Message
            do {
                message = try client.receive(timeout: 0.2)
            } catch RawWebSocket.Failure.timeout(_) {
                continue
            } catch {
                return  // the server is gone
            }
            switch message {
            case .applied(let a) where a.clientID == clientId:
                guard let applied = try? AppliedOp(a) else { continue }
                acks.state.withLock { $0.applied[Acks.key(clientId, applied.seq)] = applied }
                inFlight -= 1
                switch applied.op {
                case .add(let tab, _, _): live.append(tab.id)
                case .remove(let id): live.removeAll { $0 == id }
                default: break
                }
            case .rejected(let r):
                acks.state.withLock { $0.rejected[Acks.key(clientId, r.seq)] = "\(r.code)" }
                inFlight -= 1
            default:
                break
            }
        }
    }

    /// Adds (most often), moves, removes, activates and updates of the client's own tabs; some are
    /// refused (a tab already removed), which consumes the seq like any op.
    static func randomOp(clientId: String, seq: UInt64, live: [String], rng: inout SplitMix64) -> TabsyncCore.Operation {
        let earlier = live.isEmpty ? "\(clientId)-0" : live[Int(rng.next() % UInt64(live.count))]
        switch rng.next() % 10 {
        case 0...3 where live.count >= 30: return .remove(tabId: earlier)
        case 0...3: return .add(tab: Tab(id: "\(clientId)-\(seq)", title: "tab \(seq)"), place: .index(UInt32(rng.next() % 6)), activate: rng.next() % 3 == 0)
        case 4, 5: return .move(tabId: earlier, place: .index(UInt32(rng.next() % 8)))
        case 6: return .remove(tabId: earlier)
        case 7: return .activate(.index(0))
        default: return .update(TabUpdate(tabId: earlier, title: "renamed \(seq)"))
        }
    }

    @Test func acknowledgedOpsSurviveSIGKILLExactlyOnceAndTheStateIsTheReplayOfTheLog() throws {
        let seed = ProcessInfo.processInfo.environment["TABSYNC_CRASH_SEED"].flatMap(UInt64.init) ?? UInt64.random(in: 1...999_999)
        print("CrashRecoveryTests seed: \(seed) (TABSYNC_CRASH_SEED=\(seed) replays it)")
        var rng = SplitMix64(seed: seed)
        let dataDir = TemporaryDirectory(prefix: "tabsync-crash")  // TABSYNC_KEEP=1 keeps it
        let directory = dataDir.path
        let acks = Acks()
        let rounds = 4
        var highestAckedBefore: [String: UInt64] = [:]

        for round in 0..<rounds {
            let child = try Child(arguments: Self.serverArguments(dataDir: directory))
            defer { child.kill() }
            _ = try child.waitForListening()
            try #require(child.port > 0, "round \(round): the server did not start")

            let answers = { acks.state.withLock { $0.applied.count + $0.rejected.count } }
            let answeredBefore = answers()
            let stop = StopFlag()
            let group = DispatchGroup()
            var clientIds: [String] = []
            for (w, workspace) in Self.workspaces.enumerated() {
                for c in 0..<Self.clientsPerWorkspace {
                    let clientId = "c\(w)\(c)"
                    clientIds.append(clientId)
                    let clientSeed = rng.next()
                    let port = child.port
                    // A thread each: the clients block on their sockets (GCD's pool may not grow).
                    group.enter()
                    Thread {
                        Self.runClient(port: port, workspace: workspace, clientId: clientId, seed: clientSeed, acks: acks, stop: stop)
                        group.leave()
                    }.start()
                }
            }
            // SIGKILL at a random moment: once this round has had a random number of answers
            // (drawn from the seed), or after 10 s whatever has come by then.
            let killAfter = 100 + Int(rng.next() % 900)
            _ = waitUntil(deadline: .seconds(10)) { answers() - answeredBefore >= killAfter }
            let acked = answers()
            kill(child.process.processIdentifier, SIGKILL)
            #expect(child.waitForExit(timeout: 5) != nil)
            if group.wait(timeout: .now() + 5) == .timedOut {
                stop.set()
                _ = group.wait(timeout: .now() + 2)
            }
            print("CrashRecoveryTests round \(round): SIGKILL after \(acked - answeredBefore) answers (aimed at \(killAfter)), \(acked) so far")
            #expect(acked > 0, "round \(round): no op was acknowledged before the kill")
            // Each client's Welcome after the restart knew every seq answered before it.
            let welcomed = acks.state.withLock { $0.welcomeLastSeq }
            for clientId in clientIds {
                #expect(welcomed[clientId, default: 0] >= highestAckedBefore[clientId, default: 0],
                        "round \(round): \(clientId)'s Welcome.lastSeq is below a seq answered before the kill")
            }
            highestAckedBefore = acks.state.withLock { state in
                var highest: [String: UInt64] = [:]
                for key in Array(state.applied.keys) + Array(state.rejected.keys) {
                    let parts = key.split(separator: "#")
                    highest[String(parts[0])] = max(highest[String(parts[0])] ?? 0, UInt64(parts[1])!)
                }
                return highest
            }
        }

        // Restart once more: every workspace answers from the data dir.
        let child = try Child(arguments: Self.serverArguments(dataDir: directory))
        _ = try child.waitForListening()
        var served: [String: Workspace] = [:]
        var lastSeqs: [String: UInt64] = [:]
        for (w, workspace) in Self.workspaces.enumerated() {
            for c in 0..<Self.clientsPerWorkspace {
                let (_, welcome) = try TestClient.joined(port: child.port, workspace: workspace, clientId: "c\(w)\(c)")
                lastSeqs["c\(w)\(c)"] = welcome.lastSeq
                served[workspace] = Workspace(welcome.snapshot)
            }
        }
        child.process.terminate()
        #expect(child.waitForExit(timeout: 5) == 0)

        // The log, read from the file the server left.
        let store = try SQLiteStore(dataDirectory: directory)
        defer { store.close() }
        var logged: [String: AppliedOp] = [:]
        var duplicates = 0
        var totalOps = 0
        for workspace in Self.workspaces {
            let stored = try #require(try store.load(workspaceId: workspace))
            let log = stored.log
            totalOps += log.count
            #expect(log.first?.version == 1, "the whole log is kept (under the retention)")
            #expect(zip(log, log.dropFirst()).allSatisfy { $0.version + 1 == $1.version })
            // The state is the replay of the log, and the restarted server serves exactly it.
            var replay = Workspace(id: workspace, epoch: store.epoch)
            for applied in log { try replay.apply(applied: applied) }
            #expect(replay == stored.workspace)
            #expect(served[workspace] == replay, "\(workspace): served state differs from the replay of its log")
            for applied in log where !applied.clientId.isEmpty {
                let key = Acks.key(applied.clientId, applied.seq)
                if logged[key] != nil { duplicates += 1 }
                logged[key] = applied
            }
        }
        #expect(duplicates == 0, "an op was applied twice")
        let state = acks.state.withLock { $0 }
        for (key, ack) in state.applied {
            #expect(logged[key] == ack, "acknowledged \(key) at version \(ack.version) is not in the log as acknowledged")
        }
        for (key, code) in state.rejected {
            #expect(logged[key] == nil, "refused \(key) (\(code)) is in the log")
        }
        for (clientId, highest) in highestAckedBefore {
            #expect(lastSeqs[clientId, default: 0] >= highest, "\(clientId): lastSeq below an acknowledged seq")
        }
        print("CrashRecoveryTests: \(rounds) kills, \(state.applied.count) applied acks, \(state.rejected.count) refusals, \(totalOps) ops in the log, seed \(seed)")
        #expect(state.applied.count > 20)
    }
}

/// A flag one thread sets and others poll.
final class StopFlag: Sendable {
    private let value = Atomic<Bool>(false)
    var isSet: Bool { value.load(ordering: .relaxed) }
    func set() { value.store(true, ordering: .relaxed) }
}
