import Foundation
import SwiftProtobuf
import TabsyncCore
import TabsyncProto
import TabsyncStore

/// `GET /v1/workspaces/{id}`: the durable snapshot as JSON (404 when the workspace has no op), read
/// from the store when not in memory. With access control on, `Authorization: Bearer TOKEN` for
/// that workspace, else 401, the same answer whether or not the workspace exists or the id is valid.
extension ServerCore {
    /// `GET /healthz`: `200 ok` while the server runs (a store outage does not change it), `503
    /// draining` from the moment a graceful stop begins, so that a proxy's health check takes the
    /// node out of rotation before its sessions are closed 1001 (docs/design.md, "HTTP endpoints").
    package var health: HTTPResponse { isDraining ? .draining : .healthy }

    mutating func snapshotRequested(_ requestId: RequestID, workspaceId id: String, bearerToken: String?) {
        if settings.accessControl {
            guard let token = bearerToken else { return emit(.respond(requestId, .unauthorized)) }
            pendingHTTP[requestId] = PendingHTTP(workspaceId: id, authorizing: true)
            emit(.verifyToken(.http(requestId), token))
            return
        }
        guard Validation.isValidWorkspaceId(id) else { return emit(.respond(requestId, .notFound)) }
        snapshotOrLoad(requestId, id)
    }

    /// Answers at once when the workspace is in memory, else once its load finishes.
    private mutating func snapshotOrLoad(_ requestId: RequestID, _ id: String) {
        if let response = snapshotResponse(id) { return emit(.respond(requestId, response)) }
        pendingHTTP[requestId] = PendingHTTP(workspaceId: id, authorizing: false)
        requestLoad(id)
    }

    mutating func snapshotRequestAuthorized(_ requestId: RequestID, _ result: Result<AccessGrant, AuthError>) {
        guard let pending = pendingHTTP[requestId], pending.authorizing else { return }  // the client left
        pendingHTTP[requestId] = nil
        let id = pending.workspaceId
        switch result {
        case .success(let grant) where grant.admits(id) && !grant.isExpired(at: wallNow) && !admin.revocations.revokes(grant):
            guard Validation.isValidWorkspaceId(id) else { return emit(.respond(requestId, .notFound)) }
            if let history = pending.history { return readHistory(history, of: id, for: .http(requestId)) }
            if let feed = pending.feed { return startFeed(requestId, id, feed, grant: grant) }
            if let write = pending.write { return startWrite(requestId, id, write, grant: grant) }
            snapshotOrLoad(requestId, id)
        case .success:
            logger.info("http unauthorized", metadata: ["reason": "\(AuthError.wrongWorkspace)"])
            emit(.respond(requestId, .unauthorized))
        case .failure(let error):
            logger.info("http unauthorized", metadata: ["reason": "\(error)"])
            emit(.respond(requestId, .unauthorized))
        }
    }

    /// The snapshot answer for a workspace in memory (404 when it has no applied op), nil when not.
    func snapshotResponse(_ id: String) -> HTTPResponse? {
        guard let hub = workspaces.hub(id) else { return nil }
        let workspace = hub.durable
        guard workspace.version > 0 else { return .notFound }
        return Self.protobufJSON(Tabsync_V1_Snapshot(workspace))
    }

    /// Answers the requests that waited for `id` to load, in request order.
    mutating func answerPendingHTTP(for id: String, failed: Bool) {
        for (requestId, pending) in pendingHTTP.sorted(by: { $0.key < $1.key })
        where pending.workspaceId == id && !pending.authorizing {
            pendingHTTP[requestId] = nil
            if let feed = pending.feed, !failed, workspaces.hub(id) != nil {
                startFeed(requestId, id, feed, grant: pending.grant)
                continue
            }
            if let write = pending.write {
                writeLoaded(requestId, id, write, grant: pending.grant, failed: failed)
                continue
            }
            emit(.respond(requestId, failed ? .storeUnavailable : (snapshotResponse(id) ?? .notFound)))
        }
    }

    // MARK: history

    /// `GET /v1/workspaces/{id}/history?before=V&limit=N` (docs/design.md, "History"): the stored
    /// ops before version V (default: from the newest), newest first, N of them (default 50, at
    /// most 1,000), each with its time, author and a one-line summary. `GET /v1/workspaces/{id}/closed?limit=N`:
    /// the tabs closed recently and not back (default 20, at most 100). `GET /v1/workspaces/{id}?version=V`
    /// or `?at=RFC3339`: the state then, as a snapshot. Read from the store, so they show only what is
    /// durable; the same tokens as the snapshot.
    mutating func historyRequested(
        _ requestId: RequestID, workspaceId id: String, resource: HistoryResource, query: String, bearerToken: String?
    ) {
        let read: HistoryRead
        switch HistoryQuery.read(resource, query: query) {
        case .success(let r): read = r
        case .failure(let problem): return emit(.respond(requestId, HTTPResponse(status: 400, body: problem.message + "\n")))
        }
        if settings.accessControl {
            guard let token = bearerToken else { return emit(.respond(requestId, .unauthorized)) }
            pendingHTTP[requestId] = PendingHTTP(workspaceId: id, authorizing: true, history: read)
            emit(.verifyToken(.http(requestId), token))
            return
        }
        guard Validation.isValidWorkspaceId(id) else { return emit(.respond(requestId, .notFound)) }
        readHistory(read, of: id, for: .http(requestId))
    }
}
