import TabsyncCore
import TabsyncTestSupport

/// A seeded random op against what a client sees, covering every op kind a client may submit (the
/// client tests' and the cluster tests' one generator).
package struct OpGenerator {
    package var generator: SplitMix64
    package let prefix: String
    package var counter = 0

    package init(seed: UInt64, prefix: String) {
        generator = SplitMix64(seed: seed)
        self.prefix = prefix
    }

    package mutating func place(in workspace: Workspace) -> Place {
        let tabs = workspace.tabs
        switch Int.random(in: 0..<3, using: &generator) {
        case 0: return .end
        case 1: return .index(UInt32.random(in: 0...UInt32(tabs.count + 1), using: &generator))
        default:
            let gap = Int.random(in: 0...tabs.count, using: &generator)
            let before = gap > 0 ? tabs[gap - 1].key : nil
            let after = gap < tabs.count ? tabs[gap].key : nil
            return .key(PositionKey.between(before, after))
        }
    }

    package mutating func newTab() -> Tab {
        counter += 1
        return Tab(id: "\(prefix)-\(counter)", title: "Tab \(counter)", url: "https://example.com/\(prefix)/\(counter)")
    }

    package mutating func next(for workspace: Workspace) -> Operation {
        let tabs = workspace.tabs
        let existing = tabs.randomElement(using: &generator)
        let roll = Int.random(in: 0..<100, using: &generator)
        guard let existing, tabs.count >= 3 else {
            return .add(tab: newTab(), place: place(in: workspace), activate: Bool.random(using: &generator))
        }
        switch roll {
        case 0..<20:
            if tabs.count > 25 { return .remove(tabId: existing.id) }
            return .add(tab: newTab(), place: place(in: workspace), activate: Bool.random(using: &generator))
        case 20..<28:
            // Open an existing tab (by id or url) or a new one.
            if Bool.random(using: &generator) {
                return .open(tab: Tab(id: existing.id), place: .end)
            }
            return .open(tab: newTab(), place: place(in: workspace))
        case 28..<48:
            return .move(tabId: existing.id, place: place(in: workspace))
        case 48..<60:
            return .remove(tabId: existing.id)
        case 60..<72:
            if Bool.random(using: &generator) { return .activate(.tabId(existing.id)) }
            return .activate(.index(UInt32.random(in: 0..<UInt32(tabs.count), using: &generator)))
        case 72..<88:
            counter += 1
            var update = TabUpdate(tabId: existing.id)
            switch Int.random(in: 0..<4, using: &generator) {
            case 0: update.title = "Renamed \(counter)"
            case 1: update.badge = Bool.random(using: &generator) ? "\(counter % 100)" : ""
            case 2: update.icon = "star"
            default: update.locked = !existing.locked
            }
            return .update(update)
        case 88..<94:
            return .setEditable(!workspace.editable || Int.random(in: 0..<4, using: &generator) != 0)
        default:
            // Replace: the list reversed, minus one unlocked tab, plus a new one.
            var list = Array(tabs.reversed())
            if let drop = list.firstIndex(where: { !$0.locked }) { list.remove(at: drop) }
            list.append(newTab())
            return .replace(tabs: list)
        }
    }
}
