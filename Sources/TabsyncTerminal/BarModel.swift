import TabsyncCore

/// The connection as the status line shows it.
public enum LinkState: Sendable, Equatable {
    case connecting
    case connected
    /// Lost; the next attempt is in `seconds`.
    case reconnecting(seconds: Int)
    /// Given up or refused for good, with the reason.
    case offline(String)

    var text: String {
        switch self {
        case .connecting: "connecting"
        case .connected: "connected"
        case .reconnecting(let seconds): "reconnecting in \(seconds)s"
        case .offline(let why): "offline: \(why)"
        }
    }
}

/// Everything that can happen to the bar.
public enum BarEvent: Sendable, Equatable {
    /// The workspace to show changed (the client's optimistic state).
    case workspace(Workspace)
    /// An op the server applied, for the log. Deliver it before the `.workspace` it leads to, so
    /// a removed tab's title can still be named.
    case applied(AppliedOp)
    case presence([Peer])
    /// Connected sessions the peer list does not name (past the server's `--max-presence-peers`).
    case othersCount(Int)
    case key(Key)
    case resize(rows: Int, cols: Int)
    case link(LinkState)
    /// One of this terminal's ops was refused by the server.
    case rejected(code: ErrorCode?, message: String)
    /// Round-trip time (nil = unknown) and the number of ops not yet answered.
    case stats(rttMillis: Int?, pending: Int)
    /// Something to tell the person (a resync, a server error), shown like a refusal.
    case notice(String)
    /// The answer to ``BarAction/loadClosed(limit:)``: tabs closed recently and not back, newest
    /// first (nil when the server could not say, with the reason).
    case closedTabs([Tab]?, error: String = "")
}

/// What the app must do after an event.
public enum BarAction: Sendable, Equatable {
    /// Submit this op through the client (it shows optimistically at once).
    case submit(Operation)
    /// Tell presence which tab this terminal views.
    case focus(tabId: String)
    /// Ask the server for the tabs closed recently (at most `limit`), then post
    /// ``BarEvent/closedTabs(_:error:)`` with the answer.
    case loadClosed(limit: Int)
    case quit
}

/// The live bar's whole state and its reactions to events, with no terminal and no network: events
/// in, actions out (``handle(_:)``), and ``frame()`` draws the current state.
///
/// Guarantees: `viewedTabId` always names a tab of `workspace` when it has tabs ("" otherwise);
/// in follow mode it is the active tab; an edit that the local workspace already refuses (locked
/// tab, read-only workspace) is not submitted and its reason is shown; every other key edit yields
/// exactly one `.submit`.
public struct BarModel: Sendable {
    enum Mode: Sendable, Equatable {
        /// Moving between tabs activates them for everyone.
        case follow
        /// Moving between tabs moves only this terminal's view (and its presence focus).
        case browse
    }

    public enum Position: String, Sendable, Equatable, CaseIterable {
        case top, bottom
    }

    enum Overlay: Sendable, Equatable {
        case none
        case help
        /// The overflow list of every tab, with the selected row and the first row shown.
        case list(selection: Int, top: Int)
        case prompt(Prompt)
        /// Recently closed tabs (nil while they load), with the selected row and the first row shown.
        case closed(tabs: [Tab]?, selection: Int, top: Int)
    }

    /// Why the bar waits for a list of closed tabs.
    enum ClosedRequest: Sendable, Equatable {
        /// `u` found no tab closed here: reopen the server's most recently closed one.
        case reopenLast
        /// `U`: the list overlay.
        case list
    }

    /// A one-line text input at the bottom.
    struct Prompt: Sendable, Equatable {
        enum Purpose: Sendable, Equatable {
            case newTitle
            case newURL(title: String)
            case rename(tabId: String)
            case badge(tabId: String)
            /// `G`: the title of the group to put the tab in (an existing title means that group).
            case groupInto(tabId: String)
            /// `t`: the new title of the tab's group.
            case renameGroup(groupId: String)
        }
        var purpose: Purpose
        var text: String

        var label: String {
            switch purpose {
            case .newTitle: "New tab title: "
            case .newURL: "URL (optional): "
            case .rename: "Rename to: "
            case .badge: "Badge (empty clears): "
            case .groupInto: "Into group (title; a new one if none has it): "
            case .renameGroup: "Rename group to: "
            }
        }
    }

