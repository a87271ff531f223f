import TabsyncCore

/// What the load generator knows of one workspace: the tabs it may target, kept from its own
/// submissions and answers (it is the workspace's only writer).
///
/// Invariants: `live` holds tabs whose add was acknowledged and whose remove was not yet submitted;
/// `live.count + pendingAdds` goes over `maxTabs` only while no tab is acknowledged (acks lagging
/// by seconds), so a workspace stays between `minTabs` and `maxTabs` once filled.
struct WorkspaceModel {
    static let minTabs = 20
    static let maxTabs = 200

    private(set) var live: [Int32] = []
    private var position: [Int32: Int] = [:]
    private(set) var pendingAdds = 0
    private var nextTab: Int32 = 1
    private var revision: UInt32 = 0

    var count: Int { live.count + pendingAdds }

    /// The kinds of ops the workload makes (raw values go into per-op bookkeeping).
    enum Kind: UInt8, CaseIterable {
        case add = 1, move, activate, update, remove
        var name: String { String(describing: self) }
    }

    /// One op to submit: what it is, the tab it names (for the answer's bookkeeping) and the op.
    struct Planned {
        var kind: Kind
        var tab: Int32
        var op: Operation
    }

    /// Picks the next op by `mix`, clamped so the workspace stays between the bounds.
    mutating func plan(mix: Mix, random: inout SplitMix64) -> Planned {
        var roll = Int(random.next() % UInt64(mix.total))
        var kind = Kind.add
        for (candidate, weight) in [(Kind.add, mix.add), (.move, mix.move), (.activate, mix.activate),
                                    (.update, mix.update), (.remove, mix.remove)] {
            if roll < weight { kind = candidate; break }
            roll -= weight
        }
        if count < Self.minTabs { kind = .add }
        if kind == .add && count >= Self.maxTabs { kind = .remove }
        if kind == .remove && count <= Self.minTabs { kind = .move }
        // No acknowledged tab to name (every add still in flight, when acks lag by seconds): only an
        // add can be made, even past `maxTabs` (the server's own tab limit then refuses it, and the
        // refusal is counted).
        if live.isEmpty { kind = .add }

        switch kind {
        case .add:
            let tab = nextTab
            nextTab += 1
            pendingAdds += 1
            let place: Place = random.next() % 2 == 0 ? .end : .index(UInt32(random.next() % UInt64(live.count + 1)))
            let op = Operation.add(
                tab: Tab(id: "t\(tab)", title: "Tab \(tab)", url: "https://example.com/docs/\(tab)"),
                place: place, activate: random.next() % 4 == 0)
            return Planned(kind: .add, tab: tab, op: op)
        case .move:
            let tab = live[Int(random.next() % UInt64(live.count))]
            let index = UInt32(random.next() % UInt64(live.count))
            return Planned(kind: .move, tab: tab, op: .move(tabId: "t\(tab)", place: .index(index)))
        case .activate:
            let tab = live[Int(random.next() % UInt64(live.count))]
            return Planned(kind: .activate, tab: tab, op: .activate(.tabId("t\(tab)")))
        case .update:
            let tab = live[Int(random.next() % UInt64(live.count))]
            revision &+= 1
            return Planned(kind: .update, tab: tab, op: .update(TabUpdate(tabId: "t\(tab)", title: "Tab \(tab) r\(revision)")))
        case .remove:
            let tab = live[Int(random.next() % UInt64(live.count))]
            forget(tab)
            return Planned(kind: .remove, tab: tab, op: .remove(tabId: "t\(tab)"))
        }
    }

    /// The server applied an op this model planned.
    mutating func applied(kind: Kind, tab: Int32) {
        guard kind == .add else { return }
        pendingAdds -= 1
        position[tab] = live.count
        live.append(tab)
    }

    /// The server refused an op this model planned.
    mutating func rejected(kind: Kind, tab: Int32) {
        if kind == .add { pendingAdds -= 1 }
    }

    /// The answer will never come (the connection dropped): the op may or may not have been applied.
    mutating func unanswered(kind: Kind, tab: Int32) {
        if kind == .add { pendingAdds -= 1 }
    }

    private mutating func forget(_ tab: Int32) {
        guard let index = position.removeValue(forKey: tab) else { return }
        let last = live.removeLast()
        if index < live.count {
            live[index] = last
            position[last] = index
        }
    }
}
