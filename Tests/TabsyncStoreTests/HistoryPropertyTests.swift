import Foundation
import Testing
import TabsyncCore
@testable import TabsyncStore
import TabsyncTestSupport

/// History's properties for random logs (docs/design.md, "History"): the state a store answers for
/// version v is the replay of the first v ops; `restore(v)` makes the state at v again, at a higher
/// version, or is refused for the documented reasons only; every closed tab the history lists comes
/// back with the fields it last had.
@Suite struct HistoryPropertyTests {
    /// A random log on a sequencer, committed to a memory store keeping history; every state kept.
    struct World {
        var rng: SplitMix64
        var sequencer = Sequencer(workspace: Workspace(id: "w", epoch: "epoch-1"), limits: Limits(maxTabs: 12, logRetention: 16))
        var states: [Workspace]
        let store = MemoryStore(history: .standard, milestoneInterval: 7)
        var seq: UInt64 = 0
        var made = 0

        init(seed: UInt64) {
            rng = SplitMix64(seed: seed)
            states = [sequencer.workspace]
        }

        mutating func submit(_ op: TabsyncCore.Operation) -> Sequencer.Outcome {
            seq += 1
            let outcome = sequencer.submit(clientId: "c", seq: seq, baseVersion: 0, op: op)
            if case .applied(let ops) = outcome {
                for applied in ops {
                    var next = states.last!
                    try! next.apply(applied: applied)
                    states.append(next)
                }
            }
            let record = CommitRecord(workspaceId: "w", clientId: "c", seq: seq, outcome: outcome, after: sequencer)!
            try! store.commit(CommitBatch(records: [record], workspaces: ["w": sequencer.workspace], logRetention: 16))
            return outcome
        }

        mutating func randomOp() -> TabsyncCore.Operation {
            let tabs = sequencer.workspace.tabs
            let pick = tabs.isEmpty ? nil : rng.pick(tabs).id
            switch (rng.int(0...9), pick) {
            case (0...3, _), (_, nil):
                made += 1
                return .add(tab: Tab(id: "t\(made)", title: "T\(made)", url: "https://e.example/\(made)", badge: "\(made % 7)"),
                            place: .index(UInt32(rng.int(0...tabs.count))), activate: rng.chance(0.3))
            case (4, let id?): return .move(tabId: id, place: .index(UInt32(rng.int(0...tabs.count))))
            case (5, let id?), (6, let id?): return .remove(tabId: id)
            case (7, let id?): return .update(TabUpdate(tabId: id, title: "renamed \(rng.int(0...99))", locked: rng.chance(0.15)))
            case (8, _): return .setEditable(rng.chance(0.8))
            case (_, let id?): return .activate(.tabId(id))
            }
        }
    }

    @Test func theStateAtEveryVersionIsTheReplayAndARestoreMakesItAgain() throws {
        var restored = 0
        for seed in UInt64(1)...120 {
            var world = World(seed: seed)
            for _ in 0..<50 { _ = world.submit(world.randomOp()) }
            let reader = HistoryReader(store: world.store)
            for v in 0..<world.states.count {
                guard case .state(let state) = try reader.answer(.version(UInt64(v)), workspaceId: "w") else {
                    Issue.record("seed \(seed): no state at v\(v)")
                    continue
                }
                #expect(state.tabs == world.states[v].tabs && state.activeTabId == world.states[v].activeTabId
                        && state.editable == world.states[v].editable, "seed \(seed) v\(v)")
                // Every past state carries the workspace's epoch, v0 (replayed from nothing) too.
                #expect(state.epoch == world.sequencer.workspace.epoch && !state.epoch.isEmpty, "seed \(seed) v\(v): epoch \(state.epoch)")
            }
            for _ in 0..<5 {
                let v = world.rng.int(0...world.states.count - 1)
                let before = world.sequencer.workspace
                let target = world.states[v]
                switch world.submit(.restore(version: UInt64(v), state: RestoredState(target))) {
                case .applied(let ops):
                    restored += 1
                    let now = world.sequencer.workspace
                    #expect(ops.count == 1 && now.version == before.version + 1, "seed \(seed)")
                    #expect(now.tabs == target.tabs && now.activeTabId == target.activeTabId && now.editable == target.editable,
                            "seed \(seed): restore of v\(v)")
                case .rejected(let error):
                    let lockedGone = before.tabs.contains { $0.locked && target.tab($0.id) == nil }
                    #expect((error == .notEditable && !before.editable) || (error.code == .locked && lockedGone),
                            "seed \(seed): restore of v\(v) refused \(error)")
                default:
                    Issue.record("seed \(seed): restore neither applied nor refused")
                }
            }
        }
        #expect(restored > 100, "only \(restored) restores applied: the property went mostly untested")
    }

    @Test func everyClosedTabComesBackWithTheFieldsItLastHad() throws {
        var checked = 0
        for seed in UInt64(1)...120 {
            var world = World(seed: seed)
            for _ in 0..<60 { _ = world.submit(world.randomOp()) }
            guard case .closed(let closed) = try HistoryReader(store: world.store).answer(.closed(limit: 100), workspaceId: "w")
            else {
                Issue.record("no closed list")
                return
            }
            let open = Set(world.sequencer.workspace.tabs.map(\.id))
            #expect(Set(closed.map(\.tab.id)).count == closed.count, "seed \(seed): a tab listed twice")
            for entry in closed {
                #expect(!open.contains(entry.tab.id), "seed \(seed): \(entry.tab.id) is open")
                let last = try #require(world.states.lastIndex { $0.tab(entry.tab.id) != nil })
                #expect(entry.version == UInt64(last + 1), "seed \(seed): \(entry.tab.id) closed at v\(entry.version), last seen v\(last)")
                #expect(entry.tab == world.states[last].tab(entry.tab.id), "seed \(seed): \(entry.tab.id)'s fields")
                checked += 1
            }
            #expect(zip(closed, closed.dropFirst()).allSatisfy { $0.version >= $1.version }, "seed \(seed): not newest first")
        }
        #expect(checked > 200)
    }
}
