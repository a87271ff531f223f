import Logging
import SwiftProtobuf
import TabsyncCore
import TabsyncProto
import TabsyncStore
import TabsyncTestSupport
@testable import TabsyncClient
@testable import TabsyncServerCore

/// The shape of a simulated world (drawn from its seed) and what a run counted.
extension SimulatedWorld {
    struct Options: CustomStringConvertible {
        var nodes = 1
        var clients = 3
        var steps = 400
        /// Chance that a store commit fails (nothing stored), and that its answer is lost after it
        /// was stored or not (`outcomeUnknown`).
        var commitFailure = 0.03
        var outcomeUnknown = 0.02
        var loadFailure = 0.02
        var disconnect = 0.02
        var crash = 0.004
        var logRetention = 100_000
        var maxTabs = Limits.default.maxTabs
        var maxResumeOps = Limits.default.maxResumeOps
        /// How clients choose places (``PlaceMix``).
        var placeMix = PlaceMix.usual
        /// Chance that a dropped connection's head (1-3 frames the client had sent) still reaches
        /// the server after the drop, even after the client reconnected: a server that has not
        /// noticed the close yet reads it.
        var lateDelivery = 0.5
        /// Clients connect to any node, so the workspace is split across nodes: half of the
        /// connections go to a node drawn at random (a proxy's spill, or a client that reached a
        /// node before the proxy marked it up or down), and the proxy sometimes moves the home to
        /// another node while the old home keeps its sessions. Off: they connect to its home node,
        /// which moves to the next node when the home crashes (docs/design.md, "Several nodes and
        /// placement"). A third of the worlds split (drawn apart from the rest, so the other worlds
        /// of a seed stay as they were); a split world has two nodes or more.
        var split = false
        /// The nodes' commit linger (``CommitPipeline/Linger``); zero: off. A third of the worlds
        /// linger (drawn apart from the rest, so the other worlds of a seed stay as they were).
        var commitLinger: Duration = .zero
        /// The nodes' idle timeout (``ServerCore/Settings/idleTimeout``): the core pings and drops
        /// silent sessions; some peers never answer pings, and some drops leave the connection
        /// half-open (the server never hears of them). Nil: no keepalive. A third of the worlds
        /// (drawn apart from the rest, so the other worlds of a seed stay as they were).
        var keepalive: Duration?
        /// Access control on: every client has a token the world's verifier turns into a grant
        /// (two subs share the clients), and operators revoke tokens now and then (the client is
        /// closed 4401 and stops for good). A third of the worlds (drawn apart from the rest).
        var accessControl = false
        /// With access control, the ops quota per sub (`--max-ops-per-second-per-sub`); nil: none.
        var opsPerSecondPerSub: Int?

        /// Makes the world split, with at least `nodes` nodes.
        mutating func split(nodes atLeast: Int = 2) {
            split = true
            nodes = max(nodes, atLeast)
        }

        var description: String {
            "\(nodes) nodes\(split ? " (split)" : ""), \(clients) clients, \(steps) steps"
                + (placeMix == .rekeyHeavy ? ", rekey-heavy" : "")
                + (commitLinger > .zero ? ", linger \(commitLinger)" : "")
                + (keepalive.map { ", idle timeout \($0)" } ?? "")
                + (logRetention < 100_000 ? ", logRetention \(logRetention)" : "")
                + (maxTabs != Limits.default.maxTabs ? ", maxTabs \(maxTabs)" : "")
                + (maxResumeOps != Limits.default.maxResumeOps ? ", maxResumeOps \(maxResumeOps)" : "")
                + (accessControl ? ", access control" : "")
                + (opsPerSecondPerSub.map { ", \($0) ops/s per sub" } ?? "")
        }