    struct LogEntry: Sendable, Equatable {
        var version: UInt64
        var who: String
        var what: String
    }

    static let logCapacity = 50

    // Configuration.
    let server: String
    let clientId: String
    var limits: Limits
    var position: Position
    /// Whether the bar draws group colours (off with `NO_COLOR` or `--no-color`: braces mark groups).
    let color: Bool

    // State.
    private(set) var workspace: Workspace
    public private(set) var viewedTabId: String = ""
    private(set) var mode: Mode = .follow
    private(set) var overlay: Overlay = .none
    private(set) var peers: [Peer] = []
    /// Connected sessions `peers` does not name: shown as "+N others".
    private(set) var othersCount = 0
    private(set) var link: LinkState = .connecting
    private(set) var rttMillis: Int?
    private(set) var pendingOps = 0
    /// The last refusal or notice, shown until the next key.
    private(set) var message: String = ""
    private(set) var log: [LogEntry] = []
    private(set) var rows: Int
    private(set) var cols: Int
    /// The first tab shown in the bar (kept so scrolling is steady).
    private(set) var barFirst = 0

    /// Ids of the tabs this bar closed (`x`), oldest first: `u` reopens the newest still closed.
    private(set) var closedHere: [String] = []
    /// The list of closed tabs asked of the server, and what it is for.
    private(set) var closedRequest: ClosedRequest?
    static let closedHereCapacity = 50
    static let closedListLimit = 20

    private let idPrefix: String
    private var nextIdNumber = 1

    /// - Parameter idPrefix: makes the ids of tabs this terminal adds unique, e.g. a few random
    ///   base-62 chars chosen per run; ids are `idPrefix-N`.
    public init(
        server: String, clientId: String, workspace: Workspace, rows: Int, cols: Int,
        position: Position = .top, limits: Limits = .default, idPrefix: String, color: Bool = true
    ) {
        self.server = server
        self.clientId = clientId
        self.workspace = workspace
        self.rows = rows
        self.cols = cols
        self.position = position
        self.limits = limits
        self.idPrefix = idPrefix
        self.color = color
        self.viewedTabId = workspace.activeTabId
        settleScroll()
    }

    /// The index of the viewed tab, if any.
    var viewedIndex: Int? { workspace.index(of: viewedTabId) }

    // MARK: - Events

    /// Reacts to one event; returns what the app must do, in order.
    public mutating func handle(_ event: BarEvent) -> [BarAction] {
        var actions: [BarAction] = []
        switch event {
        case .workspace(let new):
            workspace = new
            actions += settleView()
            if case .list(let selection, let top) = overlay {
                overlay = .list(selection: min(selection, max(0, new.tabs.count - 1)), top: top)
            }
        case .applied(let applied):
            record(applied)
        case .presence(let list):
            peers = list
        case .othersCount(let count):
            othersCount = max(0, count)
        case .key(let key):
            actions += handleKey(key)
        case .resize(let newRows, let newCols):
            rows = max(0, newRows)
            cols = max(0, newCols)
        case .link(let state):
            link = state
        case .rejected(let code, let why):
            message = "refused: " + (code.map { $0.wireName + ": " } ?? "") + why
        case .stats(let rtt, let pending):
            rttMillis = rtt
            pendingOps = pending
        case .notice(let text):
            message = text
        case .closedTabs(let tabs, let error):
            actions += receivedClosed(tabs, error: error)
        }
        settleScroll()
        return actions
    }

    /// Keeps `viewedTabId` valid: the active tab in follow mode; in browse mode the same tab while it
    /// exists, else the active one.
    private mutating func settleView() -> [BarAction] {
        let before = viewedTabId
        if mode == .follow || workspace.index(of: viewedTabId) == nil {
            viewedTabId = workspace.activeTabId
        }
        return viewedTabId != before ? [.focus(tabId: viewedTabId)] : []
    }

    private mutating func settleScroll() {
        let layout = barLayout()
        barFirst = layout.shown.lowerBound
    }

    /// The bar as it is drawn now.
    func barLayout() -> BarLayout {
        BarLayout(
            tabs: workspace.tabs, activeTabId: workspace.activeTabId, viewedTabId: viewedTabId,
            editable: workspace.editable, focus: viewedIndex, width: cols, firstHint: barFirst,
            groups: workspace.groups, color: color)
    }

