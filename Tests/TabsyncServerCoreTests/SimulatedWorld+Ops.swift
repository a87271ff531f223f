import TabsyncCore
import TabsyncTestSupport
@testable import TabsyncClient

/// The simulated clients' random ops: every op kind, computed from what the client sees (its
/// optimistic state) the way a UI would, plus the awkward cases — ops on tabs others removed, ids
/// that exist, keys equal to a tab's key, index places past the end, deep keys that make the server
/// rekey, keys too long to accept, invalid text and client-made rekeys.
extension SimulatedWorld {
    /// The weights of the place kinds a client picks, and how often it drops a tab before the first.
    struct PlaceMix: Equatable {
        /// Weights of: end, index, a key between neighbours, a key equal to a tab's, an empty key, a
        /// malformed key, a key of 40–128 bytes (a server rekey when over 64), a key over 128 bytes.
        var weights: [Int]
        /// The chance that a key place is computed for the gap before the first tab.
        var beforeFirst: Double

        static let usual = PlaceMix(weights: [12, 20, 40, 10, 2, 2, 6, 2], beforeFirst: 0)
        /// Rule 7's hard cases: many rekeys, keys before the first tab, keys equal to a tab's.
        static let rekeyHeavy = PlaceMix(weights: [4, 6, 40, 16, 1, 1, 14, 1], beforeFirst: 0.3)
    }

    static let urls = ["", "", "https://a.example/", "https://b.example/", "https://c.example/x"]
    static let titles = ["Docs", "Mail", "", "Ünïcødé ✓", "a much longer title for a tab"]

    /// A random op for client `c`, from its optimistic view.
    mutating func randomOp(for c: Int) -> TabsyncCore.Operation {
        let view = clients[c].session.state.optimistic
        // Someone usually makes a workspace editable again soon.
        if !view.editable && rng.chance(0.25) { return .setEditable(true) }
        let kinds: [(Int, TabsyncCore.Operation.Kind)] = [
            (24, .add), (8, .open), (18, .move), (12, .remove), (9, .activate), (12, .update),
            (3, .setEditable), (4, .replace), (1, .rekey), (2, .restore), (3, .reopen),
            (5, .group), (2, .ungroup), (2, .updateGroup),
        ]
        switch kinds[rng.weighted(kinds.map(\.0))].1 {
        case .add:
            return .add(tab: newTab(for: c, in: view), place: randomPlace(in: view, moving: nil), activate: rng.chance(0.4))
        case .open:
            var tab = newTab(for: c, in: view)
            if rng.chance(0.3), !view.tabs.isEmpty { tab.id = rng.pick(view.tabs).id }
            if rng.chance(0.5) { tab.url = rng.pick(Self.urls.dropFirst(2)) }
            return .open(tab: tab, place: randomPlace(in: view, moving: nil))
        case .move:
            let id = someTabId(in: view)
            return .move(tabId: id, place: randomPlace(in: view, moving: id))
        case .remove:
            return .remove(tabId: someTabId(in: view))
        case .activate:
            if rng.chance(0.5) { return .activate(.tabId(someTabId(in: view))) }
            return .activate(.index(UInt32(rng.int(0...view.tabs.count + 1))))
        case .update:
            var u = TabUpdate(tabId: someTabId(in: view))
            if rng.chance(0.95) {
                repeat {
                    if rng.chance(0.3) { u.title = rng.pick(Self.titles) }
                    if rng.chance(0.2) { u.url = rng.pick(Self.urls) }
                    if rng.chance(0.15) { u.icon = rng.pick(["", "📄", "star"]) }
                    if rng.chance(0.15) { u.badge = rng.pick(["", "3", "new"]) }
                    if rng.chance(0.3) { u.locked = rng.chance(0.5) }
                } while u.isEmpty
            }
            if rng.chance(0.03) { u.title = "bad \u{1B}[31m escape" }
            return .update(u)
        case .setEditable:
            return .setEditable(view.editable ? rng.chance(0.2) : rng.chance(0.9))
        case .replace:
            return .replace(tabs: replacement(of: view, for: c), groups: view.groups)
        case .rekey:
            return view.makeRekey()
        case .restore:
            // Mostly a version the client has seen; sometimes one not there yet.
            return .restore(version: UInt64(rng.int(0...Int(view.version) + 1)), state: nil)
        case .reopen:
            return .reopen(tabId: rng.chance(0.9) && !knownTabIds.isEmpty ? rng.pick(knownTabIds) : "nobody")
        case .group:
            let title = rng.chance(0.5) ? rng.pick(Self.titles) : nil
            return .group(GroupTabs(tabIds: someTabIds(in: view), groupId: someGroupId(in: view), title: title, color: someColor()))
        case .ungroup:
            return .ungroup(UngroupTabs(tabIds: someTabIds(in: view)))
        case .updateGroup:
            var update = GroupUpdate(groupId: someGroupId(in: view), title: rng.chance(0.6) ? rng.pick(Self.titles) : nil, color: someColor())
            if update.isEmpty && rng.chance(0.9) { update.color = TabGroup.defaultColor }
            return .updateGroup(update)
        }
    }

