import TabsyncCore

/// docs/design.md rule 7 (translation of a key computed before a rekey) followed by rule 1 (a taken key
/// goes just after the tab holding it), written from the design text rather than from core's code,
/// for the simulation's rule oracle and the rule 7 property tests.
///
/// It works from the server's whole history (`history[v]` is the workspace at version `v`), so it
/// knows every rekey, also those the server has dropped with its log window.
enum RuleSevenOracle {
    /// Translation through one rekey; `old` and `new` are the tabs just before and just after it (the
    /// same tabs in the same order). A key equal to tab T's old key becomes T's new key; a key that sat
    /// between the old keys of L and R (either may be an open end) becomes the key
    /// `PositionKey.between` makes between the new keys of L and R.
    static func translate(_ key: String, old: [Tab], new: [Tab]) -> String {
        if let t = old.firstIndex(where: { $0.key == key }) { return new[t].key }
        let r = old.firstIndex(where: { PositionKey.less(key, $0.key) }) ?? old.count
        return PositionKey.between(r > 0 ? new[r - 1].key : nil, r < new.count ? new[r].key : nil)
    }

    /// The server rekeys a key submitted with `baseVersion` goes through when the op is applied at
    /// `appliedVersion`: every one since `baseVersion` (> 0), or for `baseVersion` 0 only the one the
    /// op itself caused. A server rekey is always applied just before the op that caused it.
    static func rekeys(since baseVersion: UInt64, appliedAt appliedVersion: UInt64, rekeyVersions: [UInt64]) -> [UInt64] {
        rekeyVersions.filter { v in
            v < appliedVersion && (baseVersion > 0 ? v > baseVersion : v == appliedVersion - 1)
        }
    }

    /// The key `submitted` translated through `through` (ascending rekey versions), with each step.
    static func translate(_ submitted: String, through: [UInt64], history: [Workspace]) -> (key: String, steps: [String]) {
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
    static func placementProblem(
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
}