    private mutating func record(_ applied: AppliedOp) {
        let who: String
        if applied.clientId.isEmpty {
            who = "server"
        } else if applied.clientId == clientId {
            who = "you"
        } else {
            who = peers.first { $0.clientId == applied.clientId }?.name.nonEmpty ?? applied.clientId
        }
        log.append(LogEntry(version: applied.version, who: who, what: describe(applied.op)))
        if log.count > Self.logCapacity { log.removeFirst(log.count - Self.logCapacity) }
    }

    private func name(of tabId: String) -> String {
        if let tab = workspace.tab(tabId), !tab.title.isEmpty { return "“\(tab.title)”" }
        return tabId
    }

    /// A short description of an op, naming tabs by title.
    func describe(_ op: Operation) -> String {
        switch op {
        case .add(let tab, _, let activate):
            return "added “\(tab.title)”" + (activate ? " (active)" : "")
        case .open(let tab, _):
            return "opened “\(tab.title.isEmpty ? tab.url : tab.title)”"
        case .move(let tabId, _, _):
            return "moved \(name(of: tabId))"
        case .remove(let tabId):
            return "closed \(name(of: tabId))"
        case .activate(.tabId(let tabId)):
            return "activated \(name(of: tabId))"
        case .activate(.index(let index)):
            return "activated #\(index + 1)"
        case .update(let update):
            var parts: [String] = []
            if let title = update.title { parts.append("renamed \(name(of: update.tabId)) to “\(title)”") }
            if let url = update.url { parts.append("set url of \(name(of: update.tabId)) to \(url)") }
            if let icon = update.icon { parts.append("set icon of \(name(of: update.tabId)) to \(icon)") }
            if let badge = update.badge {
                parts.append(badge.isEmpty ? "cleared badge of \(name(of: update.tabId))"
                                           : "set badge of \(name(of: update.tabId)) to \(badge)")
            }
            if let locked = update.locked { parts.append("\(locked ? "locked" : "unlocked") \(name(of: update.tabId))") }
            return parts.joined(separator: ", ")
        case .setEditable(let editable):
            return editable ? "made the workspace editable" : "made the workspace read-only"
        case .replace(let tabs, _):
            return "replaced all tabs (\(tabs.count))"
        case .rekey:
            return "rekeyed positions"
        case .restore(let version, _):
            return "restored version \(version)"
        case .reopen(let tabId):
            return "reopened \(tabId)"
        case .group(let change):
            let tabs = change.tabIds.count == 1 ? name(of: change.tabIds[0]) : "\(change.tabIds.count) tabs"
            let title = change.title ?? workspace.group(change.groupId)?.title ?? ""
            return "grouped \(tabs) into " + (title.isEmpty ? "(untitled)" : "“\(title)”")
        case .ungroup(let change):
            let tabs = change.tabIds.count == 1 ? name(of: change.tabIds[0]) : "\(change.tabIds.count) tabs"
            return "ungrouped \(tabs)"
        case .updateGroup(let update):
            let group = groupName(update.groupId)
            var parts: [String] = []
            if let title = update.title {
                let new = title.isEmpty ? "(untitled)" : "“\(title)”"
                // This terminal's own rename is in its workspace already: the old title is gone.
                parts.append(group == new ? "renamed group to \(new)" : "renamed group \(group) to \(new)")
            }
            if let color = update.color { parts.append("coloured group \(group) \(color)") }
            return parts.joined(separator: ", ")
        }
    }

    /// A group named by title (“Work”), "(untitled)", or its id when this workspace does not hold it.
    private func groupName(_ id: String) -> String {
        guard let group = workspace.group(id) else { return id }
        return group.title.isEmpty ? "(untitled)" : "“\(group.title)”"
    }

    // MARK: - Keys

