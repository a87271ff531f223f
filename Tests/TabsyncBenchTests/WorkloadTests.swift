@testable import TabsyncBench
import TabsyncCore
import Testing

@Suite("bench workload")
struct WorkloadTests {
    @Test("the default mix keeps a workspace between 20 and 200 tabs when every op is applied")
    func staysWithinBounds() {
        var model = WorkspaceModel()
        var random = SplitMix64(seed: 3)
        var seenAbove20 = false
        for _ in 0..<20_000 {
            let planned = model.plan(mix: .default, random: &random)
            model.applied(kind: planned.kind, tab: planned.tab)
            if model.count >= 20 { seenAbove20 = true }
            if seenAbove20 { #expect((20...200).contains(model.count)) }
        }
        #expect(seenAbove20)
    }

    @Test("with no acknowledged tab and 200 adds in flight, it still plans an op (an add)")
    func plansWhileAcksLag() {
        var model = WorkspaceModel()
        var random = SplitMix64(seed: 5)
        for _ in 0..<250 {
            let planned = model.plan(mix: .default, random: &random)
            #expect(planned.kind == .add)
        }
        #expect(model.count == 250 && model.live.isEmpty)
    }
}
