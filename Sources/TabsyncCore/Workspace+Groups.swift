/// Tab groups (docs/design.md, "Tab groups"): the placement rule, the group ops and the group
/// invariants. Every op that places a tab decides its group here, so the groups stay contiguous, never
/// empty, and at most `Limits.maxGroups` after any one op, in any order of arrival.
extension Workspace {
    /// The group with this id, if any.
    public func group(_ id: String) -> TabGroup? {
        groups.first(where: { $0.id == id })
    }

    /// The tabs of a group, in display order.
    public func tabs(inGroup id: String) -> [Tab] {
        tabs.filter { $0.group == id }
    }

    // MARK: - the placement rule

    /// The group a tab ends in when placed at `key` (final, free, or the moving tab's own): one that
    /// lands between two tabs of the same group G joins G; else it keeps `asked` (the group it had, in
    /// a move; the one it asked for, in an add) only if that group exists and one of its new neighbours
    /// is in it, or it is that group's only tab; else none. `moving` is the index of the moved tab,
    /// left out of the neighbours.
    func placedGroup(key: String, asked: String, moving: Int?) -> String {
        guard !groups.isEmpty else { return "" }
        let at = insertionIndex(of: key)
        var right = at
        if right == moving { right += 1 }
        var left = at - 1
        if left == moving { left -= 1 }
        let leftGroup = left >= 0 ? tabs[left].group : nil
        let rightGroup = right < tabs.count ? tabs[right].group : nil
        if let leftGroup, !leftGroup.isEmpty, leftGroup == rightGroup { return leftGroup }
        guard !asked.isEmpty, group(asked) != nil else { return "" }
        if leftGroup == asked || rightGroup == asked { return asked }
        if let moving, !tabs.indices.contains(where: { $0 != moving && tabs[$0].group == asked }) { return asked }
        return ""
    }

    // MARK: - resolving the group ops

    /// The listed tabs that are still there, in the listed order: `INVALID_ARGUMENT` for an empty
    /// list, a malformed or repeated id; `TAB_GONE` when none is left.
    func presentTabs(_ tabIds: [String]) throws(OpError) -> [String] {
        guard !tabIds.isEmpty else { throw .invalidArgument("no tab listed") }
        var seen = Set<String>()
        for id in tabIds {
            try Validation.checkTabId(id)
            guard seen.insert(id).inserted else { throw .invalidArgument("tab \(id) is listed twice") }
        }
        let present = tabIds.filter { index(of: $0) != nil }
        guard !present.isEmpty else { throw .tabGone(tabIds[0]) }
        return present
    }

    /// `NOT_EDITABLE`, then `LOCKED` for a listed tab that is locked.
    func checkRegroupable(_ present: [String]) throws(OpError) {
        guard editable else { throw .notEditable }
        if let locked = present.first(where: { tab($0)?.locked == true }) { throw .locked(locked) }
    }

    func resolveGroup(_ op: GroupTabs, limits: Limits) throws(OpError) -> Resolution {
        try Validation.checkTabId(op.groupId, field: "group id")
        try Validation.checkGroupFields(title: op.title, color: op.color)
        let present = try presentTabs(op.tabIds)
        try checkRegroupable(present)
        var w = self
        let existing = group(op.groupId)
        if existing != nil {
            // The listed tabs not yet in G follow G's last tab, in the listed order.
            let movers = present.filter { tab($0)!.group != op.groupId }
            let taken = w.take(movers)
            let last = w.tabs.lastIndex(where: { $0.group == op.groupId })!
            w.insert(taken, after: last, group: op.groupId)
        } else {
            // The first listed tab f stays; the others follow it; when f is strictly inside its group's
            // span (once the others are out), the whole block goes after that group's last tab.
            let taken = w.take(Array(present.dropFirst()))
            let f = w.index(of: present[0])!
            let old = w.tabs[f].group
            if !old.isEmpty, f > 0, f + 1 < w.tabs.count, w.tabs[f - 1].group == old, w.tabs[f + 1].group == old {
                let first = w.take([present[0]])
                let last = w.tabs.lastIndex(where: { $0.group == old })!
                w.insert(first + taken, after: last, group: op.groupId)
            } else {
                w.tabs[f].group = op.groupId
                w.insert(taken, after: f, group: op.groupId)
            }
        }
        let made = TabGroup(
            id: op.groupId, title: op.title ?? existing?.title ?? "",
            color: op.color ?? existing?.color ?? TabGroup.defaultColor)
        w.setGroup(made)
        if w.groups.count > limits.maxGroups {
            throw .limitExceeded("the workspace would have \(w.groups.count) groups, over the limit of \(limits.maxGroups)")
        }
        let canonical = GroupTabs(
            tabIds: present, groupId: op.groupId, title: made.title, color: made.color,
            keys: present.map { w.tab($0)!.key })
        return Resolution(op: .group(canonical), activeTabId: activeTabId)
    }

