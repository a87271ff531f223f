import TabsyncCore
import TabsyncStore
import TabsyncTestSupport

/// An independent check of the real server core's answer to each op against docs/design.md's rules,
/// written from the design text rather than from core's code: with it, the simulation catches a
/// rule that is broken the same way for everyone (which convergence alone cannot see).
///
/// It watches two things only: every Submit a client sends (``sent(client:seq:baseVersion:op:)``)
/// and every batch the store accepted (``stored(_:)``), whose records it walks in server order. It
/// keeps the workspace at every version from them (`history[v]`), so the state before each record
/// is known exactly, and every server rekey with it.
///
/// Checked, from the state just before each record: the batch's records follow the stored version
/// with contiguous versions, each client's seqs are consumed in increasing order and each at most
/// once (so no op is stored twice), only a server rekey (empty clientId, seq 0) comes before an op, every
/// canonical op applies to a plain copy, which keeps the invariants, stores no key over 64 bytes and
/// ends equal to the batch's snapshot; remove wins (an op on a tab that is not there is `TAB_GONE`,
/// an applied op names a tab that was there); removing the active tab activates its right
/// neighbour, else its left one; rules 7 and 1 (a submitted key, translated through each rekey since
/// its baseVersion, is kept, or, when taken, replaced by one just after the tab holding it; refused
/// `INVALID_ARGUMENT` when one of those rekeys had left the server's log window); locked tabs are not
/// moved or removed; a non-editable workspace is not changed; `open` activates the tab with the same
/// id, else the first with the same url, else adds.
struct RuleOracle {
    /// What a client sent for one seq: the op as the server decodes it (nil: it does not convert)
    /// and its baseVersion.
    struct Submitted: Equatable {
        var op: TabsyncCore.Operation?
        var baseVersion: UInt64
    }

    struct ClientSeq: Hashable {
        var client: String
        var seq: UInt64
    }

    struct Stats {
        var records = 0
        var applied = 0
        var rejected: [ErrorCode: Int] = [:]
        var serverRekeys = 0
        /// Key places applied after translation through at least one rekey since their baseVersion.
        var translatedKeyPlaces = 0
        /// Key places refused as computed before a rekey that had surely left the log window.
        var staleKeyRefusals = 0
        /// Key places whose baseVersion fell where the server may or may not still hold the log
        /// (either answer accepted; see ``checkKeyPlace(before:submitted:applied:refusal:message:)``).
        var ambiguousKeyPlaces = 0
        /// Restores and reopens by outcome.
        var historyOps: [String: Int] = [:]
        /// Group ops applied by kind; adds and moves that placed a tab in a group; the most groups seen.
        var groupOps: [String: Int] = [:]
        var placedInGroup = 0
        var mostGroups = 0

        mutating func add(_ other: Stats) {
            records += other.records
            applied += other.applied
            for (code, n) in other.rejected { rejected[code, default: 0] += n }
            serverRekeys += other.serverRekeys
            translatedKeyPlaces += other.translatedKeyPlaces
            staleKeyRefusals += other.staleKeyRefusals
            ambiguousKeyPlaces += other.ambiguousKeyPlaces
            for (what, n) in other.historyOps { historyOps[what, default: 0] += n }
            for (what, n) in other.groupOps { groupOps[what, default: 0] += n }
            placedInGroup += other.placedInGroup
            mostGroups = max(mostGroups, other.mostGroups)
        }
    }

    let workspaceId: String
    let limits: Limits
    /// The stored workspace at every version so far.
    private(set) var history: [Workspace]
    /// Versions of the server-made rekeys so far.
    private(set) var rekeyVersions: [UInt64] = []
    private(set) var submitted: [ClientSeq: Submitted] = [:]
    /// Every op stored, in order (the store's log keeps only its window).
    private(set) var log: [AppliedOp] = []
    /// The version each stored client op is at.
    private(set) var appliedAt: [ClientSeq: UInt64] = [:]
    /// The last seq stored per client.
    private(set) var lastConsumed: [String: UInt64] = [:]
    var stats = Stats()
    private var problems: [String] = []

