import TabsyncCore

/// docs/design.md's placement rule restated from the states before and after one applied op, for the
/// property tests and the simulation's oracle (one statement, two users): a placed tab between two tabs
/// of G is in G; else it is in the group it had (a move) or asked for (an add) exactly when that group
/// existed before and a new neighbour is in it, or it was that group's only tab; else in none. A group
/// or ungroup puts every listed tab in the group (or none) and leaves the tabs it does not list as they
/// were. The group invariants themselves are ``Workspace/invariantViolations(limits:)``'s.
public enum GroupPlacementOracle {
    /// What the canonical `op` broke of the rule, in words; empty when nothing. `asked` is the group the
    /// submitted add asked for, when known (a canonical add carries only its final group).
    public static func check(_ op: Operation, asked: String? = nil, before: Workspace, after: Workspace) -> [String] {
        func expectedGroup(_ id: String, asked: String) -> String {
            let i = after.index(of: id)!
            let left = i > 0 ? after.tabs[i - 1].group : nil
            let right = i + 1 < after.tabs.count ? after.tabs[i + 1].group : nil
            if let left, !left.isEmpty, left == right { return left }
            guard !asked.isEmpty, before.group(asked) != nil else { return "" }
            let alone = before.tab(id)?.group == asked && !before.tabs.contains { $0.group == asked && $0.id != id }
            if left == asked || right == asked || alone { return asked }
            return ""
        }
        switch op {
        case .add(let tab, _, _):
            guard let got = after.tab(tab.id)?.group else { return ["add of \(tab.id) left no tab"] }
            let expected = expectedGroup(tab.id, asked: asked ?? tab.group)
            return got == expected ? [] : ["add placed \(tab.id) in \"\(got)\", the rule gives \"\(expected)\""]
        case .move(let id, _, _):
            guard let got = after.tab(id)?.group, let had = before.tab(id)?.group else { return ["move of \(id) lost the tab"] }
            let expected = expectedGroup(id, asked: had)
            return got == expected ? [] : ["move placed \(id) in \"\(got)\", the rule gives \"\(expected)\""]
        case .group(let change):
            var problems = unlistedUnchanged(change.tabIds, before: before, after: after)
            if change.tabIds.contains(where: { after.tab($0)?.group != change.groupId }) { problems.append("a listed tab is not in the group") }
            return problems
        case .ungroup(let change):
            var problems = unlistedUnchanged(change.tabIds, before: before, after: after)
            if change.tabIds.contains(where: { after.tab($0)?.group != "" }) { problems.append("a listed tab is still grouped") }
            return problems
        case .updateGroup:
            return before.tabs == after.tabs ? [] : ["updateGroup changed the tabs"]
        default:
            return []
        }
    }

    static func unlistedUnchanged(_ listed: [String], before: Workspace, after: Workspace) -> [String] {
        let others = { (w: Workspace) in w.tabs.filter { !listed.contains($0.id) } }
        return others(before) == others(after) ? [] : ["a tab the op does not list changed"]
    }
}
