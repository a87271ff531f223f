import TabsyncCore

extension WorkspaceStore {
    /// The workspace's apply path rebuilt from what is stored: its snapshot with the log replayed,
    /// the log tail (for resume and repeated answers), the last consumed seq per client, the
    /// refusals still answered again and the rekeys still translated. A
    /// workspace never stored comes back empty at version 0 with this store's epoch.
    ///
    /// Call it on the store thread, as any store call.
    func loadSequencer(workspaceId: String, limits: Limits) throws(StoreError) -> Sequencer {
        guard let stored = try load(workspaceId: workspaceId) else {
            return Sequencer(workspace: Workspace(id: workspaceId, epoch: epoch), limits: limits)
        }
        return stored.sequencer(limits: limits)
    }
}

extension StoredWorkspace {
    /// The apply path this stored state restores (see ``WorkspaceStore/loadSequencer(workspaceId:limits:)``).
    public func sequencer(limits: Limits) -> Sequencer {
        Sequencer(
            workspace: workspace, limits: limits, log: log, lastSeqs: lastSeqs, rejections: rejections, rekeys: rekeys)
    }
}