    /// True when a quota limits the rate of ops (a sub's): only then may an op be refused
    /// `RATE_LIMITED` (the session's own rate is never reached in the simulation).
    let ratesLimited: Bool

    init(workspace: Workspace, limits: Limits, ratesLimited: Bool = false) {
        workspaceId = workspace.id
        self.limits = limits
        self.ratesLimited = ratesLimited
        history = [workspace]
    }

    /// The stored workspace now.
    var current: Workspace { history[history.count - 1] }

    /// An operator deleted the workspace: its history is gone and a new one starts at `workspace`
    /// (version 0, a new epoch), where seqs count from nothing again (the dedup table went with
    /// it). What was counted stays counted.
    mutating func restart(at workspace: Workspace) {
        let counted = stats
        self = RuleOracle(workspace: workspace, limits: limits, ratesLimited: ratesLimited)
        stats = counted
    }

    private mutating func fail(_ problem: String) { problems.append(problem) }

    /// A client sent a Submit. Every send of one seq must carry the same op and baseVersion (the
    /// server's dedup answers a resend by its seq alone). Returns what is wrong, if anything.
    mutating func sent(client: String, seq: UInt64, baseVersion: UInt64, op: TabsyncCore.Operation?) -> String? {
        let key = ClientSeq(client: client, seq: seq)
        let now = Submitted(op: op, baseVersion: baseVersion)
        if let first = submitted[key] {
            return first == now ? nil : "\(client) sent seq \(seq) as \(now) after \(first)"
        }
        submitted[key] = now
        return nil
    }

    /// A batch the store accepted: walks its records in server order. Returns what is wrong.
    mutating func stored(_ batch: CommitBatch) -> [String] {
        problems = []
        if let base = batch.baseVersions[workspaceId], base != current.version {
            fail("the store accepted a batch on base v\(base) at v\(current.version)")
        }
        for record in batch.records where record.workspaceId == workspaceId {
            check(record)
            if !problems.isEmpty { return problems }
        }
        if let snapshot = batch.workspaces[workspaceId], snapshot != current {
            fail("the batch's snapshot v\(snapshot.version) \(snapshot.tabs.map(\.id)) is not what its records make: "
                + "v\(current.version) \(current.tabs.map(\.id))")
        }
        return problems
    }

    private mutating func check(_ record: CommitRecord) {
        stats.records += 1
        let before = current
        let what = "\(record.clientId) seq \(record.seq)"
        let key = ClientSeq(client: record.clientId, seq: record.seq)
        guard let submission = submitted[key] else { return fail("\(what) is stored but was never sent") }
        if let last = lastConsumed[record.clientId], record.seq <= last {
            return fail("\(what) stored after seq \(last) of the same client (consumed twice, or out of order)")
        }
        lastConsumed[record.clientId] = record.seq
        let asked = askedGroup(by: submission.op)
        let applied: AppliedOp?
        let refusal: OpError?
        switch record.outcome {
        case .applied(let ops):
            guard let last = ops.last else { return fail("\(what) stored as applied with no op") }
            if last.clientId != record.clientId || last.seq != record.seq {
                fail("\(what) stored as \(last.clientId) seq \(last.seq)")
            }
            if ops.dropLast().contains(where: { $0.op.kind != .rekey || !$0.clientId.isEmpty || $0.seq != 0 }) {
                fail("only a server rekey (clientId \"\", seq 0) may come before an op: \(ops)")
            }
            for op in ops { apply(op) }
            // The placement rule decides the group of every tab the op placed (docs/design.md, "Tab groups").
            let placedFrom = ops.count > 1 && history.count >= 2 ? history[history.count - 2] : before
            switch last.op {
            case .group, .ungroup, .updateGroup: stats.groupOps[last.op.kind.rawValue, default: 0] += 1
            case .add(let tab, _, _) where !tab.group.isEmpty: stats.placedInGroup += 1
            case .move(_, _, let group) where !group.isEmpty: stats.placedInGroup += 1
            default: break
            }
            stats.mostGroups = max(stats.mostGroups, current.groups.count)
            for problem in GroupPlacementOracle.check(last.op, asked: asked, before: placedFrom, after: current) {
                fail("\(what) \(last.op) on \(placedFrom.tabs.map { "\($0.id)(\($0.group))" }): \(problem)")
            }
            appliedAt[key] = last.version
            (applied, refusal) = (last, nil)
            stats.applied += 1
        case .rejected(let error):
            (applied, refusal) = (nil, error)
            stats.rejected[error.code, default: 0] += 1
        }
        guard problems.isEmpty else { return }
        guard let op = submission.op else {
            if applied != nil { fail("\(what) did not convert, yet was applied as \(applied!.op)") }
            return
        }
        checkRules(before: before, submitted: op, baseVersion: submission.baseVersion, applied: applied, refusal: refusal)
    }

