import Logging
import TabsyncCore
import TabsyncProto
import TabsyncStore

/// Group commit: how what the loop applied in memory becomes durable, and when anyone hears of it.
/// Owned by ``ServerCore``; the store call runs wherever the driver runs store calls.
///
/// The contract with the store (``WorkspaceStore``):
///
/// - **A record** is one consumed seq: a Submit's applied ops (with the old keys of the rekeys
///   among them), or its refusal. Seqs that consume nothing (seq 0, a repeated or ignored seq)
///   have no record.
/// - **A batch** (``CommitBatch``) is every record consumed since the previous batch was sent, in
///   server order, plus each workspace those records touch as it is after its last one. At most
///   one batch is in flight: one `commit` call on the store thread while the loop goes on. What
///   is consumed meanwhile waits for the next batch, so a slow disk makes batches bigger; it never
///   makes the loop wait.
/// - **Effects** are the messages that reveal the live state: `Applied` to the workspace,
///   `Rejected` or a repeated answer to the submitter, `Welcome` to a joining session. Each waits
///   behind the records consumed before it and goes out, in order, only once they are all stored;
///   with no record before it and no batch in flight, it goes out at once.
/// - **Acknowledged:** `commit` returned. The batch's effects are released in order, and each
///   touched workspace's `durable` state (what HTTP serves) becomes its state in the batch.
/// - **Failed:** `commit` threw, and nothing of the batch is stored (all or nothing). Each
///   workspace the batch touched has a live state ahead of the store, so everything of it in the
///   pipeline (in flight and pending) is refused, never released: a submitter gets `Rejected`
///   `UNAVAILABLE` for its seq (not acknowledged, so it sends it again), a session waiting for its
///   `Welcome` gets `Error` `UNAVAILABLE` and close 1013, the pending records are dropped, and the
///   workspace is read back from the store (``WorkspaceTable/Entry`` `.reloading`: submits
///   are refused `UNAVAILABLE` until the read is in). The batch's effects of other workspaces are
///   released: none of their records was in it, so what they show is durable.
/// - **Behind** (a store shared by several servers, ``ServerCore/Settings/sharedStorePollInterval``): every
///   batch states, per workspace, the version this node last knew stored (`baseVersions`: its
///   hub's `stored` sequencer). When another node committed to some of them first, the store
///   refuses the whole batch with `behind` and stores nothing of it. Still on the store thread,
///   the node reads what it missed of each behind workspace (dedup state, then the ops after its
///   version); back on the loop:
///   - the batch's records and effects go back to the front of the pending ones, in order;
///     workspaces that were not behind are sent again unchanged in the next batch;
///   - each behind workspace takes the other nodes' ops into its `stored` sequencer (they are
///     durable), broadcasts them as `Applied` to its sessions, takes the stored dedup state (so a
///     seq another node consumed is answered, never applied twice), and starts its live state
///     again from there;
///   - its not-yet-acknowledged entries (in flight and pending, in order) are **re-sequenced**:
///     each keeps its Submit as received (``SubmitInput``: client, seq, base version, the op as
///     submitted or the refusal decided outside core) and runs through the sequencer again, so an
///     op may now be refused, get another key (rule 1), be translated through another node's
///     rekey (rule 7), or be answered from dedup; its record and effect are made anew. A waiting
///     `Welcome` is made again from the new live state;
///   - then the next batch goes out with the new base versions. Nothing was acknowledged before
///     it is stored; nothing is applied twice.
///
///   A behind workspace whose missed ops cannot be read (the store fails, or the log was compacted
///   past this node's version) takes the failure path above (its entries refused `UNAVAILABLE`,
///   the workspace read back whole). Other nodes' commits that no batch of this node ran into are
///   read on their notification or the poll (ServerCore+CatchUp.swift).
///
/// **The linger** (``Linger``, docs/architecture.md "Group commit and its linger"): with a shared
/// store, whose every commit costs round trips and a flush whatever its size, a small batch may
/// wait a little for company before it is sent, and only when company is coming: see
/// ``lingerDeadline(now:)``.
struct CommitPipeline {
    /// When a small batch waits before it is sent. Guarantees: no record waits longer than `limit`
    /// for the batch it is in to start; a batch of `batchTarget` records or more never waits; nor
    /// does any while fewer than one more record is expected within `limit` at the rate of the
    /// last whole second (a quiet node pays no latency); zero `limit`: never.
    struct Linger {
        var limit: Duration = .zero
        var batchTarget = 16
        /// Records consumed per second over the last whole second (or longer, when records were
        /// sparse).
        private(set) var rate: Double = 0
        private var windowStart: ServerCore.Instant?
        private var windowCount = 0

        /// One record consumed at `now`.
        mutating func count(at now: ServerCore.Instant) {
            roll(now)
            windowCount += 1
        }