    private mutating func handleKey(_ key: Key) -> [BarAction] {
        switch overlay {
        case .help:
            overlay = .none
            return []
        case .prompt(let prompt):
            return handlePromptKey(key, prompt)
        case .list(let selection, let top):
            return handleListKey(key, selection: selection, top: top)
        case .closed(let tabs, let selection, let top):
            return handleClosedKey(key, tabs: tabs, selection: selection, top: top)
        case .none:
            break
        }
        message = ""
        switch key {
        case .left, .char("h"): return step(by: -1)
        case .right, .char("l"): return step(by: 1)
        case .home: return go(to: 0)
        case .end: return go(to: workspace.tabs.count - 1)
        case .shiftLeft, .char("H"): return moveViewed(by: -1)
        case .shiftRight, .char("L"): return moveViewed(by: 1)
        case .char(let c) where ("1"..."9").contains(c):
            let index = Int(String(c))! - 1
            guard index < workspace.tabs.count else {
                message = "no tab \(index + 1)"
                return []
            }
            return go(to: index)
        case .char("n"):
            overlay = .prompt(Prompt(purpose: .newTitle, text: ""))
        case .char("x"), .delete:
            guard let tab = viewedTab else { return noTab() }
            let actions = submit(.remove(tabId: tab.id))
            if !actions.isEmpty {
                closedHere.removeAll { $0 == tab.id }
                closedHere.append(tab.id)
                if closedHere.count > Self.closedHereCapacity { closedHere.removeFirst() }
            }
            return actions
        case .char("u"):
            // The newest tab closed here that is still closed; else the server's most recent.
            while let id = closedHere.popLast() {
                if workspace.tab(id) == nil { return reopen(id) }
            }
            closedRequest = .reopenLast
            message = "looking for the most recently closed tab…"
            return [.loadClosed(limit: 1)]
        case .char("U"):
            closedRequest = .list
            overlay = .closed(tabs: nil, selection: 0, top: 0)
            return [.loadClosed(limit: Self.closedListLimit)]
        case .char("r"):
            guard let tab = viewedTab else { return noTab() }
            overlay = .prompt(Prompt(purpose: .rename(tabId: tab.id), text: tab.title))
        case .char("b"):
            guard let tab = viewedTab else { return noTab() }
            overlay = .prompt(Prompt(purpose: .badge(tabId: tab.id), text: tab.badge))
        case .char("k"):
            guard let tab = viewedTab else { return noTab() }
            return submit(.update(TabUpdate(tabId: tab.id, locked: !tab.locked)))
        case .char("e"):
            return submit(.setEditable(!workspace.editable))
        case .char("g"):
            return groupWithRightNeighbour()
        case .char("G"):
            guard let tab = viewedTab else { return noTab() }
            overlay = .prompt(Prompt(purpose: .groupInto(tabId: tab.id), text: ""))
        case .char("d"):
            guard let tab = viewedTab else { return noTab() }
            guard !tab.group.isEmpty else {
                message = "the tab is in no group"
                return []
            }
            return submit(.ungroup(UngroupTabs(tabIds: [tab.id])))
        case .char("t"):
            guard let group = viewedGroup() else { return [] }
            overlay = .prompt(Prompt(purpose: .renameGroup(groupId: group.id), text: group.title))
        case .char("c"), .char("C"):
            guard let group = viewedGroup() else { return [] }
            let colors = TabGroup.colors
            let i = colors.firstIndex(of: group.color) ?? 0
            let next = colors[(i + (key == .char("c") ? 1 : colors.count - 1)) % colors.count]
            return submit(.updateGroup(GroupUpdate(groupId: group.id, color: next)))
        case .char("o"):
            let selection = viewedIndex ?? 0
            overlay = .list(selection: selection, top: 0)
            clampList()
        case .char("f"):
            mode = mode == .follow ? .browse : .follow
            message = mode == .follow ? "follow mode: moving activates tabs for everyone"
                                      : "browse mode: moving changes only this terminal's view"
            if mode == .follow, let tab = viewedTab, tab.id != workspace.activeTabId {
                // Following again: this terminal's view becomes the shared active tab.
                return submit(.activate(.tabId(tab.id)))
            }
        case .char("?"):
            overlay = .help
        case .char("q"), .ctrl("c"), .ctrl("d"):
            return [.quit]
        case .escape:
            break
        default:
            break
        }
        return []
    }

    private var viewedTab: Tab? { workspace.tab(viewedTabId) }

    /// The viewed tab's group; nil (and the reason shown) when there is no tab or it is in none.
    private mutating func viewedGroup() -> TabGroup? {
        guard let tab = viewedTab else {
            message = "no tab"
            return nil
        }
        guard let group = workspace.group(tab.group) else {
            message = "the tab is in no group"
            return nil
        }
        return group
    }