    /// A tab with a fresh id (sometimes an id that exists or existed: `TAB_EXISTS` or a re-add).
    mutating func newTab(for c: Int, in view: Workspace) -> Tab {
        let id: String
        if rng.chance(0.08), !knownTabIds.isEmpty {
            id = rng.pick(knownTabIds)
        } else {
            clients[c].madeTabs += 1
            id = "c\(c):t\(clients[c].madeTabs)"
            knownTabIds.append(id)
        }
        var tab = Tab(id: id, title: rng.pick(Self.titles), url: rng.pick(Self.urls), locked: rng.chance(0.05))
        if rng.chance(0.02) { tab.badge = "too long for a badge field" }
        // Sometimes asks for a group (the placement rule decides whether it gets it).
        if rng.chance(0.25) { tab.group = someGroupId(in: view) }
        return tab
    }

    /// Group ids the simulated clients use: a few, so clients race on the same groups.
    static let groupIds = ["g1", "g2", "g3", "g4", "g5"]

    /// A group the client sees, or (sometimes) one that is gone or new; rarely a malformed id.
    mutating func someGroupId(in view: Workspace) -> String {
        if rng.chance(0.01) { return "bad group id" }
        if !view.groups.isEmpty && rng.chance(0.6) { return rng.pick(view.groups).id }
        return rng.pick(Self.groupIds)
    }

    /// A colour of the nine, none, or (rarely) one that is not a colour.
    mutating func someColor() -> String? {
        if rng.chance(0.02) { return "magenta" }
        return rng.chance(0.5) ? nil : rng.pick(TabGroup.colors)
    }

    /// One to four tab ids for a group or ungroup, mostly neighbours in the view (as a user selects),
    /// sometimes any the client knows (some gone), rarely one listed twice.
    mutating func someTabIds(in view: Workspace) -> [String] {
        var ids: [String] = []
        if !view.tabs.isEmpty && rng.chance(0.6) {
            let start = rng.int(0...view.tabs.count - 1)
            ids = view.tabs[start..<min(view.tabs.count, start + rng.int(1...4))].map(\.id)
            if rng.chance(0.3) { ids.reverse() }
        } else {
            for _ in 0..<rng.int(1...4) {
                let id = someTabId(in: view)
                if !ids.contains(id) { ids.append(id) }
            }
        }
        if rng.chance(0.01), let first = ids.first { ids.append(first) }
        return ids
    }

    /// A tab id the client sees, or (sometimes) any id ever made: removed by someone, or never added.
    mutating func someTabId(in view: Workspace) -> String {
        if !view.tabs.isEmpty && rng.chance(0.8) { return rng.pick(view.tabs).id }
        if !knownTabIds.isEmpty && rng.chance(0.9) { return rng.pick(knownTabIds) }
        return "nobody"
    }

    /// A place as a client computes it from `view` (the moving tab left out of the neighbours).
    mutating func randomPlace(in view: Workspace, moving: String?) -> Place {
        let mix = options.placeMix
        let list = view.tabs.filter { $0.id != moving }
        let gap = mix.beforeFirst > 0 && rng.chance(mix.beforeFirst) ? 0 : rng.int(0...list.count)
        let lower = gap > 0 ? list[gap - 1].key : nil
        let upper = gap < list.count ? list[gap].key : nil
        switch rng.weighted(mix.weights) {
        case 0: return .end
        case 1: return .index(UInt32(rng.int(0...list.count + 2)))
        case 2: return .key(PositionKey.between(lower, upper))
        case 3:
            // Deliberately equal to a key that is there (rule 1), the moving tab's own included.
            guard !view.tabs.isEmpty else { return .key(PositionKey.between(lower, upper)) }
            return .key(rng.pick(view.tabs).key)
        case 4: return .key("")
        case 5: return .key(rng.pick(["a00", "0", "a", "A00000000000000000000000000", "a0 "]))
        case 6: return .key(RuleSevenOracle.deepKey(between: lower, upper, length: rng.int(40...128)))
        default: return .key(RuleSevenOracle.deepKey(between: lower, upper, length: rng.int(129...140)))
        }
    }

    /// A new list for replace: tabs kept, dropped, shuffled and added; locked tabs usually left at
    /// their index (else `LOCKED`).
    mutating func replacement(of view: Workspace, for c: Int) -> [Tab] {
        var tabs = view.tabs
        if rng.chance(0.7) {
            // Keep locked tabs in place; shuffle and drop only among the others.
            let free = tabs.indices.filter { !tabs[$0].locked }
            let shuffled = free.map { tabs[$0] }.shuffled(using: &rng)
            for (i, tab) in zip(free, shuffled) { tabs[i] = tab }
            if let last = tabs.last, !last.locked, rng.chance(0.4) { tabs.removeLast() }
        } else {
            tabs = tabs.filter { _ in rng.chance(0.8) }.shuffled(using: &rng)
        }
        // Shuffled groups are mostly dropped; kept, they may be split (refused INVALID_ARGUMENT).
        if tabs != view.tabs && rng.chance(0.8) { for i in tabs.indices { tabs[i].group = "" } }
        for _ in 0..<rng.int(0...2) { tabs.append(newTab(for: c, in: view)) }
        if rng.chance(0.05), let t = tabs.first { tabs.append(t) }  // an id given twice
        return tabs
    }
}
