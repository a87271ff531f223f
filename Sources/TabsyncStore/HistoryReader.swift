import Foundation
import TabsyncCore

/// A read of a workspace's history (docs/design.md, "History"), as the server asks it of a store.
public enum HistoryRead: Sendable, Equatable {
    /// Stored ops before a version (nil: from the newest), newest first, at most `limit`.
    case ops(before: UInt64?, limit: Int)
    /// The state at a version.
    case version(UInt64)
    /// The state at a time: at the newest op committed then or before.
    case time(Date)
    /// Tabs closed within the last ``HistoryReader/closedWindow`` ops and not back, newest first.
    case closed(limit: Int)
    /// One such closed tab (for `reopen`).
    case closedTab(String)
}

/// What a ``HistoryRead`` found.
public enum HistoryResult: Sendable, Equatable {
    case ops([HistoryEntry])
    case state(Workspace)
    case closed([ClosedTab])
}

/// Why a history read has no answer: the store failed (try again), the workspace has no stored op
/// (nothing to read: HTTP answers 404), or the read names something history does not hold (a
/// permanent refusal, with a message for people).
public enum HistoryFailure: Error, Sendable, Equatable {
    case store(StoreError)
    case noHistory(workspaceId: String)
    case refused(OpError)

    /// The refusal a client is told (`INVALID_ARGUMENT` with its message); nil for a store failure,
    /// which is transient.
    public var refusal: OpError? {
        switch self {
        case .store: nil
        case .noHistory(let workspaceId): .invalidArgument("workspace \(workspaceId) has no history")
        case .refused(let error): error
        }
    }
}

/// A tab that was closed and is not in the workspace now: its fields just before, who closed it
/// and when, and where it was (its neighbours' ids and its index then).
public struct ClosedTab: Sendable, Equatable {
    public var tab: Tab
    /// The version of the op that closed it.
    public var version: UInt64
    public var author: String
    public var committedAt: Date?
    public var leftId: String?
    public var rightId: String?
    public var index: Int

    public init(tab: Tab, version: UInt64, author: String, committedAt: Date?, leftId: String?, rightId: String?, index: Int) {
        self.tab = tab
        self.version = version
        self.author = author
        self.committedAt = committedAt
        self.leftId = leftId
        self.rightId = rightId
        self.index = index
    }
}

/// Answers ``HistoryRead``s from a ``HistoryStore``'s two primitives (ops newest first, and
/// milestones) by replay: the one place a past state is computed, whatever the store.
///
/// Guarantees: a state answered for version v is the replay of the stored ops up to v over the
/// newest milestone at or before it, exactly the state the workspace had at v, with the
/// workspace's epoch (whether or not a server holds it in memory); a version whose
/// ops or milestone are no longer kept is refused `INVALID_ARGUMENT` naming the oldest version
/// that is; nothing is answered that is not durable.
public struct HistoryReader: Sendable {
    /// How far back "recently closed" and `reopen` look, in ops.
    public static let closedWindow = 2_000

    public let store: any HistoryStore

    public init(store: any HistoryStore) {
        self.store = store
    }

    public func answer(_ read: HistoryRead, workspaceId: String) throws(HistoryFailure) -> HistoryResult {
        do {
            switch read {
            case .ops(let before, let limit):
                return .ops(try store.history(workspaceId: workspaceId, before: before, limit: limit))
            case .version(let version):
                return .state(try withEpoch(try state(workspaceId, at: version)))
            case .time(let date):
                guard let version = try store.version(workspaceId: workspaceId, at: date) else {
                    throw HistoryFailure.refused(.invalidArgument(
                        "no kept version of \(workspaceId) is as old as \(RFC3339.format(date.timeIntervalSince1970))"))
                }
                return .state(try withEpoch(try state(workspaceId, at: version)))
            case .closed(let limit):
                return .closed(Array(try closed(workspaceId).prefix(max(0, limit))))
            case .closedTab(let tabId):
                guard let tab = try closed(workspaceId).first(where: { $0.tab.id == tabId }) else {
                    throw HistoryFailure.refused(.invalidArgument(
                        "tab \(tabId) was not closed within the last \(Self.closedWindow) ops, or is open: "
                            + "restore a version to bring back older tabs"))
                }
                return .closed([tab])
            }
        } catch let failure as HistoryFailure {
            throw failure
        } catch let error as StoreError {
            throw .store(error)
        } catch {
            throw .store(.readFailed("\(error)"))
        }
    }