    func resolveUngroup(_ op: UngroupTabs) throws(OpError) -> Resolution {
        let present = try presentTabs(op.tabIds)
        try checkRegroupable(present)
        var w = self
        for id in present {
            let i = w.index(of: id)!
            let old = w.tabs[i].group
            guard !old.isEmpty else { continue }
            if i > 0, i + 1 < w.tabs.count, w.tabs[i - 1].group == old, w.tabs[i + 1].group == old {
                // Strictly inside its group's span: to right after the group's last tab.
                let taken = w.take([id])
                let last = w.tabs.lastIndex(where: { $0.group == old })!
                w.insert(taken, after: last, group: "")
            } else {
                w.tabs[i].group = ""
            }
        }
        let canonical = UngroupTabs(tabIds: present, keys: present.map { w.tab($0)!.key })
        return Resolution(op: .ungroup(canonical), activeTabId: activeTabId)
    }

    func resolveUpdateGroup(_ update: GroupUpdate) throws(OpError) -> Resolution {
        try Validation.checkTabId(update.groupId, field: "group id")
        guard !update.isEmpty else { throw .invalidArgument("updateGroup sets no field") }
        try Validation.checkGroupFields(title: update.title, color: update.color)
        guard group(update.groupId) != nil else { throw .tabGone("group \(update.groupId)") }
        return Resolution(op: .updateGroup(update), activeTabId: activeTabId)
    }

    /// Checks the groups of a list stated whole (replace, restore): each group valid and listed once,
    /// every tab's group listed, each group's tabs contiguous. Returns the groups the tabs name, in
    /// their display order (a listed group no tab names is dropped).
    func checkGroupedList(_ list: [Tab], groups listed: [TabGroup]) throws(OpError) -> [TabGroup] {
        var byId: [String: TabGroup] = [:]
        for group in listed {
            try Validation.checkGroup(group)
            guard byId.updateValue(group, forKey: group.id) == nil else {
                throw .invalidArgument("group \(group.id) is listed twice")
            }
        }
        var used: [TabGroup] = []
        var closed = Set<String>()
        var current = ""
        for tab in list where tab.group != current {
            if !current.isEmpty { closed.insert(current) }
            current = tab.group
            guard !current.isEmpty else { continue }
            guard let group = byId[current] else {
                throw .invalidArgument("tab \(tab.id) names group \(current), which is not listed")
            }
            guard !closed.contains(current) else {
                throw .invalidArgument("the tabs of group \(current) are not contiguous")
            }
            used.append(group)
        }
        return used
    }

    // MARK: - scratch edits (on a copy, to compute a group op's final keys)

    /// Takes the named tabs out of the list, in the order named.
    mutating func take(_ ids: [String]) -> [Tab] {
        ids.map { id in tabs.remove(at: index(of: id)!) }
    }

    /// Puts `moved` right after index `after`, in that order, with fresh keys and the group `group`.
    mutating func insert(_ moved: [Tab], after: Int, group: String) {
        var previous = tabs[after].key
        let next = after + 1 < tabs.count ? tabs[after + 1].key : nil
        for (n, tab) in moved.enumerated() {
            var placed = tab
            placed.key = PositionKey.between(previous, next)
            placed.group = group
            previous = placed.key
            tabs.insert(placed, at: after + 1 + n)
        }
    }

    /// Sets a group's fields (adding it when new), then settles the group list.
    mutating func setGroup(_ group: TabGroup) {
        if let i = groups.firstIndex(where: { $0.id == group.id }) { groups[i] = group } else { groups.append(group) }
        settleGroups()
    }

    /// Makes `groups` exactly the groups some tab names, in their display order: a group whose last
    /// tab left is gone.
    mutating func settleGroups() {
        guard !groups.isEmpty else { return }
        var byId: [String: TabGroup] = [:]
        for group in groups { byId[group.id] = group }
        var ordered: [TabGroup] = []
        var last = ""
        for tab in tabs where !tab.group.isEmpty && tab.group != last {
            last = tab.group
            if let group = byId.removeValue(forKey: tab.group) { ordered.append(group) }
        }
        groups = ordered
    }

    /// Gives listed tabs their final keys and group (a canonical group or ungroup), keeping display order.
    mutating func place(_ ids: [String], keys: [String], group: String) {
        for (id, key) in zip(ids, keys) {
            guard let i = index(of: id) else { continue }
            tabs[i].key = key
            tabs[i].group = group
        }
        tabs.sort { PositionKey.less($0.key, $1.key) }
    }

    // MARK: - invariants

    /// The group invariants that do not hold, in words; empty when all hold.
    func groupInvariantViolations(limits: Limits) -> [String] {
        var problems: [String] = []
        let ids = groups.map(\.id)
        if Set(ids).count != ids.count { problems.append("duplicate group ids") }
        if groups.count > limits.maxGroups { problems.append("\(groups.count) groups over the limit") }
        for group in groups {
            do throws(OpError) { try Validation.checkGroup(group) } catch { problems.append("group \(group.id): \(error)") }
        }
        var runs: [String] = []
        var last = ""
        for tab in tabs where tab.group != last {
            last = tab.group
            if !last.isEmpty { runs.append(last) }
        }
        if let missing = tabs.first(where: { !$0.group.isEmpty && !ids.contains($0.group) }) {
            problems.append("tab \(missing.id) names group \(missing.group), which does not exist")
        }
        if Set(runs).count != runs.count { problems.append("a group's tabs are not contiguous: runs \(runs)") }
        if let empty = groups.first(where: { !runs.contains($0.id) }) { problems.append("group \(empty.id) has no tab") }
        if Set(runs).count == runs.count, runs != ids.filter({ runs.contains($0) }) {
            problems.append("groups \(ids) are not in display order \(runs)")
        }
        return problems
    }
}
