import Dispatch
import TabsyncCore
import TabsyncStore

/// Group commit: what the loop has applied in memory but not yet acknowledged, batched for the
/// store thread. Event loop thread only.
///
/// At most one batch is in flight. Everything consumed while it commits is collected into the next
/// one, so a slow disk makes batches bigger instead of making the loop wait. Effects (messages to
/// sessions) are released in order, only once every record before them is durable.
struct CommitPipeline {
    /// The store thread: one serial queue, so store calls never overlap.
    static let storeQueue = DispatchQueue(label: "tabsync.store")

    /// A message to release once durable.
    enum Effect {
        /// `Applied` for each op to every session of the workspace.
        case broadcast(workspaceId: String, submitter: Int, ops: [AppliedOp], receivedAt: ContinuousClock.Instant)
        /// `Rejected` to the submitter only.
        case reject(workspaceId: String, session: Int, seq: UInt64, error: OpError)
        /// A repeated answer to a resubmitted seq, to the submitter only.
        case answer(workspaceId: String, session: Int, answer: Sequencer.Answer)

        var workspaceId: String {
            switch self {
            case .broadcast(let id, _, _, _), .reject(let id, _, _, _), .answer(let id, _, _): id
            }
        }
    }

    struct InFlight {
        var id: UInt64
        var recordCount: Int
        var effects: [Effect]
        /// Each touched workspace's sequencer as of the end of this batch (its durable state once
        /// the commit succeeds).
        var sequencers: [String: Sequencer]
    }

    var pendingRecords: [CommitRecord] = []
    var pendingEffects: [Effect] = []
    var pendingWorkspaces: Set<String> = []
    var inFlight: InFlight?
    private var nextId: UInt64 = 1

    /// Nothing pending and nothing being stored.
    var isIdle: Bool { inFlight == nil && pendingRecords.isEmpty && pendingEffects.isEmpty }

    mutating func makeBatchId() -> UInt64 {
        defer { nextId += 1 }
        return nextId
    }

    /// True when `workspaceId` has records pending or in flight.
    func isBusy(_ workspaceId: String) -> Bool {
        pendingWorkspaces.contains(workspaceId) || (inFlight?.sequencers[workspaceId] != nil)
    }
}