    /// `g`: the viewed tab joins its right neighbour's group, or the two make a new untitled group.
    private mutating func groupWithRightNeighbour() -> [BarAction] {
        guard let i = viewedIndex else { return noTab() }
        let tabs = workspace.tabs
        guard i + 1 < tabs.count else {
            message = "no tab to the right to group with"
            return []
        }
        let (tab, neighbour) = (tabs[i], tabs[i + 1])
        if !neighbour.group.isEmpty {
            guard neighbour.group != tab.group else {
                message = "already in the group of the tab to the right"
                return []
            }
            return submit(.group(GroupTabs(tabIds: [tab.id], groupId: neighbour.group)))
        }
        return submit(.group(GroupTabs(tabIds: [tab.id, neighbour.id], groupId: newGroupId())))
    }

    /// Reopens closed tab `id` (the server resolves it from history, so the local workspace
    /// cannot check it beyond being editable).
    private mutating func reopen(_ id: String) -> [BarAction] {
        guard workspace.editable else {
            message = "refused: NOT_EDITABLE: the workspace is read-only"
            return []
        }
        message = "reopening \(id)"
        return [.submit(.reopen(tabId: id))]
    }

    private mutating func receivedClosed(_ tabs: [Tab]?, error: String) -> [BarAction] {
        let request = closedRequest
        closedRequest = nil
        switch request {
        case .reopenLast:
            guard let tabs else {
                message = "cannot list closed tabs: \(error)"
                return []
            }
            guard let last = tabs.first else {
                message = "no recently closed tab to reopen"
                return []
            }
            return reopen(last.id)
        case .list:
            guard case .closed = overlay else { return [] }  // closed meanwhile
            guard let tabs else {
                overlay = .none
                message = "cannot list closed tabs: \(error)"
                return []
            }
            overlay = .closed(tabs: tabs, selection: 0, top: 0)
            return []
        case nil:
            return []
        }
    }

    private mutating func handleClosedKey(_ key: Key, tabs: [Tab]?, selection: Int, top: Int) -> [BarAction] {
        let count = tabs?.count ?? 0
        var selection = selection
        switch key {
        case .up, .char("k"): selection -= 1
        case .down, .char("j"): selection += 1
        case .home: selection = 0
        case .end: selection = count - 1
        case .enter:
            overlay = .none
            guard let tabs, tabs.indices.contains(selection) else { return [] }
            return reopen(tabs[selection].id)
        case .escape, .char("U"), .char("q"):
            overlay = .none
            closedRequest = nil
            return []
        default:
            return []
        }
        selection = min(max(selection, 0), max(0, count - 1))
        let height = max(1, listHeight)
        var top = top
        if selection < top { top = selection }
        if selection >= top + height { top = selection - height + 1 }
        overlay = .closed(tabs: tabs, selection: selection, top: max(0, top))
        return []
    }

    private mutating func noTab() -> [BarAction] {
        message = "no tab"
        return []
    }

    private mutating func step(by delta: Int) -> [BarAction] {
        guard !workspace.tabs.isEmpty else { return noTab() }
        let current = viewedIndex ?? 0
        let target = min(max(current + delta, 0), workspace.tabs.count - 1)
        return go(to: target)
    }

    /// Views (browse) or activates (follow) the tab at `index`.
    private mutating func go(to index: Int) -> [BarAction] {
        guard workspace.tabs.indices.contains(index) else { return noTab() }
        let tab = workspace.tabs[index]
        var actions: [BarAction] = []
        if mode == .follow && tab.id != workspace.activeTabId {
            actions += submit(.activate(.tabId(tab.id)))
        }
        if tab.id != viewedTabId {
            viewedTabId = tab.id
            actions.append(.focus(tabId: tab.id))
        }
        return actions
    }

    private mutating func moveViewed(by delta: Int) -> [BarAction] {
        guard let i = viewedIndex else { return noTab() }
        let tabs = workspace.tabs
        let key: String
        if delta < 0 {
            guard i > 0 else { return [] }
            key = PositionKey.between(i >= 2 ? tabs[i - 2].key : nil, tabs[i - 1].key)
        } else {
            guard i < tabs.count - 1 else { return [] }
            key = PositionKey.between(tabs[i + 1].key, i + 2 < tabs.count ? tabs[i + 2].key : nil)
        }
        return submit(.move(tabId: tabs[i].id, place: .key(key)))
    }

    /// Submits `op` unless the local workspace already refuses it; then the reason is shown instead.
    private mutating func submit(_ op: Operation) -> [BarAction] {
        do {
            _ = try workspace.resolve(op, limits: limits)
        } catch {
            message = "refused: \(error.code.wireName): \(error.message)"
            return []
        }
        return [.submit(op)]
    }