    /// One stored op onto the history: it must follow the last version and apply to a plain copy,
    /// which must keep the invariants and store no key over 64 bytes.
    private mutating func apply(_ applied: AppliedOp) {
        var next = current
        guard applied.version == next.version + 1 else {
            return fail("v\(applied.version) stored after v\(next.version): a gap or a version written twice")
        }
        do {
            try next.apply(applied: applied)
        } catch {
            return fail("the canonical op v\(applied.version) \(applied.op) does not apply to a plain copy: \(error)")
        }
        let broken = next.invariantViolations(limits: limits)
        if !broken.isEmpty { fail("invariants broken after v\(applied.version) \(applied.op): \(broken)") }
        if next.tabs.contains(where: { $0.key.utf8.count > PositionKey.maxStoredLength }) {
            fail("a key over \(PositionKey.maxStoredLength) bytes stored at v\(applied.version)")
        }
        if applied.op.kind == .rekey {
            stats.serverRekeys += 1
            rekeyVersions.append(applied.version)
        }
        history.append(next)
        log.append(applied)
    }

    // MARK: the rules

    private mutating func checkRules(
        before: Workspace, submitted op: TabsyncCore.Operation, baseVersion: UInt64, applied: AppliedOp?, refusal: OpError?
    ) {
        // Over the sub's ops quota: refused before any rule is asked (docs/design.md, "Quotas").
        if refusal?.code == .rateLimited {
            if !ratesLimited { fail("\(op) refused RATE_LIMITED in a world with no quota on the rate of ops") }
            return
        }
        // Remove wins: the tab an op names must be there.
        let named: String?
        switch op {
        case .move(let id, _, _), .remove(let id): named = id
        case .update(let u): named = u.tabId
        case .activate(.tabId(let id)): named = id
        default: named = nil
        }
        if let named {
            let there = before.index(of: named) != nil
            if refusal?.code == .tabGone && there { fail("\(op) refused TAB_GONE, but \(named) was there") }
            if applied != nil && !there { fail("\(op) applied, but \(named) was not there (remove wins)") }
            if let applied, there, before.tab(named)!.locked, [.move, .remove].contains(op.kind) {
                fail("\(applied.op) applied to locked tab \(named)")
            }
        }

        checkKeyPlace(before: before, submitted: op, baseVersion: baseVersion, applied: applied, refusal: refusal)
        checkHistoryOp(before: before, submitted: op, applied: applied, refusal: refusal)
        guard let applied else { return }

        // Not editable: nothing that changes the list.
        if !before.editable {
            switch applied.op {
            case .add, .move, .remove, .replace, .restore, .group, .ungroup: fail("\(applied.op) applied while the workspace was not editable")
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
                fail("removing \(id) from \(before.tabs.map(\.id)) (active \(before.activeTabId)) made "
                    + "\(applied.activeTabId.isEmpty ? "none" : applied.activeTabId) active, not \(expected.isEmpty ? "none" : expected)")
            }
        }

        // Open: the same id, else the first tab with the same non-empty url, else an add.
        if case .open(let tab, _) = op {
            let existing = before.tab(tab.id) ?? (tab.url.isEmpty ? nil : before.tabs.first { $0.url == tab.url })
            switch (existing, applied.op) {
            case (let t?, .activate(.tabId(let id))) where id == t.id: break
            case (nil, .add(let added, _, true)) where added.id == tab.id: break
            default: fail("open \(tab.id) (url \(tab.url)) on \(before.tabs.map { "\($0.id)|\($0.url)" }) became \(applied.op)")
            }
        }
    }