        /// A world's shape from its seed: 1–3 nodes, 1–6 clients, 200–600 steps, fault rates from
        /// none to high; a quarter of the worlds rekey-heavy (rule 7's hard cases: 2-20 clients whose
        /// places are mostly keys, deep ones among them, a log window of 6-400 ops so that rekeys
        /// leave it), and a third of the others with a small log window or few tabs allowed.
        static func from(seed: UInt64) -> Options {
            var rng = SplitMix64(seed: seed ^ 0x5EED)
            var o = Options()
            o.nodes = rng.int(1...3)
            o.clients = rng.int(1...6)
            o.steps = rng.int(200...600)
            let faults = rng.pick([0.0, 0.5, 1.0, 2.0])
            o.commitFailure *= faults
            o.outcomeUnknown *= faults
            o.loadFailure *= faults
            o.disconnect *= faults
            o.crash *= faults
            if rng.chance(0.25) {
                o.placeMix = .rekeyHeavy
                o.clients = rng.int(2...20)
                o.logRetention = rng.int(6...400)
                o.maxTabs = rng.int(8...40)
                o.maxResumeOps = rng.int(1...200)
            } else if rng.chance(0.33) {
                o.logRetention = rng.int(6...200)
                o.maxTabs = rng.int(4...30)
                o.maxResumeOps = rng.int(1...60)
            }
            var lingerRng = SplitMix64(seed: seed ^ 0x11AE)
            if lingerRng.chance(0.33) { o.commitLinger = .milliseconds(lingerRng.int(5...120)) }
            var splitRng = SplitMix64(seed: seed ^ 0x5B17)
            if splitRng.chance(0.33) { o.split(nodes: splitRng.int(2...3)) }
            var keepaliveRng = SplitMix64(seed: seed ^ 0x1D1E)
            if keepaliveRng.chance(0.33) { o.keepalive = .milliseconds(keepaliveRng.pick([500, 1_000, 2_000])) }
            var adminRng = SplitMix64(seed: seed ^ 0xAD31)
            if adminRng.chance(0.33) {
                o.accessControl = true
                if adminRng.chance(0.5) { o.opsPerSecondPerSub = adminRng.int(2...40) }
            }
            return o
        }
    }

    struct Stats {
        var delivered = 0
        var commits = 0
        var failedCommits = 0
        var unknownOutcomes = 0
        var behind = 0
        var crashes = 0
        var disconnects = 0
        /// Frames of dropped connections the server read after the drop.
        var lateDelivered = 0
        /// Wakes a lingering batch asked for and got.
        var lingerWakes = 0
        /// Timeouts handled: a core's deadline came (``ServerCore/nextDeadline``).
        var timeouts = 0
        /// Sessions an operator kicked (the admin log's entry read by the node holding them).
        var kicks = 0
        /// Tokens an operator revoked (every node read the entry), and Submits refused over the
        /// sub's ops quota.
        var revocations = 0
        var quotaRefusals = 0
        /// Workspaces an operator deleted (the store's delete done).
        var deletes = 0
        /// From the cores' metrics, over every life: Submits re-sequenced after `behind`, loads
        /// that found the workspace held by another live node (splits), workspaces handed to
        /// their newer holder (moves), checks for a newer holder.
        var resequenced = 0
        var splits = 0
        var moves = 0
        var holderChecks = 0
        /// Commits announced to another holder (the registry named it).
        var notified = 0

        /// History queries answered with ops, and the ops in them checked against the stored log.
        var historyReads = 0
        var historyOpsChecked = 0
        /// Keepalive: pings asked for, pongs read, connections left half-open, idle closes.
        var pings = 0
        var pongs = 0
        var halfOpen = 0
        var idleCloses = 0
        /// HTTP writes: requests sent (first sends and repeats), answers lost on their way, 503s.
        var httpSends = 0
        var httpAnswersLost = 0
        var httpRetryLater = 0
        /// 200 answers with `ANSWER_GONE` in an op's place (its op left the log window).
        var httpAnswersGone = 0

        mutating func add(_ other: Stats) {
            delivered += other.delivered
            commits += other.commits
            failedCommits += other.failedCommits
            unknownOutcomes += other.unknownOutcomes
            behind += other.behind
            crashes += other.crashes
            disconnects += other.disconnects
            lateDelivered += other.lateDelivered
            lingerWakes += other.lingerWakes
            timeouts += other.timeouts
            kicks += other.kicks
            revocations += other.revocations
            quotaRefusals += other.quotaRefusals
            deletes += other.deletes
            resequenced += other.resequenced
            splits += other.splits
            moves += other.moves
            holderChecks += other.holderChecks
            notified += other.notified
            historyReads += other.historyReads
            historyOpsChecked += other.historyOpsChecked
            pings += other.pings
            pongs += other.pongs
            halfOpen += other.halfOpen
            idleCloses += other.idleCloses
            httpSends += other.httpSends
            httpAnswersLost += other.httpAnswersLost
            httpRetryLater += other.httpRetryLater
            httpAnswersGone += other.httpAnswersGone
        }
    }
}