        /// Closes the window once a second has passed (a timeout calls it too, so the rate falls when
        /// records stop).
        mutating func roll(_ now: ServerCore.Instant) {
            guard let start = windowStart else {
                windowStart = now
                return
            }
            let elapsed = start.duration(to: now)
            guard elapsed >= .seconds(1) else { return }
            rate = Double(windowCount) / elapsed.seconds
            windowCount = 0
            windowStart = now
        }
    }

    /// A message to release once every record before it is durable.
    enum Effect {
        /// `Applied` for each op to every session of the workspace.
        case broadcast(workspaceId: String, submitter: Int, ops: [AppliedOp], receivedAt: ServerCore.Instant)
        /// `Rejected` to the submitter only.
        case reject(workspaceId: String, session: Int, seq: UInt64, error: OpError)
        /// A repeated answer to a resubmitted seq, to the submitter only.
        case answer(workspaceId: String, session: Int, answer: Sequencer.Answer)
        /// A session's `Welcome`, made from the live state: it joins the broadcasts once it is out.
        case welcome(workspaceId: String, session: Int, welcome: Tabsync_V1_Welcome)
        /// `Rejected ANSWER_GONE` to a resubmitter whose seq's answer is no longer held.
        case answerGone(workspaceId: String, session: Int, seq: UInt64)

        var workspaceId: String {
            switch self {
            case .broadcast(let id, _, _, _), .reject(let id, _, _, _), .answer(let id, _, _), .welcome(let id, _, _),
                .answerGone(let id, _, _): id
            }
        }

        /// The session the effect answers (the submitter, or the session welcomed).
        var session: Int {
            switch self {
            case .broadcast(_, let session, _, _), .reject(_, let session, _, _), .answer(_, let session, _),
                .welcome(_, let session, _), .answerGone(_, let session, _): session
            }
        }

        /// True when the effect answers one of `session`'s seqs (not a `Welcome`).
        func answers(_ session: Int) -> Bool {
            if case .welcome = self { return false }
            return self.session == session
        }
    }

    /// An effect and, for one a Submit made, that Submit as received (to sequence it again).
    struct Entry {
        var effect: Effect
        var input: SubmitInput?
    }

    /// The batch being stored.
    struct InFlight {
        var id: UInt64
        var recordCount: Int
        /// The batch's records, in server order.
        var records: [CommitRecord]
        /// Every effect queued before the batch was sent, in order.
        var entries: [Entry]
        /// Each touched workspace as of the end of this batch (its durable state once the commit
        /// succeeds).
        var workspaces: [String: Workspace]

        var effects: [Effect] { entries.map(\.effect) }
    }

    /// Records consumed since the batch in flight was sent, in server order.
    private var pendingRecords: [CommitRecord] = []
    /// Effects queued since then, in order.
    private var pendingEntries: [Entry] = []
    /// The workspaces of `pendingRecords`.
    private(set) var pendingWorkspaces: Set<String> = []
    private(set) var inFlight: InFlight?
    private var nextId: UInt64 = 1
    var linger = Linger()
    /// When the oldest pending record was consumed (nil: none pending since the last batch).
    private var firstPendingAt: ServerCore.Instant?
    /// The pending records are a batch the store turned away (behind): they go again at once.
    private var lingerWaived = false

    /// Nothing pending and nothing being stored.
    var isIdle: Bool { inFlight == nil && pendingRecords.isEmpty && pendingEntries.isEmpty }

    var hasPendingRecords: Bool { !pendingRecords.isEmpty }

    /// True when an answer to one of `session`'s seqs waits in the pipeline (pending or in flight).
    func owesAnswer(to session: Int) -> Bool {
        pendingEntries.contains { $0.effect.answers(session) }
            || (inFlight?.entries.contains { $0.effect.answers(session) } ?? false)
    }

    /// True when `workspaceId` has records pending or in flight.
    func isBusy(_ workspaceId: String) -> Bool {
        pendingWorkspaces.contains(workspaceId) || (inFlight?.workspaces[workspaceId] != nil)
    }

    /// Queues an effect behind everything queued so far, with the record of the seq it consumed and
    /// the Submit it answers (when a Submit made it).
    mutating func append(_ record: CommitRecord?, _ effect: Effect, input: SubmitInput? = nil, at now: ServerCore.Instant) {
        if let record {
            pendingRecords.append(record)
            pendingWorkspaces.insert(record.workspaceId)
            linger.count(at: now)
            if firstPendingAt == nil { firstPendingAt = now }
        }
        pendingEntries.append(Entry(effect: effect, input: input))
    }

