import Foundation
import TabsyncCore
import TabsyncProto
import TabsyncStore

/// The admin API (docs/operating.md, "The admin API"; docs/security.md, "Operators"): who may call
/// it, what each call does to the sessions and workspaces in memory, and the admin log every node
/// reads for revocations, kicks and deletes taken by another node.
///
/// Guarantees:
/// - Only a token of role `admin` is served, and a scoped one (`ws: "team-*"`) sees and acts on
///   the workspaces it grants only; revocations need `ws: "*"`. The answer to a refused token does
///   not depend on whether a workspace exists.
/// - A revocation is durable (in the admin log) before it is answered; from then on no session of
///   a revoked token is admitted, and this node's live ones are closed 4401 in the same event.
///   Other nodes act on it at their next read of the log (``Settings/adminPollInterval``).
/// - A delete closes the workspace's sessions 4410 and refuses new ones until the store delete is
///   done; the store delete goes after every batch holding the workspace's ops, so nothing
///   committed afterwards brings the deleted history back.
extension ServerCore {
    /// Work for the store's admin side (``AdminStore``), and the request waiting for it.
    package struct AdminCall: Sendable, Equatable {
        package var request: RequestID?
        package var work: Work

        package enum Work: Sendable, Equatable {
            case append(AdminCommand)
            case readLog(after: Int64)
            case listWorkspaces(after: String?, limit: Int)
            case delete(String)
            /// Register a hook, unless the store keeps ``WebhookSpec/maxHooks`` already.
            case addWebhook(WebhookRegistration)
            case listWebhooks
            case removeWebhook(String)
            /// Enable a hook again (its pending attempts cleared, its cursors kept).
            case enableWebhook(String)
        }
    }

    /// The store's answer to an ``AdminCall``.
    package enum AdminAnswer: Sendable, Equatable {
        case appended(AdminEntry)
        case entries([AdminEntry])
        case workspaces([WorkspaceSummary])
        case deleted(Bool)
        /// The hook as stored; nil: refused, the store keeps ``WebhookSpec/maxHooks`` already.
        case webhookAdded(WebhookRegistration?)
        /// Every hook, and per hook id what its deliveries have pending (only hooks with a failed
        /// attempt pending are keys).
        case webhooks([WebhookRegistration], failing: [String: WebhookFailing])
        case webhookRemoved(Bool)
        /// The hook as it is now enabled; nil: there is no such hook.
        case webhookEnabled(WebhookRegistration?)
    }

    /// A hook's failing deliveries as the admin list shows them: the pending one that failed most
    /// often (ties: the one failing longest), and how many of its workspaces have one.
    package struct WebhookFailing: Sendable, Equatable {
        package var cursor: WebhookCursor
        package var workspaces: Int

        /// What `cursors` (one hook's) have failing; nil when no attempt of them is pending.
        package init?(_ cursors: [WebhookCursor]) {
            let failing = cursors.filter { $0.attempts > 0 }
            guard let worst = failing.min(by: {
                ($0.attempts, -($0.firstFailure?.timeIntervalSince1970 ?? 0)) > ($1.attempts, -($1.firstFailure?.timeIntervalSince1970 ?? 0))
            }) else { return nil }
            (cursor, workspaces) = (worst, failing.count)
        }
    }

    /// The id the admin API gives a session: this node's name and the connection's number.
    func adminSessionId(_ id: ConnectionID) -> String { "\(settings.nodeName).\(id)" }

    // MARK: requests

    mutating func adminRequested(_ requestId: RequestID, _ request: AdminRequest, bearerToken: String?) {
        guard settings.accessControl else {
            return emit(.respond(requestId, AdminJSON.error(
                403, "the admin API needs access control: start the server with --auth-key-file (docs/security.md)")))
        }
        guard let token = bearerToken else {
            return emit(.respond(requestId, AdminJSON.error(401, "unauthorized: \(AuthError.missingToken)")))
        }
        admin.authorizing[requestId] = request
        emit(.verifyToken(.admin(requestId), token))
    }

