import TabsyncCore
import TabsyncStore

/// What a node missed of one workspace in a shared store, as read by the driver's store executor.
package enum CatchUpRead: Sendable {
    /// The ops stored after `from`, in order, and the dedup state as stored at their end.
    case caughtUp(CatchUp)
    /// The log no longer holds the op right after `from` (compacted behind a snapshot), or the
    /// store went back before it: the workspace must be read whole.
    case compacted
    /// The store could not be read.
    case failed(StoreError)

    package struct CatchUp: Sendable {
        package var from: UInt64
        package var ops: [AppliedOp]
        /// The refusals since `from` and the last seqs the ops and refusals do not imply; nil: the
        /// workspace was never stored (and `ops` is empty).
        package var dedup: DedupState?

        package init(from: UInt64, ops: [AppliedOp], dedup: DedupState?) {
            self.from = from
            self.ops = ops
            self.dedup = dedup
        }
    }

    /// What a writer at `versions` missed of each of those workspaces, from one
    /// ``WorkspaceStore/changes(after:)`` answer (or its failure).
    package static func reads(
        _ changes: Result<[String: StoredChanges], StoreError>, after versions: [String: UInt64]
    ) -> [String: CatchUpRead] {
        var reads: [String: CatchUpRead] = [:]
        switch changes {
        case .success(let changes):
            for (id, version) in versions {
                switch changes[id] {
                case .changes(let ops, let dedup)?: reads[id] = .caughtUp(CatchUp(from: version, ops: ops, dedup: dedup))
                case .compacted?: reads[id] = .compacted
                case nil: reads[id] = .failed(.readFailed("the store did not answer for \(id)"))
                }
            }
        case .failure(let error):
            for id in versions.keys { reads[id] = .failed(error) }
        }
        return reads
    }
}

/// A shared store: what the core knows of other nodes' commits it has not read yet.
///
/// A commit of another node is heard of (its notification, or the poll of stored versions); a
/// notification that carries its batch is taken as it comes when it follows the workspace's
/// version here; otherwise a loaded workspace whose heard version is above its stored version is
/// read and its ops applied and broadcast in order. One read is in flight at a time and covers every
/// workspace due when it starts; those heard meanwhile wait for the next. A workspace with records
/// in the commit pipeline, or a `Welcome` waiting there, is not read now: its next batch runs into
/// `behind` and catches up there; once the pipeline lets it go, it is read if still behind.
struct CatchUpState {
    /// Per loaded workspace, the highest stored version heard of and not yet read.
    var heard: [String: UInt64] = [:]
    var readInFlight = false
    /// Catch-up reads started so far: the serial of the latest (a change feed waiting for the store
    /// waits for one started after it opened).
    var readsStarted: UInt64 = 0
    /// A poll of stored versions is out; `pollAgain`: another was asked meanwhile.
    var pollInFlight = false
    var pollAgain = false
    /// When the next poll is due (nil: not scheduled yet).
    var nextPollAt: ServerCore.Instant?
}