    /// Takes every pending effect (to release now: call only when no record is pending and no
    /// batch is in flight, so none of them waits for the store).
    mutating func takePendingEffects() -> [Effect] {
        let effects = pendingEntries.map(\.effect)
        pendingEntries = []
        return effects
    }

    /// With records pending and no batch in flight: nil when they go to the store now, else the
    /// instant they go at the latest (``Linger``). A batch turned away (behind) goes again at once.
    func lingerDeadline(now: ServerCore.Instant) -> ServerCore.Instant? {
        guard linger.limit > .zero, !lingerWaived, let first = firstPendingAt,
              pendingRecords.count < linger.batchTarget, linger.rate * linger.limit.seconds >= 1
        else { return nil }
        let deadline = first + linger.limit
        return now < deadline ? deadline : nil
    }

    /// Moves everything pending into flight as one batch. `workspaces`: each of
    /// ``pendingWorkspaces`` as it is now; `baseVersions`: the stored version each builds on (a
    /// shared store), else empty. Call only when no batch is in flight.
    mutating func startBatch(
        workspaces: [String: Workspace], logRetention: Int, baseVersions: [String: UInt64] = [:]
    ) -> (id: UInt64, batch: CommitBatch) {
        let batch = CommitBatch(
            records: pendingRecords, workspaces: workspaces, logRetention: logRetention, baseVersions: baseVersions)
        let id = nextId
        nextId += 1
        inFlight = InFlight(
            id: id, recordCount: batch.records.count, records: pendingRecords, entries: pendingEntries,
            workspaces: workspaces)
        pendingRecords = []
        pendingEntries = []
        pendingWorkspaces = []
        firstPendingAt = nil
        lingerWaived = false
        return (id, batch)
    }

    /// Takes batch `id` out of flight; nil when it is not the batch in flight.
    mutating func finish(_ id: UInt64) -> InFlight? {
        guard let flight = inFlight, flight.id == id else { return nil }
        inFlight = nil
        return flight
    }

    /// After `flight` failed: removes from the pipeline everything of the workspaces it touched.
    /// Returns their effects in order: those of the batch (`sent`) and those queued after it
    /// (`pending`: never sent to the store); and the batch's effects of other workspaces
    /// (`released`: no record of theirs was in it).
    mutating func removeFailed(_ flight: InFlight) -> (sent: [Effect], pending: [Effect], released: [Effect]) {
        let failed = flight.workspaces
        var sent: [Effect] = []
        var released: [Effect] = []
        for entry in flight.entries {
            if failed[entry.effect.workspaceId] != nil { sent.append(entry.effect) } else { released.append(entry.effect) }
        }
        let pending = pendingEntries.filter { failed[$0.effect.workspaceId] != nil }.map(\.effect)
        pendingEntries.removeAll { failed[$0.effect.workspaceId] != nil }
        pendingRecords.removeAll { failed[$0.workspaceId] != nil }
        if pendingRecords.isEmpty { firstPendingAt = nil }
        pendingWorkspaces.subtract(failed.keys)
        return (sent, pending, released)
    }

    /// After the store refused `flight` whole (`behind`): puts its records and entries back in
    /// front of the pending ones, in order, as if it had never been sent. Call right after
    /// ``finish(_:)``.
    mutating func requeue(_ flight: InFlight) {
        pendingRecords = flight.records + pendingRecords
        pendingEntries = flight.entries + pendingEntries
        pendingWorkspaces.formUnion(flight.records.lazy.map(\.workspaceId))
        lingerWaived = true
    }

    /// Removes every pending entry and record of these workspaces (none may be in flight) and
    /// returns the entries by workspace, in order: to be refused, or sequenced again.
    mutating func take(workspaces ids: Set<String>) -> [String: [Entry]] {
        var taken: [String: [Entry]] = [:]
        for entry in pendingEntries where ids.contains(entry.effect.workspaceId) {
            taken[entry.effect.workspaceId, default: []].append(entry)
        }
        pendingEntries.removeAll { ids.contains($0.effect.workspaceId) }
        pendingRecords.removeAll { ids.contains($0.workspaceId) }
        if pendingRecords.isEmpty { firstPendingAt = nil }
        pendingWorkspaces.subtract(ids)
        return taken
    }
}

/// A Submit as received, kept with its effect until it is stored so that it can run through the
/// sequencer again (re-sequencing, above): the op as submitted (its key and base version
/// untranslated), or the refusal decided before the sequencer (`RATE_LIMITED`, an op that does not
/// decode), which consumes the seq the same way again.
struct SubmitInput {
    enum Request {
        case op(TabsyncCore.Operation)
        case refuse(OpError)
    }

    var clientId: String
    var seq: UInt64
    var baseVersion: UInt64
    var request: Request
    var receivedAt: ServerCore.Instant
    /// Who submitted it (``CommitRecord/author``).
    var author = ""
}

