import PropertyBased
import Testing
import TabsyncCore
import TabsyncTestSupport

/// Rule 7 through the server's apply path for random histories: a key a client computed at any
/// earlier version — between two tabs, before the first, after the last, or equal to a tab's key
/// (also of a tab removed since) — is placed where rules 7 and 1 put it (``RuleSevenOracle``, which
/// knows the whole history), or refused `INVALID_ARGUMENT` when a rekey since its baseVersion has
/// left the log window. Log windows are small here, so rekeys leave them often.
@Suite struct SequencerRuleSevenPropertyTests {
    /// A sequencer and the server's workspace at every version so far.
    struct Server {
        var sequencer: Sequencer
        var history: [Workspace]
        var rekeyVersions: [UInt64] = []
        var seq: UInt64 = 0
        var problems: [String] = []
        var translated = 0
        var refusedAsStale = 0

        init(limits: Limits) {
            sequencer = Sequencer(workspace: Workspace(id: "w"), limits: limits)
            history = [sequencer.workspace]
        }

        var current: Workspace { sequencer.workspace }

        /// Submits `op` with a key place computed at `baseVersion`, and checks the answer.
        mutating func submit(_ op: Operation, baseVersion: UInt64) {
            let before = sequencer.workspace
            let held = Set(sequencer.rekeys.map(\.version))
            seq += 1
            let outcome = sequencer.submit(clientId: "c", seq: seq, baseVersion: baseVersion, op: op)
            if case .applied(let ops) = outcome {
                for applied in ops {
                    var next = history.last!
                    do throws(OpError) {
                        try next.apply(applied: applied)
                    } catch {
                        problems.append("v\(applied.version) \(applied.op) does not apply: \(error)")
                    }
                    history.append(next)
                    if applied.op.kind == .rekey { rekeyVersions.append(applied.version) }
                }
            }
            guard let (key, moving) = RuleSevenOracle.keyPlace(of: op) else { return }
            let since = baseVersion > 0 ? rekeyVersions.filter { $0 > baseVersion && $0 <= before.version } : []
            let forgotten = since.filter { !held.contains($0) }
            let what = "\(op) base \(baseVersion) at v\(before.version)"
            switch outcome {
            case .rejected(let error) where !forgotten.isEmpty:
                if error.code == .invalidArgument { refusedAsStale += 1 } else { problems.append("\(what): \(error), not INVALID_ARGUMENT") }
            case .applied where !forgotten.isEmpty:
                problems.append("\(what): applied, though computed before the rekeys at \(forgotten) the server no longer held")
            case .applied(let ops):
                let applied = ops.last!
                let finalKey: String
                switch applied.op {
                case .add(let tab, _, _): finalKey = tab.key
                case .move(_, .key(let k), _): finalKey = k
                default:
                    problems.append("\(what) became \(applied.op)")
                    return
                }
                if !since.isEmpty { translated += 1 }
                if let problem = RuleSevenOracle.placementProblem(
                    submitted: key, baseVersion: baseVersion, moving: moving, finalKey: finalKey,
                    appliedVersion: applied.version, history: history, rekeyVersions: rekeyVersions)
                {
                    problems.append("\(what): \(problem)")
                }
            default:
                problems.append("\(what): \(outcome)")
            }
        }
    }

    /// A key place for a tab dropped into `view` (the moving tab left out): between two neighbours,
    /// often before the first tab, sometimes equal to a tab's key (a tab removed since, when there is
    /// one), sometimes long enough to make the server rekey.
    static func place<R: RandomNumberGenerator>(in view: Workspace, current: Workspace, moving: String?, using rng: inout R) -> Place {
        let list = view.tabs.filter { $0.id != moving }
        let gap = rng.chance(0.3) ? 0 : rng.int(0...list.count)
        let lower = gap > 0 ? list[gap - 1].key : nil
        let upper = gap < list.count ? list[gap].key : nil
        switch rng.int(0...9) {
        case 0...1 where !view.tabs.isEmpty:
            let removed = view.tabs.filter { current.index(of: $0.id) == nil }
            return .key(rng.pick(!removed.isEmpty && rng.chance(0.6) ? removed : view.tabs).key)
        case 2: return .key(RuleSevenOracle.deepKey(between: lower, upper, length: rng.int(65...120)))
        default: return .key(PositionKey.between(lower, upper))
        }
    }

    /// One random history from `seed`; returns the server after it.
    static func run(seed: UInt64) -> Server {
        var rng = SplitMix64(seed: seed)
        var server = Server(limits: Limits(maxTabs: 40, logRetention: rng.int(3...30)))
        var made = 0
        for _ in 0..<rng.int(30...120) {
            let now = server.current
            // Late clients compute at an earlier version (not always: the others are up to date).
            let base = now.version > 0 && rng.chance(0.5) ? UInt64(rng.int(1...Int(now.version))) : now.version
            let view = server.history[Int(base)]
            let movable = view.tabs.filter { now.index(of: $0.id) != nil }
            switch rng.int(0...9) {
            case 0...5 where now.tabs.count < 40:
                made += 1
                let place = place(in: view, current: now, moving: nil, using: &rng)
                server.submit(.add(tab: Tab(id: "t\(made)"), place: place, activate: false), baseVersion: base)
            case 6...7 where !movable.isEmpty:
                let id = rng.pick(movable).id
                server.submit(.move(tabId: id, place: place(in: view, current: now, moving: id, using: &rng)), baseVersion: base)
            default:
                if let tab = now.tabs.randomElement(using: &rng) { server.submit(.remove(tabId: tab.id), baseVersion: base) }
            }
            if !server.problems.isEmpty { break }
        }
        return server
    }

    @Test func aKeyFromAnyEarlierVersionIsPlacedAsRuleSevenSaysOrRefusedWhenItsRekeyIsForgotten() async {
        let seeds = Generator<UInt64, Shrink.None<UInt64>> { rng in rng.next() }
        await propertyCheck(count: 300, input: seeds) { seed in
            let server = Self.run(seed: seed)
            #expect(server.problems.isEmpty, "seed \(seed): \(server.problems.prefix(3).joined(separator: "; "))")
            #expect(server.sequencer.workspace.invariantViolations(limits: server.sequencer.limits).isEmpty)
        }
    }

    /// The runs reach what they are meant to check: keys translated through rekeys the server held,
    /// and keys refused because a rekey since their base had left the window.
    @Test func theRandomHistoriesReachTranslatedAndForgottenRekeys() {
        var translated = 0
        var refused = 0
        for seed in UInt64(1)...40 {
            let server = Self.run(seed: seed)
            translated += server.translated
            refused += server.refusedAsStale
        }
        #expect(translated > 20 && refused > 5, "\(translated) translated, \(refused) refused")
    }
}
