import TabsyncCore

/// An independent check of the server's answer to each op against DESIGN.md's rules, written from
/// the design text rather than from core's code: with it, the simulation catches a rule that is
/// broken the same way for everyone (which convergence alone cannot see).
///
/// Checked, from the state just before the op: remove wins (an op on a tab that is not there is
/// `TAB_GONE`, an applied op names a tab that was there); removing the active tab activates its right
/// neighbour, else its left one; rule 1 (a submitted key is kept, or, when taken, replaced by one just
/// after the tab holding it); locked tabs are not moved or removed; a non-editable workspace is not
/// changed; `open` activates the tab with the same id, else the first with the same url, else adds.
extension Simulation {
    mutating func checkRules(before: Workspace, submitted p: Replica.PendingOp, outcome: Sequencer.Outcome) {
        let applied: AppliedOp?
        let refusal: ErrorCode?
        switch outcome {
        case .applied(let ops): (applied, refusal) = (ops.last, nil)
        case .rejected(let error): (applied, refusal) = (nil, error.code)
        case .answeredAgain, .ignored: return
        }
        let rekeyedNow: Bool
        if case .applied(let ops) = outcome { rekeyedNow = ops.count > 1 } else { rekeyedNow = false }

        // Remove wins: the tab an op names must be there.
        let named: String?
        switch p.op {
        case .move(let id, _), .remove(let id): named = id
        case .update(let u): named = u.tabId
        case .activate(.tabId(let id)): named = id
        default: named = nil
        }
        if let named {
            let there = before.index(of: named) != nil
            if refusal == .tabGone && there { fail("\(p.op) refused TAB_GONE, but \(named) was there") }
            if applied != nil && !there { fail("\(p.op) applied, but \(named) was not there (remove wins)") }
            if let applied, there, before.tab(named)!.locked, [.move, .remove].contains(p.op.kind) {
                fail("\(applied.op) applied to locked tab \(named)")
            }
        }

        guard let applied else { return }

        // Not editable: nothing that changes the list.
        if !before.editable {
            switch applied.op {
            case .add, .move, .remove, .replace: fail("\(applied.op) applied while the workspace was not editable")
            default: break
            }
        }

        // Removing the active tab activates its right neighbour, else its left one.
        if case .remove(let id) = applied.op, let i = before.index(of: id) {
            let expected: String
            if before.activeTabId != id {
                expected = before.activeTabId
            } else {
                expected = i + 1 < before.tabs.count ? before.tabs[i + 1].id : (i > 0 ? before.tabs[i - 1].id : "")
            }
            if applied.activeTabId != expected {
                fail("removing \(id) from \(before.tabs.map(\.id)) (active \(before.activeTabId)) made \(applied.activeTabId) active, not \(expected)")
            }
        }

        // Open: the same id, else the first tab with the same non-empty url, else an add.
        if case .open(let tab, _) = p.op {
            let existing = before.tab(tab.id) ?? (tab.url.isEmpty ? nil : before.tabs.first { $0.url == tab.url })
            switch (existing, applied.op) {
            case (let t?, .activate(.tabId(let id))) where id == t.id: break
            case (nil, .add(let added, _, true)) where added.id == tab.id: break
            default: fail("open \(tab.id) (url \(tab.url)) on \(before.tabs.map { "\($0.id)|\($0.url)" }) became \(applied.op)")
            }
        }

        // Rule 1, where no translation is involved (no rekey since the op's baseVersion, nor now).
        let translated = rekeyedNow || (p.baseVersion > 0 && rekeyVersions.contains { $0 > p.baseVersion })
        guard !translated else { return }
        let submittedKey: String?
        let finalKey: String?
        let moving: String?
        switch (p.op, applied.op) {
        case (.add(_, .key(let k), _), .add(let t, _, _)), (.open(_, .key(let k)), .add(let t, _, _)):
            (submittedKey, finalKey, moving) = (k, t.key, nil)
        case (.move(let id, .key(let k)), .move(_, .key(let f))):
            (submittedKey, finalKey, moving) = (k, f, id)
        default:
            (submittedKey, finalKey, moving) = (nil, nil, nil)
        }
        guard let k = submittedKey, !k.isEmpty, let f = finalKey else { return }
        let others = before.tabs.filter { $0.id != moving }
        if moving.flatMap({ before.tab($0) })?.key == k || !others.contains(where: { $0.key == k }) {
            if f != k { fail("\(p.op): the free key \(k) became \(f)") }
        } else if !PositionKey.less(k, f) || others.contains(where: { PositionKey.less(k, $0.key) && PositionKey.less($0.key, f) }) {
            fail("\(p.op): the taken key \(k) became \(f), not a key just after the tab holding it")
        }
    }
}
