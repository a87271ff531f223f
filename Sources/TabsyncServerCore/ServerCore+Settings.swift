import Foundation
import TabsyncCore
import TabsyncStore

extension ServerCore {
    /// What the core decides with: the limits and timings of the server's configuration (the
    /// driver's `Server.Configuration` makes it), nothing about sockets, TLS or files.
    package struct Settings: Sendable {
        package var limits: Limits
        /// A connection that has not sent its Hello by then is refused `PROTOCOL_ERROR`.
        package var helloTimeout: Duration
        /// A session heard nothing from (no frame, no pong) for this long is dropped; it is pinged
        /// after about half of it (ServerCore+Keepalive.swift). Nil: no keepalive (the core's
        /// tests that are not about it).
        package var idleTimeout: Duration?
        /// A change feed silent this long gets a comment line (ServerCore+Feed.swift).
        package var feedKeepAlive: Duration = .seconds(15)
        /// Presence goes out at most this often per workspace.
        package var presenceInterval: Duration
        /// Consecutive seconds with `RATE_LIMITED` ops after which a session is closed 1008.
        package var rateLimitStrikes: Int
        /// A workspace with no session and nothing to store is dropped from memory after this long
        /// (zero: at once).
        package var idleUnload: Duration
        /// Peers a presence list names at most; the rest are counted.
        package var maxPresencePeers: Int
        /// How long a peer closed for reading too slowly has to read up to the close frame.
        package var slowCloseGrace: Duration
        /// Tokens are required (`Hello.token`, `Authorization: Bearer`).
        package var accessControl: Bool
        /// Several nodes share the store: keep each workspace's stored state and poll this often
        /// (zero: never) for commits no notification told of. Nil: the store has one writer.
        package var sharedStorePollInterval: Duration?
        /// How long a small batch may wait for more records before it goes to the store (zero:
        /// never; ``CommitPipeline/Linger`` says when it does).
        package var commitLinger: Duration = .zero
        /// The store keeps a holder registry (``HolderRegistry``): the node registers before each
        /// read of a workspace (``Action/hold(_:)``), releases what it unloads and beats every
        /// `heartbeatInterval` (``Action/heartbeat``) while it runs. Nil: no registry.
        package var holderRegistry: HolderRegistrySettings?
        /// The store keeps a holder registry: a workspace split across nodes is sent home by the
        /// node that holds it longest (``ServerCore/sawOtherNodesCommit(_:)``).
        package var yieldsSplitWorkspaces = false
        /// At most one check for a newer holder per workspace in this long (``ServerCore/sawOtherNodesCommit(_:)``).
        package var moveCheckInterval: Duration = .seconds(60)
        /// A check for a newer holder waits a random pause of up to this long first, so two nodes
        /// that took each other's ops do not decide at once (zero: it goes at once).
        package var holderCheckPause: Duration = .seconds(1)
        /// Seeds the core's random pauses (``Jitter``): the same seed, the same pauses. The driver
        /// draws one per process; the simulation takes it from the world's seed.
        package var jitterSeed: UInt64 = 0
        /// This node's name, the first part of the session ids the admin API gives
        /// (``ServerCore/adminSessionId(_:)``).
        package var nodeName = "n1"
        /// With a shared store, how often the admin log is read for other nodes' revocations,
        /// kicks and deletes (the driver makes it `--store-poll-interval`).
        package var adminPollInterval: Duration = .seconds(1)
        /// The admin log as read when the server started (revocations in force).
        package var adminLog: [AdminEntry] = []
        /// Operators' limits per sub and per workspace.
        package var quotas = Quotas()
        /// The epoch of a workspace the store has never held (the store's own).
        package var storeEpoch: String
        /// How long a graceful stop may take in all: commits drain for at most 70% of it, then
        /// every session is closed 1001 and the rest waits for the close frames.
        package var shutdownTimeout: Duration

        package init(
            limits: Limits = .default, helloTimeout: Duration = .seconds(10),
            presenceInterval: Duration = .milliseconds(100), rateLimitStrikes: Int = 5,
            idleUnload: Duration = .seconds(300), maxPresencePeers: Int = 128, slowCloseGrace: Duration = .seconds(5),
            accessControl: Bool = false, sharedStorePollInterval: Duration? = nil, storeEpoch: String,
            shutdownTimeout: Duration = .seconds(5)
        ) {
            self.limits = limits
            self.helloTimeout = helloTimeout
            self.presenceInterval = presenceInterval
            self.rateLimitStrikes = rateLimitStrikes
            self.idleUnload = idleUnload
            self.maxPresencePeers = maxPresencePeers
            self.slowCloseGrace = slowCloseGrace
            self.accessControl = accessControl
            self.sharedStorePollInterval = sharedStorePollInterval
            self.storeEpoch = storeEpoch
            self.shutdownTimeout = shutdownTimeout
        }

        /// Several nodes share the store.
        package var sharedStore: Bool { sharedStorePollInterval != nil }
    }

    /// The holder registry's timing, as the core keeps it (``Settings/holderRegistry``).
    package struct HolderRegistrySettings: Sendable, Equatable {
        /// How often the node beats (``HolderRegistry/heartbeatInterval``).
        package var heartbeatInterval: Duration

        package init(heartbeatInterval: Duration) {
            self.heartbeatInterval = heartbeatInterval
        }
    }

    /// The core's one source of randomness: SplitMix64 from ``Settings/jitterSeed``, so the same
    /// seed gives the same pauses (and the simulation replays them).
    struct Jitter {
        private var random: SplitMix64

        init(seed: UInt64) { random = SplitMix64(seed: seed) }

        mutating func next() -> UInt64 { random.next() }

        /// A duration from zero to `limit`, in whole microseconds.
        mutating func pause(upTo limit: Duration) -> Duration {
            let micros = UInt64(max(0, limit.microseconds))
            guard micros > 0 else { return .zero }
            return .microseconds(Int64(next() % (micros + 1)))
        }
    }
}
