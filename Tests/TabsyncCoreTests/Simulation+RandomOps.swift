import TabsyncCore
import TabsyncTestSupport

/// The random op mix of the convergence simulation: every op kind, computed from what the client
/// sees (its optimistic state) the way a UI would, plus the awkward cases — ops on tabs others
/// removed, ids that exist, keys equal to a tab's key, index places past the end, keys long enough
/// to make the server rekey, keys too long to accept, invalid text and client-made rekeys.
extension Simulation {
    static let urls = ["", "", "https://a.example/", "https://b.example/", "https://c.example/x"]
    static let titles = ["Docs", "Mail", "", "Ünïcødé ✓", "a much longer title for a tab"]

    /// A random op for `client`, from its optimistic view.
    mutating func randomOp<R: RandomNumberGenerator>(for client: Int, using rng: inout R) -> Operation {
        let view = clients[client].replica.optimistic
        // Someone usually makes a workspace editable again soon.
        if !view.editable && rng.chance(0.25) { return .setEditable(true) }
        let kinds: [(Int, Operation.Kind)] = [
            (24, .add), (8, .open), (18, .move), (12, .remove), (9, .activate), (12, .update),
            (3, .setEditable), (4, .replace), (1, .rekey),
        ]
        let kind = kinds[rng.weighted(kinds.map(\.0))].1
        switch kind {
        case .add:
            return .add(tab: newTab(for: client, using: &rng), place: randomPlace(in: view, moving: nil, using: &rng), activate: rng.chance(0.4))
        case .open:
            var tab = newTab(for: client, using: &rng)
            if rng.chance(0.3), let existing = view.tabs.randomElement(using: &rng) { tab.id = existing.id }
            if rng.chance(0.5) { tab.url = rng.pick(Self.urls.dropFirst(2)) }
            return .open(tab: tab, place: randomPlace(in: view, moving: nil, using: &rng))
        case .move:
            let id = someTabId(in: view, using: &rng)
            return .move(tabId: id, place: randomPlace(in: view, moving: id, using: &rng))
        case .remove:
            return .remove(tabId: someTabId(in: view, using: &rng))
        case .activate:
            if rng.chance(0.5) { return .activate(.tabId(someTabId(in: view, using: &rng))) }
            return .activate(.index(UInt32(rng.int(0...view.tabs.count + 1))))
        case .update:
            var u = TabUpdate(tabId: someTabId(in: view, using: &rng))
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
            return .replace(tabs: replacement(of: view, for: client, using: &rng))
        case .rekey:
            return view.makeRekey()
        }
    }

    /// A tab with a fresh id (sometimes an id that exists or existed: `TAB_EXISTS` or a re-add).
    mutating func newTab<R: RandomNumberGenerator>(for client: Int, using rng: inout R) -> Tab {
        let id: String
        if rng.chance(0.08), !knownTabIds.isEmpty {
            id = rng.pick(knownTabIds)
        } else {
            clients[client].madeTabs += 1
            id = "\(clients[client].id):t\(clients[client].madeTabs)"
            noteTabId(id)
        }
        var tab = Tab(id: id, title: rng.pick(Self.titles), url: rng.pick(Self.urls), locked: rng.chance(0.05))
        if rng.chance(0.02) { tab.badge = "too long for a badge field" }
        return tab
    }

    /// A tab id the client sees, or (sometimes) any id ever known: removed by someone, or never added.
    func someTabId<R: RandomNumberGenerator>(in view: Workspace, using rng: inout R) -> String {
        if !view.tabs.isEmpty && rng.chance(0.8) { return rng.pick(view.tabs).id }
        if !knownTabIds.isEmpty && rng.chance(0.9) { return rng.pick(knownTabIds) }
        return "nobody"
    }

    /// A place as a client computes it from `view` (the moving tab left out of the neighbours).
    func randomPlace<R: RandomNumberGenerator>(in view: Workspace, moving: String?, using rng: inout R) -> Place {
        let list = view.tabs.filter { $0.id != moving }
        let gap = placeMix.beforeFirst > 0 && rng.chance(placeMix.beforeFirst) ? 0 : rng.int(0...list.count)
        let lower = gap > 0 ? list[gap - 1].key : nil
        let upper = gap < list.count ? list[gap].key : nil
        switch rng.weighted(placeMix.weights) {
        case 0: return .end
        case 1: return .index(UInt32(rng.int(0...list.count + 2)))
        case 2: return .key(PositionKey.between(lower, upper))
        case 3:
            // Deliberately equal to a key that is there (rule 1), the moving tab's own included.
            guard let tab = view.tabs.randomElement(using: &rng) else { return .key(PositionKey.between(lower, upper)) }
            return .key(tab.key)
        case 4: return .key("")
        case 5: return .key(rng.pick(["a00", "0", "a", "A00000000000000000000000000", "a0 "]))
        case 6: return .key(Self.deepKey(between: lower, upper, length: rng.int(40...128)))
        default: return .key(Self.deepKey(between: lower, upper, length: rng.int(129...140)))
        }
    }

    /// A valid key of about `length` bytes strictly between `lower` and `upper` (what many inserts
    /// into one gap make), or a plain `between` when none of that shape fits.
    static func deepKey(between lower: String?, _ upper: String?, length: Int) -> String {
        let base = lower ?? PositionKey.between(nil, upper)
        let pad = max(length - base.utf8.count - 1, 0)
        let key = base + String(repeating: "0", count: pad) + "1"
        if PositionKey.isValid(key), lower.map({ PositionKey.less($0, key) }) ?? true, upper.map({ PositionKey.less(key, $0) }) ?? true {
            return key
        }
        return PositionKey.between(lower, upper)
    }

    /// A new list for replace: tabs kept, dropped, shuffled and added; locked tabs usually left at
    /// their index (else `LOCKED`).
    mutating func replacement<R: RandomNumberGenerator>(of view: Workspace, for client: Int, using rng: inout R) -> [Tab] {
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
        for _ in 0..<rng.int(0...2) { tabs.append(newTab(for: client, using: &rng)) }
        if rng.chance(0.05), let t = tabs.first { tabs.append(t) } // duplicate id
        return tabs
    }
}
