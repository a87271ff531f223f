import TabsyncCore

/// How every durable store turns its rows back into a ``StoredWorkspace``: the pieces of a load
/// that are the same whatever the SQL, so each store keeps only its queries (docs/design.md,
/// 'Durability').
extension StoredWorkspace {
    /// True when rows read for a workspace show it was never stored: no snapshot, no consumed seq
    /// and no op (``WorkspaceStore/load(workspaceId:)`` answers nil then).
    static func neverStored(snapshot: Workspace?, lastSeqs: [String: UInt64], log: [AppliedOp]) -> Bool {
        snapshot == nil && lastSeqs.isEmpty && log.isEmpty
    }

    /// The lowest version whose rekey still translates keys: the first op of the log (only the
    /// rekeys inside the log window are kept, as the sequencer keeps them). With an empty log, a
    /// version above every stored one.
    static func rekeyWindowStart(of log: [AppliedOp]) -> UInt64 {
        log.first?.version ?? UInt64(Int64.max)
    }

    /// The workspace the rows make: the snapshot (a new empty workspace when none was written yet)
    /// brought forward through the log's ops after it.
    ///
    /// Guarantees: the result is at the log's last version, or at the snapshot's when the log is
    /// empty; a log that does not replay over the snapshot, or ends at another version, is
    /// ``StoreError/readFailed(_:)`` naming `source` and the version, never a different workspace.
    static func replayed(
        snapshot: Workspace?, log: [AppliedOp], workspaceId: String, epoch: String, source: String
    ) throws(StoreError) -> Workspace {
        var state = snapshot ?? Workspace(id: workspaceId, epoch: epoch)
        for applied in log where applied.version > state.version {
            do throws(OpError) {
                try state.apply(applied: applied)
            } catch {
                throw .readFailed("\(source)op log of \(workspaceId) does not replay at version \(applied.version): \(error)")
            }
        }
        if let last = log.last, last.version != state.version {
            throw .readFailed("\(source)op log of \(workspaceId) ends at \(last.version), snapshot is at \(state.version)")
        }
        return state
    }
}