    /// History (docs/design.md, "History"): a restore puts back exactly the state at its version (a
    /// version after today's or outside history refused `INVALID_ARGUMENT`); a reopen adds the
    /// tab as it was just before its last close, activated, and is refused when the tab is open.
    private mutating func checkHistoryOp(before: Workspace, submitted op: TabsyncCore.Operation, applied: AppliedOp?, refusal: OpError?) {
        switch op {
        case .restore(let version, nil):
            stats.historyOps["restore " + (applied == nil ? refusal!.code.wireName : "applied"), default: 0] += 1
            guard let applied else {
                // A version not stored yet when the read ran may be refused as after the newest; one
                // outside history never is here (history keeps every op).
                if refusal?.code == .invalidArgument && refusal!.message.contains("outside the history") {
                    fail("restore of v\(version) refused INVALID_ARGUMENT (\(refusal!.message)), but history keeps every op")
                }
                return
            }
            guard case .restore(version, let state?) = applied.op else { return fail("restore of v\(version) became \(applied.op)") }
            let then = history[Int(version)]
            if state.tabs != then.tabs || state.groups != then.groups || applied.activeTabId != then.activeTabId
                || state.editable != then.editable
            {
                fail("restore of v\(version) put back \(state.tabs.map(\.id)) active \(applied.activeTabId), "
                    + "not v\(version)'s \(then.tabs.map(\.id)) active \(then.activeTabId)")
            }
        case .reopen(let id):
            stats.historyOps["reopen " + (applied == nil ? refusal!.code.wireName : "applied"), default: 0] += 1
            // A refusal is not checked: the read sees only what was stored when it ran (a close
            // still being stored reads as open).
            guard let applied else { return }
            guard case .add(let tab, _, true) = applied.op, tab.id == id else { return fail("reopen of \(id) became \(applied.op)") }
            if before.tab(id) != nil { fail("reopen of \(id) applied while it was open") }
            guard let last = lastSeen(id), var was = history[Int(last)].tab(id) else {
                return fail("reopen of \(id) applied, but it was never in the workspace")
            }
            was.key = tab.key
            was.group = tab.group  // the placement rule decides it (checked where the op is applied)
            if tab != was { fail("reopen of \(id) brought back \(tab), not its last fields \(was)") }
        default:
            break
        }
    }

    /// The group a submitted op asked for its tab: an add's or open's own, a reopen's the group the tab
    /// had when last seen (nil when nothing was asked).
    private func askedGroup(by op: TabsyncCore.Operation?) -> String? {
        switch op {
        case .add(let tab, _, _), .open(let tab, _): tab.group
        case .reopen(let id): lastSeen(id).flatMap { history[Int($0)].tab(id)?.group }
        default: nil
        }
    }

    /// The last version at which the tab was in the workspace, if ever.
    private func lastSeen(_ id: String) -> UInt64? {
        history.lastIndex { $0.tab(id) != nil }.map { UInt64($0) }
    }