    // MARK: states

    /// The state at `version` (see the guarantees).
    func state(_ workspaceId: String, at version: UInt64) throws -> Workspace {
        let newest = try store.history(workspaceId: workspaceId, before: nil, limit: 1).first?.op.version
        let milestone = try store.milestone(workspaceId: workspaceId, atOrBefore: version)
        let top = max(newest ?? 0, milestone?.version ?? 0)
        guard top > 0 else { throw HistoryFailure.noHistory(workspaceId: workspaceId) }
        guard version <= top else {
            throw HistoryFailure.refused(.invalidArgument("version \(version) is after the newest stored version \(top)"))
        }
        if let milestone, milestone.version == version { return milestone }
        let base = milestone ?? Workspace(id: workspaceId)
        if version == base.version { return base }  // version 0: the empty workspace
        let entries = try store.history(workspaceId: workspaceId, before: version + 1, limit: Int(version - base.version))
        guard entries.count == Int(version - base.version), entries.last?.op.version == base.version + 1 else {
            throw HistoryFailure.refused(.invalidArgument(
                "version \(version) is outside the history this server keeps (--history-retention)"))
        }
        return try replay(base, entries.reversed(), workspaceId)
    }

    /// A past state carries its workspace's epoch, as a snapshot does: a replay from before the
    /// first kept milestone starts from an empty workspace, which has none, so the stored
    /// workspace's is read (rarely: only states older than every kept milestone).
    private func withEpoch(_ state: Workspace) throws -> Workspace {
        guard state.epoch.isEmpty, let epoch = try store.load(workspaceId: state.id)?.workspace.epoch else { return state }
        var copy = state
        copy.epoch = epoch
        return copy
    }

    private func replay(_ base: Workspace, _ entries: some Sequence<HistoryEntry>, _ workspaceId: String) throws -> Workspace {
        var state = base
        for entry in entries {
            do throws(OpError) {
                try state.apply(applied: entry.op)
            } catch {
                throw HistoryFailure.store(.readFailed("history of \(workspaceId) does not replay at version \(entry.op.version): \(error)"))
            }
        }
        return state
    }

    // MARK: closed tabs

    /// Tabs closed within the window and not back, newest close first, one per id.
    func closed(_ workspaceId: String) throws -> [ClosedTab] {
        let recent = try store.history(workspaceId: workspaceId, before: nil, limit: Self.closedWindow)
        guard let oldest = recent.last else { return [] }
        // A base at or before the window's first op, and the ops between it and the window.
        var base = try store.milestone(workspaceId: workspaceId, atOrBefore: oldest.op.version - 1)
            ?? (oldest.op.version == 1 ? Workspace(id: workspaceId) : nil)
        var entries = Array(recent.reversed())
        if let b = base, b.version + 1 < oldest.op.version {
            let fill = try store.history(workspaceId: workspaceId, before: oldest.op.version, limit: Int(oldest.op.version - 1 - b.version))
            if fill.count == Int(oldest.op.version - 1 - b.version) { entries = fill.reversed() + entries } else { base = nil }
        }
        if base == nil {
            // The window reaches past what is kept: start at the newest milestone inside it.
            guard let m = try store.milestone(workspaceId: workspaceId, atOrBefore: recent[0].op.version),
                m.version + 1 >= oldest.op.version
            else { return [] }
            base = m
            entries = entries.filter { $0.op.version > m.version }
        }
        var state = base!
        var closedById: [String: ClosedTab] = [:]
        for entry in entries {
            let before = state
            state = try replay(state, [entry], workspaceId)
            let after = Set(state.tabs.map(\.id))
            for (i, tab) in before.tabs.enumerated() where !after.contains(tab.id) {
                closedById[tab.id] = ClosedTab(
                    tab: tab, version: entry.op.version, author: entry.author, committedAt: entry.committedAt,
                    leftId: i > 0 ? before.tabs[i - 1].id : nil,
                    rightId: i + 1 < before.tabs.count ? before.tabs[i + 1].id : nil, index: i)
            }
        }
        let open = Set(state.tabs.map(\.id))
        return closedById.values.filter { !open.contains($0.tab.id) }.sorted { ($0.version, $0.index) > ($1.version, $1.index) }
    }
}
