import TabsyncCore

/// docs/design.md rule 7 (translation of a key computed before a rekey) followed by rule 1 (a taken key
/// goes just after the tab holding it), written from the design text rather than from core's code,
/// for the rule oracle of the server core's simulation (`Tests/TabsyncServerCoreTests/RuleOracle.swift`)
/// and the rule 7 property tests of `Sequencer` (`Tests/TabsyncCoreTests`).
///
/// It works from the server's whole history (`history[v]` is the workspace at version `v`), so it
/// knows every rekey, also those the server has dropped with its log window.
package enum RuleSevenOracle {
    /// Translation through one rekey; `old` and `new` are the tabs just before and just after it (the
    /// same tabs in the same order). A key equal to tab T's old key becomes T's new key; a key that sat
    /// between the old keys of L and R (either may be an open end) becomes the key
    /// `PositionKey.between` makes between the new keys of L and R.
    package static func translate(_ key: String, old: [Tab], new: [Tab]) -> String {
        if let t = old.firstIndex(where: { $0.key == key }) { return new[t].key }
        let r = old.firstIndex(where: { PositionKey.less(key, $0.key) }) ?? old.count
        return PositionKey.between(r > 0 ? new[r - 1].key : nil, r < new.count ? new[r].key : nil)
    }

    /// The server rekeys a key submitted with `baseVersion` goes through when the op is applied at
    /// `appliedVersion`: every one since `baseVersion` (> 0), or for `baseVersion` 0 only the one the
    /// op itself caused. A server rekey is always applied just before the op that caused it.
    package static func rekeys(since baseVersion: UInt64, appliedAt appliedVersion: UInt64, rekeyVersions: [UInt64]) -> [UInt64] {
        rekeyVersions.filter { v in
            v < appliedVersion && (baseVersion > 0 ? v > baseVersion : v == appliedVersion - 1)
        }
    }

    /// The key `submitted` translated through `through` (ascending rekey versions), with each step.
    package static func translate(_ submitted: String, through: [UInt64], history: [Workspace]) -> (key: String, steps: [String]) {
        var k = submitted
        var steps: [String] = []
        for v in through {
            let t = translate(k, old: history[Int(v - 1)].tabs, new: history[Int(v)].tabs)
            steps.append("v\(v): \(k) -> \(t)")
            k = t
        }
        return (k, steps)
    }

    /// What is wrong with an op whose key place `submitted` (with `baseVersion`) was applied at
    /// `appliedVersion` with the final key `finalKey` (`moving` is the moved tab, nil for an add), or
    /// nil when it is where rules 7 and 1 put it: the translated key when free (or the moving tab's
    /// own), else a key just after the tab holding it.
    package static func placementProblem(
        submitted: String, baseVersion: UInt64, moving: String?, finalKey f: String, appliedVersion: UInt64,
        history: [Workspace], rekeyVersions: [UInt64]
    ) -> String? {
        let through = rekeys(since: baseVersion, appliedAt: appliedVersion, rekeyVersions: rekeyVersions)
        let (k, steps) = translate(submitted, through: through, history: history)
        let path = steps.isEmpty ? "" : " (translated \(steps.joined(separator: ", ")))"
        let placedIn = history[Int(appliedVersion - 1)]
        let others = placedIn.tabs.filter { $0.id != moving }
        if moving.flatMap({ placedIn.tab($0) })?.key == k || !others.contains(where: { $0.key == k }) {
            return f == k ? nil : "the free key \(k)\(path) became \(f)"
        }
        if !PositionKey.less(k, f) || others.contains(where: { PositionKey.less(k, $0.key) && PositionKey.less($0.key, f) }) {
            return "the taken key \(k)\(path) became \(f), not a key just after the tab holding it"
        }
        return nil
    }

    /// The non-empty key an add, open or move places by, with the moved tab's id for a move.
    package static func keyPlace(of op: Operation) -> (key: String, moving: String?)? {
        switch op {
        case .add(_, .key(let k), _) where !k.isEmpty, .open(_, .key(let k)) where !k.isEmpty: (k, nil)
        case .move(let id, .key(let k), _) where !k.isEmpty: (k, id)
        default: nil
        }
    }

    /// A valid key of about `length` bytes strictly between `lower` and `upper` (what many inserts
    /// into one gap make), or a plain `between` when none of that shape fits.
    package static func deepKey(between lower: String?, _ upper: String?, length: Int) -> String {
        let base = lower ?? PositionKey.between(nil, upper)
        let pad = max(length - base.utf8.count - 1, 0)
        let key = base + String(repeating: "0", count: pad) + "1"
        if PositionKey.isValid(key), lower.map({ PositionKey.less($0, key) }) ?? true, upper.map({ PositionKey.less(key, $0) }) ?? true {
            return key
        }
        return PositionKey.between(lower, upper)
    }
}