    private mutating func newTabId() -> String {
        defer { nextIdNumber += 1 }
        return "\(idPrefix)-\(nextIdNumber)"
    }

    /// A new group id, `idPrefix-gN` (the same counter as tabs, so it is unique here too).
    private mutating func newGroupId() -> String {
        defer { nextIdNumber += 1 }
        return "\(idPrefix)-g\(nextIdNumber)"
    }

    private mutating func handlePromptKey(_ key: Key, _ prompt: Prompt) -> [BarAction] {
        var prompt = prompt
        switch key {
        case .char(let c):
            prompt.text.append(c)
            overlay = .prompt(prompt)
        case .backspace:
            if !prompt.text.isEmpty { prompt.text.removeLast() }
            overlay = .prompt(prompt)
        case .escape, .ctrl("c"):
            overlay = .none
        case .enter:
            overlay = .none
            return finish(prompt)
        default:
            break
        }
        return []
    }

    private mutating func finish(_ prompt: Prompt) -> [BarAction] {
        let text = prompt.text.trimmingSpaces
        switch prompt.purpose {
        case .newTitle:
            guard !text.isEmpty else {
                message = "no title: nothing added"
                return []
            }
            overlay = .prompt(Prompt(purpose: .newURL(title: text), text: ""))
            return []
        case .newURL(let title):
            let tab = Tab(id: newTabId(), title: title, url: text)
            var place = Place.end
            if let i = viewedIndex {
                let tabs = workspace.tabs
                place = .key(PositionKey.between(tabs[i].key, i + 1 < tabs.count ? tabs[i + 1].key : nil))
            }
            let actions = submit(.add(tab: tab, place: place, activate: mode == .follow))
            if !actions.isEmpty && mode == .browse {
                // Browsing: the new tab is viewed here but not activated for everyone. It is in the
                // workspace from the next `.workspace` event on (the client shows it optimistically).
                viewedTabId = tab.id
                return actions + [.focus(tabId: tab.id)]
            }
            return actions
        case .rename(let tabId):
            return submit(.update(TabUpdate(tabId: tabId, title: text)))
        case .badge(let tabId):
            return submit(.update(TabUpdate(tabId: tabId, badge: text)))
        case .groupInto(let tabId):
            if let existing = workspace.groups.first(where: { $0.title == text }) {
                guard workspace.tab(tabId)?.group != existing.id else {
                    message = "already in “\(text)”"
                    return []
                }
                return submit(.group(GroupTabs(tabIds: [tabId], groupId: existing.id)))
            }
            return submit(.group(GroupTabs(tabIds: [tabId], groupId: newGroupId(), title: text)))
        case .renameGroup(let groupId):
            return submit(.updateGroup(GroupUpdate(groupId: groupId, title: text)))
        }
    }

    private mutating func handleListKey(_ key: Key, selection: Int, top: Int) -> [BarAction] {
        let count = workspace.tabs.count
        var selection = selection
        switch key {
        case .up, .left, .char("k"), .char("h"): selection -= 1
        case .down, .right, .char("j"), .char("l"): selection += 1
        case .home: selection = 0
        case .end: selection = count - 1
        case .pageUp: selection -= max(1, listHeight - 1)
        case .pageDown: selection += max(1, listHeight - 1)
        case .enter:
            overlay = .none
            return go(to: selection)
        case .escape, .char("o"), .char("q"):
            overlay = .none
            return []
        default:
            return []
        }
        overlay = .list(selection: min(max(selection, 0), max(0, count - 1)), top: top)
        clampList()
        return []
    }

    /// Keeps the list's selection on screen.
    private mutating func clampList() {
        guard case .list(let selection, var top) = overlay else { return }
        let height = max(1, listHeight)
        if selection < top { top = selection }
        if selection >= top + height { top = selection - height + 1 }
        top = max(0, min(top, max(0, workspace.tabs.count - height)))
        overlay = .list(selection: selection, top: top)
    }
}

extension String {
    var nonEmpty: String? { isEmpty ? nil : self }
    var trimmingSpaces: String {
        var s = Substring(self)
        while s.first == " " { s.removeFirst() }
        while s.last == " " { s.removeLast() }
        return String(s)
    }
}
