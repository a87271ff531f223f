extension Workspace {
    /// Applies `op` as the server does: validates it against docs/design.md's rules, resolves its place to a
    /// final key (rule 1 on collision), and returns the canonical op; or throws the first refusal in
    /// precedence order and changes nothing.
    ///
    /// This does not rekey: keys may grow past ``PositionKey/maxStoredLength`` here. ``Sequencer`` adds
    /// rule 7 (rekey first, translation by `baseVersion`) and dedup on top.
    @discardableResult
    public mutating func apply(_ op: Operation, limits: Limits) throws(OpError) -> Operation {
        let resolution = try resolve(op, limits: limits)
        commit(resolution.op, activeTabId: resolution.activeTabId)
        return resolution.op
    }

    /// Applies an op from the server's `Applied` stream: trusts its keys and takes its `activeTabId`,
    /// as a simple client would. Throws (changing nothing) when the op does not fit this state — the
    /// wrong version, or a tab it names is missing — which means the caller must resync.
    public mutating func apply(applied: AppliedOp) throws(OpError) {
        guard applied.version == version + 1 else {
            throw .invalidArgument("applied version \(applied.version) does not follow \(version)")
        }
        try checkFits(applied.op, activeTabId: applied.activeTabId)
        commit(applied.op, activeTabId: applied.activeTabId)
        version = applied.version
    }

    /// What an op resolves to against the current state: the canonical op and the active tab after it.
    public struct Resolution: Sendable, Equatable {
        public var op: Operation
        public var activeTabId: String
    }

    /// Resolves `op` without changing anything (see ``apply(_:limits:)``).
    public func resolve(_ op: Operation, limits: Limits) throws(OpError) -> Resolution {
        switch op {
        case .add(let tab, let place, let activate):
            try Validation.checkTab(tab)
            try Validation.checkPlace(place)
            guard editable else { throw .notEditable }
            guard index(of: tab.id) == nil else { throw .tabExists(tab.id) }
            guard tabs.count < limits.maxTabs else {
                throw .limitExceeded("the workspace already has \(limits.maxTabs) tabs")
            }
            var placed = tab
            placed.key = key(for: place, moving: nil)
            placed.group = placedGroup(key: placed.key, asked: tab.group, moving: nil)
            let active = (activate || tabs.isEmpty) ? tab.id : activeTabId
            return Resolution(op: .add(tab: placed, place: .end, activate: activate), activeTabId: active)

        case .open(let tab, let place):
            try Validation.checkTab(tab)
            try Validation.checkPlace(place)
            let existing = index(of: tab.id)
                ?? (tab.url.isEmpty ? nil : tabs.firstIndex(where: { $0.url == tab.url }))
            if let existing {
                let id = tabs[existing].id
                return Resolution(op: .activate(.tabId(id)), activeTabId: id)
            }
            return try resolve(.add(tab: tab, place: place, activate: true), limits: limits)

        case .move(let tabId, let place, _):
            try Validation.checkTabId(tabId)
            try Validation.checkPlace(place)
            guard let i = index(of: tabId) else { throw .tabGone(tabId) }
            guard editable else { throw .notEditable }
            guard !tabs[i].locked else { throw .locked(tabId) }
            let key = key(for: place, moving: i)
            let group = placedGroup(key: key, asked: tabs[i].group, moving: i)
            return Resolution(op: .move(tabId: tabId, place: .key(key), group: group), activeTabId: activeTabId)

        case .remove(let tabId):
            try Validation.checkTabId(tabId)
            guard let i = index(of: tabId) else { throw .tabGone(tabId) }
            guard editable else { throw .notEditable }
            guard !tabs[i].locked else { throw .locked(tabId) }
            var active = activeTabId
            if active == tabId {
                active = i + 1 < tabs.count ? tabs[i + 1].id : (i > 0 ? tabs[i - 1].id : "")
            }
            return Resolution(op: op, activeTabId: active)

        case .activate(.tabId(let tabId)):
            try Validation.checkTabId(tabId)
            guard index(of: tabId) != nil else { throw .tabGone(tabId) }
            return Resolution(op: op, activeTabId: tabId)

        case .activate(.index(let n)):
            guard Int(n) < tabs.count else {
                throw .invalidArgument("index \(n) is out of range (\(tabs.count) tabs)")
            }
            let id = tabs[Int(n)].id
            return Resolution(op: .activate(.tabId(id)), activeTabId: id)

        case .update(let update):
            try Validation.checkTabId(update.tabId)
            guard !update.isEmpty else { throw .invalidArgument("update sets no field") }
            if let title = update.title { try Validation.checkText(title, field: "title", maxScalars: Validation.maxTitleLength) }
            if let url = update.url { try Validation.checkText(url, field: "url", maxBytes: Validation.maxURLBytes) }
            if let icon = update.icon { try Validation.checkText(icon, field: "icon", maxScalars: Validation.maxIconLength) }
            if let badge = update.badge { try Validation.checkText(badge, field: "badge", maxScalars: Validation.maxBadgeLength) }
            guard index(of: update.tabId) != nil else { throw .tabGone(update.tabId) }
            return Resolution(op: op, activeTabId: activeTabId)

        case .setEditable:
            return Resolution(op: op, activeTabId: activeTabId)

        case .replace(let newTabs, let newGroups):
            var seen = Set<String>()
            for tab in newTabs {
                try Validation.checkTab(tab)
                guard seen.insert(tab.id).inserted else { throw .invalidArgument("tab \(tab.id) appears twice") }
            }
            let usedGroups = try checkGroupedList(newTabs, groups: newGroups)
            guard editable else { throw .notEditable }
            for (i, tab) in tabs.enumerated() where tab.locked {
                guard i < newTabs.count, newTabs[i].id == tab.id else { throw .locked(tab.id) }
            }
            guard newTabs.count <= limits.maxTabs else {
                throw .limitExceeded("\(newTabs.count) tabs is over the limit of \(limits.maxTabs)")
            }
            guard usedGroups.count <= limits.maxGroups else {
                throw .limitExceeded("\(usedGroups.count) groups is over the limit of \(limits.maxGroups)")
            }
            let keys = PositionKey.keys(count: newTabs.count)
            var keyed = newTabs
            for i in keyed.indices { keyed[i].key = keys[i] }
            let active: String
            if seen.contains(activeTabId) {
                active = activeTabId
            } else if let old = index(of: activeTabId), old < keyed.count {
                active = keyed[old].id
            } else {
                active = keyed.first?.id ?? ""
            }
            return Resolution(op: .replace(tabs: keyed, groups: usedGroups), activeTabId: active)

        case .rekey(let keys):
            try checkRekey(keys)
            return Resolution(op: op, activeTabId: activeTabId)

        case .restore(let target, nil):
            throw .invalidArgument("restore of version \(target) needs the workspace's history: a server resolves it")
        case .reopen(let tabId):
            try Validation.checkTabId(tabId)
            throw .invalidArgument("reopen of \(tabId) needs the workspace's history: a server resolves it")

        case .restore(let target, let state?):
            // docs/design.md, "History": the state at `target` as a new version. Refusals in the
            // usual precedence; a locked tab of today must be in the restored state.
            guard target <= version else {
                throw .invalidArgument("version \(target) is after the workspace's version \(version)")
            }
            var seen = Set<String>()
            for tab in state.tabs {
                try Validation.checkTab(tab)
                guard seen.insert(tab.id).inserted else { throw .invalidArgument("tab \(tab.id) appears twice") }
            }
            try checkOrderedKeys(state.tabs)
            let usedGroups = try checkGroupedList(state.tabs, groups: state.groups)
            guard usedGroups == state.groups else {
                throw .invalidArgument("restored groups are not exactly those its tabs name, in display order")
            }
            guard state.tabs.isEmpty == state.activeTabId.isEmpty, state.activeTabId.isEmpty || seen.contains(state.activeTabId)
            else { throw .invalidArgument("restored active tab \(state.activeTabId) is not one of its tabs") }
            guard editable else { throw .notEditable }
            if let locked = tabs.first(where: { $0.locked && !seen.contains($0.id) }) { throw .locked(locked.id) }
            guard state.tabs.count <= limits.maxTabs else {
                throw .limitExceeded("\(state.tabs.count) tabs is over the limit of \(limits.maxTabs)")
            }
            guard state.groups.count <= limits.maxGroups else {
                throw .limitExceeded("\(state.groups.count) groups is over the limit of \(limits.maxGroups)")
            }
            return Resolution(op: op, activeTabId: state.activeTabId)

        case .group(let change):
            return try resolveGroup(change, limits: limits)
        case .ungroup(let change):
            return try resolveUngroup(change)
        case .updateGroup(let update):
            return try resolveUpdateGroup(update)
        }
    }

    /// Keys of a list stated whole (a restore): each valid, ascending bytewise.
    func checkOrderedKeys(_ list: [Tab]) throws(OpError) {
        guard list.allSatisfy({ PositionKey.isValid($0.key) }),
            zip(list, list.dropFirst()).allSatisfy({ PositionKey.less($0.key, $1.key) })
        else { throw .invalidArgument("restored tabs carry keys out of order") }
    }

    /// A rekey op giving every tab a new short key in the current order (``PositionKey/keys(count:)``).
    public func makeRekey() -> Operation {
        let keys = PositionKey.keys(count: tabs.count)
        return .rekey(keys: zip(tabs, keys).map { TabKey(tabId: $0.id, key: $1) })
    }

    /// The index of the tab with this id, if any.
    public func index(of tabId: String) -> Int? {
        tabs.firstIndex(where: { $0.id == tabId })
    }

    /// The tab with this id, if any.
    public func tab(_ tabId: String) -> Tab? {
        index(of: tabId).map { tabs[$0] }
    }

    // MARK: - placement

    /// The final key for a tab placed at `place`; `moving` is the index of the tab being moved (it is
    /// left out of the list the place is read against). Assumes `place` is validated.
    func key(for place: Place, moving: Int?) -> String {
        // The neighbours' keys at a gap `g` of the list without the moving tab.
        func keyAt(_ g: Int) -> String? {
            guard g >= 0 else { return nil }
            let i = moving.map { g >= $0 ? g + 1 : g } ?? g
            return i < tabs.count ? tabs[i].key : nil
        }
        let count = tabs.count - (moving == nil ? 0 : 1)
        switch place {
        case .end, .key(""):
            if let moving, moving == tabs.count - 1 { return tabs[moving].key }
            return PositionKey.between(keyAt(count - 1), nil)
        case .index(let n):
            let g = min(Int(n), count)
            if let moving, moving == g { return tabs[moving].key }
            return PositionKey.between(keyAt(g - 1), keyAt(g))
        case .key(let k):
            if let moving, tabs[moving].key == k { return k }
            let i = insertionIndex(of: k)
            guard i < tabs.count, tabs[i].key == k else { return k }
            // Rule 1: taken — just after the existing key, before its successor (skipping the moving tab).
            var next = i + 1
            if next == moving { next += 1 }
            return PositionKey.between(k, next < tabs.count ? tabs[next].key : nil)
        }
    }

    /// The first index whose key is not less than `key` (binary search over display order).
    func insertionIndex(of key: String) -> Int {
        var lo = 0
        var hi = tabs.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if PositionKey.less(tabs[mid].key, key) { lo = mid + 1 } else { hi = mid }
        }
        return lo
    }

    // MARK: - committing canonical ops

    /// Carries out a canonical op (keys final) and takes `activeTabId`; bumps the version.
    mutating func commit(_ op: Operation, activeTabId active: String) {
        switch op {
        case .add(let tab, _, _):
            tabs.insert(tab, at: insertionIndex(of: tab.key))
        case .move(let tabId, .key(let key), let group):
            if var i = index(of: tabId) {
                if tabs[i].key != key {
                    var tab = tabs.remove(at: i)
                    tab.key = key
                    i = insertionIndex(of: key)
                    tabs.insert(tab, at: i)
                }
                tabs[i].group = group
            }
        case .move:
            preconditionFailure("a canonical move carries a key place")
        case .remove(let tabId):
            if let i = index(of: tabId) { tabs.remove(at: i) }
        case .activate, .open:
            break
        case .update(let update):
            if let i = index(of: update.tabId) {
                if let title = update.title { tabs[i].title = title }
                if let url = update.url { tabs[i].url = url }
                if let icon = update.icon { tabs[i].icon = icon }
                if let badge = update.badge { tabs[i].badge = badge }
                if let locked = update.locked { tabs[i].locked = locked }
            }
        case .setEditable(let value):
            editable = value
        case .replace(let newTabs, let newGroups):
            tabs = newTabs
            groups = newGroups
        case .restore(_, let state?):
            tabs = state.tabs
            editable = state.editable
            groups = state.groups
        case .group(let change):
            place(change.tabIds, keys: change.keys, group: change.groupId)
            let old = group(change.groupId)
            let made = TabGroup(
                id: change.groupId, title: change.title ?? old?.title ?? "",
                color: change.color ?? old?.color ?? TabGroup.defaultColor)
            if let i = groups.firstIndex(where: { $0.id == made.id }) { groups[i] = made } else { groups.append(made) }
        case .ungroup(let change):
            place(change.tabIds, keys: change.keys, group: "")
        case .updateGroup(let update):
            if let i = groups.firstIndex(where: { $0.id == update.groupId }) {
                if let title = update.title { groups[i].title = title }
                if let color = update.color { groups[i].color = color }
            }
        case .restore(_, nil), .reopen:
            preconditionFailure("restore and reopen are resolved before they are committed")
        case .rekey(let keys):
            var byId: [String: String] = [:]
            for k in keys { byId[k.tabId] = k.key }
            for i in tabs.indices { tabs[i].key = byId[tabs[i].id] ?? tabs[i].key }
        }
        settleGroups()
        activeTabId = active
        version += 1
    }

    /// Checks that a canonical op from the server fits this state (see ``apply(applied:)``).
    func checkFits(_ op: Operation, activeTabId active: String) throws(OpError) {
        func need(_ id: String) throws(OpError) { if index(of: id) == nil { throw .tabGone(id) } }
        switch op {
        case .add(let tab, _, _):
            guard index(of: tab.id) == nil else { throw .tabExists(tab.id) }
            guard PositionKey.isValid(tab.key), !tabs.contains(where: { $0.key == tab.key }) else {
                throw .invalidArgument("add carries no free valid key")
            }
            try needGroup(tab.group)
        case .move(let tabId, let place, let group):
            try need(tabId)
            guard case .key(let key) = place, PositionKey.isValid(key),
                !tabs.contains(where: { $0.key == key && $0.id != tabId })
            else { throw .invalidArgument("move carries no free valid key") }
            if group != tab(tabId)?.group { try needGroup(group) }
        case .remove(let tabId): try need(tabId)
        case .activate(.tabId(let tabId)): try need(tabId)
        case .activate(.index), .open:
            throw .invalidArgument("not a canonical op")
        case .update(let update): try need(update.tabId)
        case .setEditable: break
        case .replace(let newTabs, let newGroups):
            guard newTabs.allSatisfy({ PositionKey.isValid($0.key) }),
                zip(newTabs, newTabs.dropFirst()).allSatisfy({ PositionKey.less($0.key, $1.key) })
            else { throw .invalidArgument("replace carries keys out of order") }
            _ = try checkGroupedList(newTabs, groups: newGroups)
        case .rekey(let keys):
            try checkRekey(keys)
        case .restore(_, let state?):
            try checkOrderedKeys(state.tabs)
            _ = try checkGroupedList(state.tabs, groups: state.groups)
            guard state.activeTabId == active else { throw .invalidArgument("restore's active tab differs from Applied's") }
        case .restore(_, nil), .reopen:
            throw .invalidArgument("not a canonical op")
        case .group(let change):
            try checkPlacements(change.tabIds, keys: change.keys)
        case .ungroup(let change):
            try checkPlacements(change.tabIds, keys: change.keys)
        case .updateGroup(let update):
            try needGroup(update.groupId)
        }
        // The active tab after the op must exist afterwards; checked cheaply by id sets.
        if active.isEmpty { return }
        switch op {
        case .add(let tab, _, _) where tab.id == active: return
        case .replace(let newTabs, _):
            guard newTabs.contains(where: { $0.id == active }) else { throw .tabGone(active) }
        case .restore(_, let state?):
            guard state.tabs.contains(where: { $0.id == active }) else { throw .tabGone(active) }
        case .remove(let tabId):
            guard tabId != active else { throw .tabGone(active) }
            try need(active)
        default:
            try need(active)
        }
    }

    /// A group named by a canonical op must exist ("" names none).
    func needGroup(_ id: String) throws(OpError) {
        if !id.isEmpty && group(id) == nil { throw .tabGone("group \(id)") }
    }

    /// A canonical group or ungroup names tabs that are there, once each, with one valid key each,
    /// none taken by a tab it does not name.
    func checkPlacements(_ ids: [String], keys: [String]) throws(OpError) {
        guard ids.count == keys.count, Set(ids).count == ids.count else {
            throw .invalidArgument("a group op must carry one key per listed tab")
        }
        for id in ids where index(of: id) == nil { throw .tabGone(id) }
        let named = Set(ids)
        let taken = Set(tabs.lazy.filter { !named.contains($0.id) }.map(\.key))
        guard keys.allSatisfy({ PositionKey.isValid($0) && !taken.contains($0) }), Set(keys).count == keys.count else {
            throw .invalidArgument("a group op carries no free valid keys")
        }
    }

    /// A rekey must name every tab once, in display order, with valid ascending keys.
    func checkRekey(_ keys: [TabKey]) throws(OpError) {
        guard keys.count == tabs.count, zip(keys, tabs).allSatisfy({ $0.tabId == $1.id }) else {
            throw .invalidArgument("rekey must name every tab in display order")
        }
        guard keys.allSatisfy({ PositionKey.isValid($0.key) }),
            zip(keys, keys.dropFirst()).allSatisfy({ PositionKey.less($0.key, $1.key) })
        else { throw .invalidArgument("rekey keys must be valid and ascending") }
    }

    // MARK: - invariants

    /// The invariants of docs/design.md, 'The model', that do not hold, in words; empty when all hold.
    public func invariantViolations(limits: Limits) -> [String] {
        var problems: [String] = []
        if Set(tabs.map(\.id)).count != tabs.count { problems.append("duplicate tab ids") }
        if Set(tabs.map(\.key)).count != tabs.count { problems.append("duplicate keys") }
        if let bad = tabs.first(where: { !PositionKey.isValid($0.key) }) { problems.append("invalid key \(bad.key)") }
        if !zip(tabs, tabs.dropFirst()).allSatisfy({ PositionKey.less($0.key, $1.key) }) {
            problems.append("tabs not in ascending key order")
        }
        if tabs.isEmpty != activeTabId.isEmpty { problems.append("active tab \"\(activeTabId)\" with \(tabs.count) tabs") }
        if !activeTabId.isEmpty && index(of: activeTabId) == nil { problems.append("active tab \(activeTabId) missing") }
        if tabs.count > limits.maxTabs { problems.append("\(tabs.count) tabs over the limit") }
        return problems + groupInvariantViolations(limits: limits)
    }
}
