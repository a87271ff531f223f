import Foundation
@testable import TabsyncBench
import TabsyncProto
import TabsyncTestServer
import TabsyncTestSupport
import Testing

@Suite("churn ledger: what acknowledged ops leave")
struct ChurnLedgerTests {
    @Test("the expected state replays the acknowledged ops in version order, whatever order the answers came in")
    func replaysInVersionOrder() {
        var ledger = ChurnLedger(workspaces: 1)
        // Answers arrive out of order: the remove (v3) before the update (v2) before the add (v1).
        ledger.applied(workspace: 0, name: "w", client: 1, seq: 2, version: 3, op: ChurnOp(kind: .add, tab: 2, titleSeq: 2))
        ledger.applied(workspace: 0, name: "w", client: 1, seq: 3, version: 4, op: ChurnOp(kind: .remove, tab: 2, titleSeq: 0))
        ledger.applied(workspace: 0, name: "w", client: 2, seq: 2, version: 2, op: ChurnOp(kind: .update, tab: 1, titleSeq: 2))
        ledger.applied(workspace: 0, name: "w", client: 2, seq: 1, version: 1, op: ChurnOp(kind: .add, tab: 1, titleSeq: 1))
        let expected = ledger.expected(workspace: 0)
        #expect(expected.version == 4)
        #expect(expected.tabs == ["k2-1": "c2 s2"])
        #expect(ledger.problems.isEmpty)
        #expect(ledger.acknowledged == 4)
    }

    @Test("an op answered at two versions, or two ops at one version, is a problem; a repeated answer is not")
    func conflictsAreProblems() {
        var ledger = ChurnLedger(workspaces: 1)
        let add = ChurnOp(kind: .add, tab: 1, titleSeq: 1)
        ledger.applied(workspace: 0, name: "w", client: 1, seq: 1, version: 1, op: add)
        ledger.applied(workspace: 0, name: "w", client: 1, seq: 1, version: 1, op: add)
        #expect(ledger.problems.isEmpty)
        #expect(ledger.repeats == 1)
        ledger.applied(workspace: 0, name: "w", client: 1, seq: 1, version: 2, op: add)
        #expect(ledger.problems.count == 1)
        ledger.applied(workspace: 0, name: "w", client: 3, seq: 1, version: 1, op: add)
        #expect(ledger.problems.count == 2)
        ledger.sawEpoch("e1", workspace: 0, name: "w")
        ledger.sawEpoch("e2", workspace: 0, name: "w")
        #expect(ledger.problems.count == 3)
        #expect(ledger.acknowledged == 1)
    }

    @Test("an applied op decodes back into the churn op that made it")
    func decodesAppliedOps() throws {
        let update = Tabsync_V1_Op.with { $0.update = .with { $0.tabID = "k7-3"; $0.title = "c7 s12" } }
        let op = try #require(ChurnGenerator.decode(update, client: 7))
        #expect(op.kind == .update && op.tab == 3 && op.titleSeq == 12)
        // Another client's tab is not this client's op.
        let remove = Tabsync_V1_Op.with { $0.remove = .with { $0.tabID = "k8-3" } }
        #expect(ChurnGenerator.decode(remove, client: 7) == nil)
    }
}

@Suite("tabsync bench --churn against the real server")
struct ChurnSmokeTests {
    @Test("drops, mid-submit drops and stalls: every acknowledged op is in the server's snapshot once")
    func churnPassesItsChecks() async throws {
        let server = try TestServer()
        defer { server.stop() }
        let base = try BenchConfiguration.parse([
            "--server", "127.0.0.1:\(server.port)", "--seed", "11", "--workspaces", "4", "--clients", "5",
            "--rate", "150", "--duration", "\(4 * testTimeScale)",
        ])
        var options = try ChurnOptions.parse([
            "--churn", "--churn-lifetime", "0.7", "--churn-mid-submit", "0.6", "--slow-readers", "0.3", "--stall", "0.5",
            "--settle", "\(30 * testTimeScale)", "--reconnect-max", "0.5",
        ])
        try options.validate()
        let configuration = try options.configuration(base: base)
        let result = try await withTimeout(scaled(.seconds(120))) { try await ChurnRunner.runDetached(configuration) }
        #expect(result.problems.isEmpty, "\(result.problems)")
        #expect(result.acknowledged > 100)
        #expect(result.drops > 10 && result.midSubmitDrops > 0)
        #expect(result.recovered > 0)
        #expect(result.workspacesVerified == 4)
        #expect(result.passed)
    }
}

@Suite("tabsync bench --churn --storm against a server that restarts")
struct StormSmokeTests {
    /// Each client's latest Welcome in the bench's `--welcome-log` (wall-clock nanoseconds).
    static func welcomes(_ path: String) -> [Int: UInt64] {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return [:] }
        var latest: [Int: UInt64] = [:]
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: " ")
            if fields.count == 2, let client = Int(fields[0]), let at = UInt64(fields[1]) { latest[client] = at }
        }
        return latest
    }

    @Test("every client, welcomed, sends no op; after the server restarts every one is welcomed again")
    func everyClientComesBack() async throws {
        let server = try TestServer(.sqlite)
        defer { server.stop() }
        let directory = TemporaryDirectory(prefix: "tabsync-storm-test")
        let log = directory.path + "/welcomes"
        let base = try BenchConfiguration.parse([
            "--server", "127.0.0.1:\(server.port)", "--seed", "5", "--workspaces", "5", "--clients", "8",
            "--rate", "0", "--duration", "\(20 * testTimeScale)",
        ])
        var options = try ChurnOptions.parse([
            "--churn", "--storm", "--welcome-log", log, "--settle", "\(30 * testTimeScale)", "--reconnect-max", "0.5",
        ])
        try options.validate()
        let configuration = try options.configuration(base: base)
        let run = Task { try await ChurnRunner.runDetached(configuration) }
        #expect(await waitUntil(deadline: .seconds(60)) { Self.welcomes(log).count == 40 })
        let restartedAt = UInt64(Date().timeIntervalSince1970 * 1e9)
        try server.restart()
        #expect(await waitUntil(deadline: .seconds(60)) { Self.welcomes(log).values.filter { $0 > restartedAt }.count == 40 })
        let result = try await withTimeout(scaled(.seconds(180))) { try await run.value }
        #expect(result.problems.isEmpty, "\(result.problems)")
        #expect(result.sent == 0 && result.drops == 0 && result.stalls == 0)
        #expect(result.welcomes >= 80)
        #expect(result.workspacesVerified == 5)
    }

    @Test("--storm sends no ops: a rate is refused, naming the flag")
    func stormRefusesARate() throws {
        let base = try BenchConfiguration.parse(["--rate", "10"])
        let options = try ChurnOptions.parse(["--churn", "--storm"])
        #expect(throws: BenchError.invalidArgument("--storm sends no ops: give --rate 0")) {
            try options.configuration(base: base)
        }
    }
}