    /// Rules 7 and 1 (see ``RuleSevenOracle``) for an op with a key place, or its refusal
    /// (`INVALID_ARGUMENT`, "compute it again") when a rekey since its baseVersion had left the
    /// server's log window: such a key is never read against keys it was not computed for.
    ///
    /// What the server holds is not known from outside, only bounded (docs/design.md, "Durability"):
    /// its log window always holds at least the last `logRetention` versions (a sequencer trims to
    /// exactly that many; a store keeps at least that many for a read back), and at most the last
    /// `logRetention + max(logRetention / 4, 1)` (both trim in chunks of a quarter). So:
    /// - a rekey since baseVersion at or before `V - logRetention - max(logRetention / 4, 1)` (V: the
    ///   version the op is sequenced on) has surely left: the op must be refused;
    /// - a baseVersion at or after `V - logRetention` is surely inside the window: a refusal as
    ///   computed before a forgotten rekey is wrong;
    /// - in between it is truly ambiguous: a server that has held the log since that version still
    ///   holds every rekey in it and translates, while one that read the workspace back (after a
    ///   restart, a failed commit or falling behind another node) cannot know which versions before
    ///   its window were rekeys and refuses any key computed before it (`Sequencer`'s
    ///   `forgottenRekeysThrough`). Either answer is accepted there, and counted.
    /// An applied key place is always checked exactly: a server that did not refuse holds every
    /// rekey since the baseVersion, so the key must have gone through all of them.
    private mutating func checkKeyPlace(
        before: Workspace, submitted op: TabsyncCore.Operation, baseVersion b: UInt64, applied: AppliedOp?, refusal: OpError?
    ) {
        guard let (submittedKey, movingId) = RuleSevenOracle.keyPlace(of: op) else { return }
        // A baseVersion past the stored version names a version of a history an operator's delete
        // erased (the client sent it again into the new epoch): rule 7 has nothing to translate
        // it against, and any place is accepted.
        if b > before.version {
            stats.ambiguousKeyPlaces += 1
            return
        }
        // An open that activates a tab that is there does not use its place (nor is refused for it).
        if op.kind == .open, case .activate? = applied?.op { return }
        let v = Int(before.version)
        let retention = max(limits.logRetention, 1)
        let surelyHeldFrom = v - retention + 1  // versions >= this are in the server's window
        let surelyGoneThrough = v - retention - max(retention / 4, 1)  // versions <= this are not
        let since = b > 0 ? rekeyVersions.filter { $0 > b && $0 <= before.version } : []
        let mustRefuse = since.contains { Int($0) <= surelyGoneThrough }
        let mayRefuse = b > 0 && Int(b) < surelyHeldFrom - 1
        let refusedAsStale = refusal?.code == .invalidArgument && refusal!.message.contains("compute it again")
        let what = "\(op) base \(b) on v\(v)"
        if mustRefuse {
            guard refusal?.code == .invalidArgument else {
                return fail("\(what), computed before the rekeys at \(since.filter { Int($0) <= surelyGoneThrough }) that had "
                    + "left the log window, became \(applied.map { "\($0.op)" } ?? "\(refusal!)"), not INVALID_ARGUMENT")
            }
            if refusedAsStale { stats.staleKeyRefusals += 1 }
            return
        }
        if refusedAsStale {
            guard mayRefuse else {
                return fail("\(what) refused as computed before a forgotten rekey, but every version since v\(b) is "
                    + "inside the log window (\(retention) ops): \(refusal!.message)")
            }
            stats.ambiguousKeyPlaces += 1
            return
        }
        guard let applied else { return }
        let finalKey: String
        switch applied.op {
        case .add(let t, _, _): finalKey = t.key
        case .move(_, .key(let k), _): finalKey = k
        default: return fail("\(what) became \(applied.op)")
        }
        if !since.isEmpty { stats.translatedKeyPlaces += 1 }
        if mayRefuse { stats.ambiguousKeyPlaces += 1 }
        if let problem = RuleSevenOracle.placementProblem(
            submitted: submittedKey, baseVersion: b, moving: movingId, finalKey: finalKey,
            appliedVersion: applied.version, history: history, rekeyVersions: rekeyVersions)
        {
            fail("\(what): \(problem)")
        }
    }
}