    mutating func adminAuthorized(_ requestId: RequestID, _ result: Result<AccessGrant, AuthError>) {
        guard let request = admin.authorizing.removeValue(forKey: requestId) else { return }  // the client left
        let grant: AccessGrant
        switch result {
        case .failure(let error):
            logger.info("admin request unauthorized", metadata: ["reason": "\(error)"])
            return emit(.respond(requestId, AdminJSON.error(401, "unauthorized: \(error)")))
        case .success(let granted):
            grant = granted
        }
        if grant.isExpired(at: wallNow) {
            return emit(.respond(requestId, AdminJSON.error(401, "unauthorized: \(AuthError.expired)")))
        }
        if admin.revocations.revokes(grant) {
            return emit(.respond(requestId, AdminJSON.error(401, "unauthorized: \(AuthError.revoked)")))
        }
        guard grant.role == .admin else {
            return emit(.respond(requestId, AdminJSON.error(
                403, "forbidden: the admin API needs a token of role admin; this one is \(grant.role.rawValue)")))
        }
        if let workspace = request.workspace, !grant.admits(workspace) {
            return emit(.respond(requestId, AdminJSON.error(
                403, "forbidden: this admin token does not grant workspace \(workspace)")))
        }
        let everyWorkspace = grant.workspaces.text == "*"
        logger.notice("admin request", metadata: ["sub": "\(grant.subject)", "request": "\(request)"])
        switch request {
        case .listWorkspaces(let after, let limit):
            admin.listing[requestId] = grant.workspaces
            emit(.admin(AdminCall(request: requestId, work: .listWorkspaces(after: after, limit: limit))))
        case .listSessions(let workspace):
            emit(.respond(requestId, AdminJSON.response(["workspace": workspace, "node": settings.nodeName,
                                                           "sessions": sessionList(workspace)])))
        case .deleteWorkspace(let workspace):
            startDelete(workspace, answering: requestId)
        case .kick(.session(let sessionId)):
            // Durable first, as a revocation: nothing is closed until the log holds the kick.
            if kickable(sessionId, within: grant.workspaces) == nil
                && (sessionId.hasPrefix(settings.nodeName + ".") || !settings.sharedStore) {
                return emit(.respond(requestId, AdminJSON.error(404, "no session \(sessionId) in a workspace this token grants")))
            }
            admin.kicking[requestId] = grant.workspaces
            emit(.admin(AdminCall(request: requestId, work: .append(.kickSession(id: sessionId)))))
        case .kick(.subject(let sub)):
            admin.kicking[requestId] = grant.workspaces
            emit(.admin(AdminCall(request: requestId, work: .append(.kickSubject(sub: sub, workspaces: grant.workspaces.text)))))
        case .revoke(let command):
            guard everyWorkspace else {
                return emit(.respond(requestId, AdminJSON.error(
                    403, #"forbidden: revocations need an admin token for every workspace (ws: "*")"#)))
            }
            emit(.admin(AdminCall(request: requestId, work: .append(command))))
        case .listRevocations:
            guard everyWorkspace else {
                return emit(.respond(requestId, AdminJSON.error(
                    403, #"forbidden: revocations need an admin token for every workspace (ws: "*")"#)))
            }
            emit(.respond(requestId, AdminJSON.response(["revocations": admin.revocations.entries.map(AdminJSON.command)])))
        case .addWebhook, .listWebhooks, .removeWebhook, .enableWebhook:
            // A hook may follow workspaces beyond any scoped grant, and lists show every hook.
            guard everyWorkspace else {
                return emit(.respond(requestId, AdminJSON.error(
                    403, #"forbidden: webhooks need an admin token for every workspace (ws: "*")"#)))
            }
            emit(.admin(AdminCall(request: requestId, work: webhookWork(request))))
        }
    }

    /// The store work of a webhook request; a new hook's id comes from the core's random source.
    private mutating func webhookWork(_ request: AdminRequest) -> AdminCall.Work {
        switch request {
        case .addWebhook(let spec):
            let id = "wh_" + [jitter.next(), jitter.next()].map { hex in
                let digits = String(hex, radix: 16)
                return String(repeating: "0", count: 16 - digits.count) + digits
            }.joined()
            return .addWebhook(spec.registration(id: id, at: wallNow))
        case .removeWebhook(let id): return .removeWebhook(id)
        case .enableWebhook(let id): return .enableWebhook(id)
        default: return .listWebhooks
        }
    }

    /// The sessions of a workspace on this node, as the admin API lists them.
    private func sessionList(_ workspace: String) -> [[String: Any]] {
        sessions.values.sorted { $0.id < $1.id }.compactMap { session -> [String: Any]? in
            guard let hello = session.hello, hello.workspaceId == workspace, session.closing == nil else { return nil }
            var entry: [String: Any] = [
                "id": adminSessionId(session.id), "name": hello.clientName, "clientId": hello.clientId,
                "since": RFC3339.format(wallTime(session.openedAt).timeIntervalSince1970), "protocol": session.format.subprotocol,
                "joined": { if case .joined = session.phase { return true } else { return false } }(),
            ]
            if let access = session.access { entry["sub"] = access.subject }
            return entry
        }
    }

    /// The wall-clock time at `instant`.
    func wallTime(_ instant: Instant) -> Date { wallNow.addingTimeInterval((instant - now).seconds) }

    // MARK: store answers

    mutating func adminAnswered(_ call: AdminCall, _ result: Result<AdminAnswer, StoreError>) {
        switch (call.work, result) {
        case (.readLog, .success(.entries(let entries))):
            admin.reading = false
            for entry in entries where entry.number > admin.cursor {
                if !admin.actedOn.contains(entry.number) { act(on: entry, here: false) }
                admin.cursor = entry.number
            }
            admin.actedOn = admin.actedOn.filter { $0 > admin.cursor }
        case (.readLog, .failure(let error)):
            admin.reading = false
            logger.warning("could not read the admin log", metadata: ["error": "\(error)"])
        case (.append, .success(.appended(let entry))):
            // Skipped when a read of the log brings it back; a single node never reads its log, so
            // there it only moves the cursor (nothing to remember).
            if settings.sharedStore { admin.actedOn.insert(entry.number) } else { admin.cursor = max(admin.cursor, entry.number) }
            let granted = call.request.flatMap { admin.kicking.removeValue(forKey: $0) }
            let closed = act(on: entry, here: true, granted: granted)
            if let requestId = call.request {
                var body = AdminJSON.command(entry)
                body["closedHere"] = closed
                body["node"] = settings.nodeName
                emit(.respond(requestId, AdminJSON.response(entry.command.isRevocation ? 201 : 200, body)))
            }
        case (.listWorkspaces(_, let limit), .success(.workspaces(let summaries))):
            guard let requestId = call.request else { return }
            let pattern = admin.listing.removeValue(forKey: requestId)
            let listed = summaries.filter { pattern?.matches($0.id) ?? false }
            let body: [String: Any] = [
                "node": settings.nodeName,
                "workspaces": listed.map { summary -> [String: Any] in
                    [
                        "id": summary.id, "version": summary.version, "tabs": summary.tabs, "epoch": summary.epoch,
                        "holders": summary.holders.isEmpty && workspaces.phase(summary.id) != nil ? [settings.nodeName] : summary.holders,
                        "sessions": sessions.values.filter { $0.hello?.workspaceId == summary.id && $0.closing == nil }.count,
                    ]
                },
                "next": summaries.count >= limit ? summaries.last!.id as Any : NSNull(),
            ]
            emit(.respond(requestId, AdminJSON.response(body)))
        case (.delete(let workspace), .success(.deleted(let existed))):
            let waiting = admin.deleting.removeValue(forKey: workspace)?.requests ?? []
            logger.notice("workspace deleted", metadata: ["workspace": "\(workspace)", "existed": "\(existed)"])
            for requestId in waiting {
                emit(.respond(requestId, existed
                    ? AdminJSON.response(["deleted": workspace])
                    : AdminJSON.error(404, "no workspace \(workspace)")))
            }
            if existed && settings.sharedStore {
                emit(.admin(AdminCall(request: nil, work: .append(.deleteWorkspace(id: workspace)))))
            }
        case (.addWebhook, .success(.webhookAdded(let hook))):
            guard let requestId = call.request else { return }
            guard let hook else {
                return emit(.respond(requestId, AdminJSON.error(409, "this store keeps \(WebhookSpec.maxHooks) webhooks already")))
            }
            logger.notice("webhook registered", metadata: ["id": "\(hook.id)", "url": "\(hook.url)", "workspaces": "\(hook.workspaces)"])
            emit(.respond(requestId, AdminJSON.response(201, AdminJSON.webhook(hook))))
        case (.listWebhooks, .success(.webhooks(let hooks, let failing))):
            guard let requestId = call.request else { return }
            emit(.respond(requestId, AdminJSON.response(["webhooks": hooks.map { AdminJSON.webhook($0, failing: failing[$0.id]) }])))
        case (.removeWebhook(let id), .success(.webhookRemoved(let existed))):
            guard let requestId = call.request else { return }
            if existed { logger.notice("webhook removed", metadata: ["id": "\(id)"]) }
            emit(.respond(requestId, existed ? AdminJSON.response(["removed": id]) : AdminJSON.error(404, "no webhook \(id)")))
        case (.enableWebhook(let id), .success(.webhookEnabled(let hook))):
            guard let requestId = call.request else { return }
            guard let hook else { return emit(.respond(requestId, AdminJSON.error(404, "no webhook \(id)"))) }
            logger.notice("webhook enabled", metadata: ["id": "\(id)"])
            emit(.respond(requestId, AdminJSON.response(AdminJSON.webhook(hook))))
        case (.delete(let workspace), .failure(let error)):
            let waiting = admin.deleting.removeValue(forKey: workspace)?.requests ?? []
            logger.warning("could not delete a workspace", metadata: ["workspace": "\(workspace)", "error": "\(error)"])
            for requestId in waiting { emit(.respond(requestId, AdminJSON.error(503, "store unavailable: \(error)"))) }
        case (_, .failure(let error)):
            if let requestId = call.request {
                admin.listing[requestId] = nil
                admin.kicking[requestId] = nil
                emit(.respond(requestId, AdminJSON.error(503, "store unavailable: \(error)")))
            }
        default:
            if let requestId = call.request { emit(.respond(requestId, AdminJSON.error(500, "unexpected store answer"))) }
        }
    }

    /// Acts on one entry of the admin log; returns how many sessions it closed on this node. An
    /// entry this node appended (`here`) is acted on once it is durable, within the workspaces the
    /// requesting token grants (`granted`).
    @discardableResult
    private mutating func act(on entry: AdminEntry, here: Bool, granted: WorkspacePattern? = nil) -> Int {
        switch entry.command {
        case .revokeToken, .revokeSubject:
            admin.revocations.add(entry)
            var closed = 0
            for (id, session) in sessions.sorted(by: { $0.key < $1.key }) where session.closing == nil {
                guard let access = session.access, admin.revocations.revokes(access) else { continue }
                unauthorized(id, .revoked)
                closed += 1
            }
            if closed > 0 { logger.notice("sessions of a revoked token closed", metadata: ["sessions": "\(closed)"]) }
            let revocations = admin.revocations
            endFeeds { grant, _ in revocations.revokes(grant) }
            return closed
        case .kickSession(let sessionId):
            return kickSession(sessionId, within: here ? granted : nil)
        case .kickSubject(let sub, let pattern):
            // Here: every session of the sub now (the request came before any of them could be
            // opened after it); elsewhere: those opened before the entry's time.
            return kickSubject(sub, within: WorkspacePattern(pattern), before: here ? nil : entry.at)
        case .deleteWorkspace(let workspace):
            guard !here else { return 0 }
            let closed = closeSessions(of: workspace)
            if workspaces.phase(workspace) != nil, admin.deleting[workspace] == nil {
                admin.deleting[workspace] = DeleteState(requests: [], deletesStore: false)
                advanceDeletes()
            }
            return closed
        }
    }

    /// Closes the session with this admin id, when it is this node's and in a workspace `pattern`
    /// grants (nil: any); returns 1 when it did.
    private mutating func kickSession(_ sessionId: String, within pattern: WorkspacePattern?) -> Int {
        guard let id = kickable(sessionId, within: pattern) else { return 0 }
        logger.notice("session kicked", metadata: ["session": "\(sessionId)"])
        close(id, .kicked)
        return 1
    }

    /// The connection of the session with this admin id, when it is this node's, open, and in a
    /// workspace `pattern` grants (nil: any).
    private func kickable(_ sessionId: String, within pattern: WorkspacePattern?) -> ConnectionID? {
        let prefix = settings.nodeName + "."
        guard sessionId.hasPrefix(prefix), let id = ConnectionID(sessionId.dropFirst(prefix.count)),
              let session = sessions[id], session.closing == nil, let workspace = session.workspaceId,
              pattern?.matches(workspace) ?? true else { return nil }
        return id
    }

    /// Closes every session of `sub` in a workspace `pattern` grants (nil: none) that opened before
    /// `before` (nil: all); returns how many.
    private mutating func kickSubject(_ sub: String, within pattern: WorkspacePattern?, before: Date?) -> Int {
        guard let pattern else { return 0 }
        var closed = 0
        for (id, session) in sessions.sorted(by: { $0.key < $1.key }) where session.closing == nil {
            guard session.access?.subject == sub, let workspace = session.workspaceId, pattern.matches(workspace) else { continue }
            if let before, wallTime(session.openedAt) >= before { continue }  // opened after the kick
            close(id, .kicked)
            closed += 1
        }
        if closed > 0 { logger.notice("sessions kicked", metadata: ["sub": "\(sub)", "sessions": "\(closed)"]) }
        endFeeds { grant, workspace in grant.subject == sub && pattern.matches(workspace) }
        return closed
    }

    // MARK: deletes

    /// A workspace being deleted: the requests waiting, and whether this node deletes it in the
    /// store (false: another node did; this one only forgets it).
    struct DeleteState {
        var requests: [RequestID]
        var deletesStore: Bool
        /// The store delete was sent; the entry goes when it is answered.
        var pendingStore = false
    }

    private mutating func startDelete(_ workspace: String, answering requestId: RequestID) {
        if admin.deleting[workspace] != nil {
            admin.deleting[workspace]!.requests.append(requestId)
            admin.deleting[workspace]!.deletesStore = true
        } else {
            admin.deleting[workspace] = DeleteState(requests: [requestId], deletesStore: true)
        }
        let closed = closeSessions(of: workspace)
        logger.notice("deleting a workspace", metadata: ["workspace": "\(workspace)", "sessions_closed": "\(closed)"])
        advanceDeletes()
    }

    /// Closes every session of a workspace 4410 and takes it out of the workspace now.
    private mutating func closeSessions(of workspace: String) -> Int {
        endFeeds(of: workspace)
        var closed = 0
        for (id, session) in sessions.sorted(by: { $0.key < $1.key }) where session.closing == nil && session.workspaceId == workspace {
            close(id, .workspaceDeleted)
            sessionLeft(session)
            closed += 1
        }
        return closed
    }

    /// True while a workspace is being deleted: its Hellos are refused.
    func isBeingDeleted(_ workspace: String) -> Bool { admin.deleting[workspace] != nil }

    /// The deletes whose workspace has drained (no session, nothing in the commit pipeline, not
    /// loading): it leaves memory, then the store delete goes (after every batch before it, on the
    /// store executor). Called at each timeout (every 50 ms while one drains: ``ServerCore/deleteDrainPause``) and when a delete starts.
    mutating func advanceDeletes() {
        for (workspace, state) in admin.deleting.sorted(by: { $0.key < $1.key }) where !state.pendingStore {
            if workspaces.phase(workspace) != nil {
                guard workspaces.hasNoSession(workspace), !commits.isBusy(workspace) else { continue }
                drop(workspace)
            }
            if state.deletesStore {
                admin.deleting[workspace]!.pendingStore = true
                emit(.admin(AdminCall(request: nil, work: .delete(workspace))))
            } else {
                admin.deleting[workspace] = nil
                for requestId in state.requests { emit(.respond(requestId, AdminJSON.response(["deleted": workspace]))) }
            }
        }
    }

    // MARK: the log

    /// With a shared store, every ``Settings/adminPollInterval``: read the entries other nodes
    /// appended since this node's last read.
    mutating func readAdminLogIfDue() {
        guard settings.sharedStore, !admin.reading else { return }
        if let next = admin.nextRead, now < next { return }
        admin.nextRead = now + settings.adminPollInterval
        admin.reading = true
        emit(.admin(AdminCall(request: nil, work: .readLog(after: admin.cursor))))
    }

    /// Takes in the admin log as read when the server started: revocations in force; the rest is
    /// history (kicks and deletes acted on before this process ran).
    mutating func adoptAdminLog(_ entries: [AdminEntry]) {
        for entry in entries {
            admin.revocations.add(entry)
            admin.cursor = max(admin.cursor, entry.number)
        }
    }
}
