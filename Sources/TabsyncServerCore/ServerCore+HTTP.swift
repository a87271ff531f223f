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
            if let history = pending.history {
                return emit(.admin(AdminCall(request: requestId, work: .history(workspace: id, before: history.before, limit: history.limit))))
            }
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
        do {
            let json: [UInt8] = try Tabsync_V1_Snapshot(workspace).jsonUTF8Bytes()
            return HTTPResponse(status: 200, contentType: "application/json", bytes: json + [0x0A])
        } catch {
            return HTTPResponse(status: 500, body: "cannot encode snapshot\n")
        }
    }

    /// Answers the requests that waited for `id` to load, in request order.
    mutating func answerPendingHTTP(for id: String, failed: Bool) {
        for (requestId, pending) in pendingHTTP.sorted(by: { $0.key < $1.key })
        where pending.workspaceId == id && !pending.authorizing {
            pendingHTTP[requestId] = nil
            emit(.respond(requestId, failed ? .storeUnavailable : (snapshotResponse(id) ?? .notFound)))
        }
    }

    // MARK: history

    /// `GET /v1/workspaces/{id}/history?before=V&limit=N` (docs/design.md, "History"): the
    /// stored ops before version V (default: from the newest), newest first, N of them (default 50,
    /// at most 1,000), each with its time, author and a one-line summary. Read from the store, so
    /// it shows only what is durable; the same tokens as the snapshot.
    mutating func historyRequested(_ requestId: RequestID, workspaceId id: String, query: String, bearerToken: String?) {
        var before: UInt64?
        var limit = 50
        for pair in query.split(separator: "&") {
            let kv = pair.split(separator: "=", maxSplits: 1).map(String.init)
            guard kv.count == 2 else { continue }
            switch kv[0] {
            case "before":
                guard let value = UInt64(kv[1]), value > 0 else {
                    return emit(.respond(requestId, HTTPResponse(status: 400, body: "before must be a version of 1 or more\n")))
                }
                before = value
            case "limit":
                guard let value = Int(kv[1]), (1...1_000).contains(value) else {
                    return emit(.respond(requestId, HTTPResponse(status: 400, body: "limit must be a whole number from 1 to 1000\n")))
                }
                limit = value
            default:
                break
            }
        }
        if settings.accessControl {
            guard let token = bearerToken else { return emit(.respond(requestId, .unauthorized)) }
            pendingHTTP[requestId] = PendingHTTP(workspaceId: id, authorizing: true, history: (before, limit))
            emit(.verifyToken(.http(requestId), token))
            return
        }
        guard Validation.isValidWorkspaceId(id) else { return emit(.respond(requestId, .notFound)) }
        emit(.admin(AdminCall(request: requestId, work: .history(workspace: id, before: before, limit: limit))))
    }

    /// The history answer: `{"workspace", "ops": [{version, at, author, clientId, seq, summary, op}], "next"}`
    /// (`next`: the `before` of the next page, null at the oldest stored op).
    func historyResponse(_ workspace: String, _ entries: [HistoryEntry]) -> HTTPResponse {
        let ops = entries.map { entry -> [String: Any] in
            var object: [String: Any] = [
                "version": entry.op.version, "author": entry.author, "clientId": entry.op.clientId, "seq": entry.op.seq,
                "summary": entry.op.op.summary,
                "at": entry.committedAt.map { AdminRequest.formatTime($0) as Any } ?? NSNull(),
            ]
            if let bytes: [UInt8] = try? Tabsync_V1_Op(entry.op.op).jsonUTF8Bytes(),
               let op = try? JSONSerialization.jsonObject(with: Data(bytes)) {
                object["op"] = op
            }
            return object
        }
        let oldest = entries.last?.op.version ?? 0
        return AdminJSON.response(["workspace": workspace, "ops": ops, "next": oldest > 1 ? oldest as Any : NSNull()])
    }
}
