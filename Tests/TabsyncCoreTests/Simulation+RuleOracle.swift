import TabsyncCore
import TabsyncTestSupport

/// An independent check of the server's answer to each op against docs/design.md's rules, written from
/// the design text rather than from core's code: with it, the simulation catches a rule that is
/// broken the same way for everyone (which convergence alone cannot see).
///
/// Checked, from the state just before the op: remove wins (an op on a tab that is not there is
/// `TAB_GONE`, an applied op names a tab that was there); removing the active tab activates its right
/// neighbour, else its left one; rules 7 and 1 (a submitted key, translated through each rekey since
/// its baseVersion, is kept, or, when taken, replaced by one just after the tab holding it; refused
/// when one of those rekeys had left the server's log window); locked tabs are not moved or removed; a non-editable workspace is not
/// changed; `open` activates the tab with the same id, else the first with the same url, else adds.
extension Simulation {
    mutating func checkRules(before: Workspace, heldRekeys: Set<UInt64>, submitted p: Replica.PendingOp, outcome: Sequencer.Outcome) {
        let applied: AppliedOp?
        let refusal: ErrorCode?
        switch outcome {
        case .applied(let ops): (applied, refusal) = (ops.last, nil)
        case .rejected(let error): (applied, refusal) = (nil, error.code)
        case .answeredAgain, .ignored: return
        }
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

        checkKeyPlace(before: before, heldRekeys: heldRekeys, submitted: p, applied: applied, refusal: refusal)
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
    }

    /// Rules 7 and 1 (see ``RuleSevenOracle``) for an op with a key place, or a refusal
    /// (`INVALID_ARGUMENT`) when a rekey since its baseVersion is one the server no longer held (it
    /// was dropped with the log): such a key is never read against keys it was not computed for.
    /// `heldRekeys` are the versions of the rekeys the server held just before the op.
    mutating func checkKeyPlace(
        before: Workspace, heldRekeys: Set<UInt64>, submitted p: Replica.PendingOp, applied: AppliedOp?, refusal: ErrorCode?
    ) {
        if let (submitted, movingId) = Self.keyPlace(of: p.op) {
            let since = p.baseVersion > 0 ? rekeyVersions.filter { $0 > p.baseVersion && $0 <= before.version } : []
            let forgotten = since.filter { !heldRekeys.contains($0) }
            if !forgotten.isEmpty {
                switch (applied?.op, refusal) {
                case (.activate?, _) where p.op.kind == .open, (nil, .invalidArgument?):
                    stats.staleKeyRefusals += applied == nil ? 1 : 0
                default:
                    fail("\(p.op) base \(p.baseVersion), computed before the rekeys at \(forgotten) the server no longer held, "
                        + "became \(applied.map { "\($0.op)" } ?? "\(String(describing: refusal))"), not INVALID_ARGUMENT")
                }
                return
            }
            let finalKey: String?
            switch applied?.op {
            case .add(let t, _, _)?: finalKey = t.key
            case .move(_, .key(let k))?: finalKey = k
            default: finalKey = nil
            }
            if applied != nil && finalKey != nil && !since.isEmpty { stats.translatedKeyPlaces += 1 }
            if let applied, let finalKey, let problem = RuleSevenOracle.placementProblem(
                submitted: submitted, baseVersion: p.baseVersion, moving: movingId, finalKey: finalKey,
                appliedVersion: applied.version, history: history, rekeyVersions: rekeyVersions)
            {
                fail("\(p.op) base \(p.baseVersion): \(problem)")
            }
        }
    }

    /// The non-empty key an add, open or move places by, with the moved tab's id for a move.
    static func keyPlace(of op: Operation) -> (key: String, moving: String?)? {
        switch op {
        case .add(_, .key(let k), _) where !k.isEmpty, .open(_, .key(let k)) where !k.isEmpty: (k, nil)
        case .move(let id, .key(let k)) where !k.isEmpty: (k, id)
        default: nil
        }
    }
}
