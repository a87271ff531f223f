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
