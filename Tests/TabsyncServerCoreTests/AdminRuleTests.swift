import Foundation
import Testing
import TabsyncCore
import TabsyncStore
@testable import TabsyncServerCore

/// The admin API's rules on the core alone (ServerCore+Admin.swift, ServerCore+Quotas.swift;
/// docs/operating.md, "The admin API"): who may call it, what revocations, kicks and deletes do to
/// sessions, the quotas. Socket tests and Tests/thirdparty/test_admin.py cover the HTTP side.
@Suite struct AdminRuleTests {
    static let later = Date(timeIntervalSince1970: 4_000_000_000)

    static func grant(_ sub: String, _ ws: String = "*", role: AccessRole = .editor, jti: String? = nil, iat: Date? = nil) -> AccessGrant {
        AccessGrant(subject: sub, workspaces: WorkspacePattern(ws)!, role: role, expiresAt: later, tokenId: jti, issuedAt: iat)
    }

    static func harness(_ configure: (inout ServerCore.Settings) -> Void = { _ in }) -> CoreHarness {
        CoreHarness {
            $0.accessControl = true
            $0.nodeName = "n1"
            configure(&$0)
        }
    }

    /// Session `id` says Hello for `workspace` with a token the verifier turns into `grant`, and
    /// joins (the workspace loads empty).
    @discardableResult
    static func join(_ h: inout CoreHarness, _ id: ConnectionID, _ grant: AccessGrant, workspace: String = "w") -> [ServerCore.Action] {
        h.handle(.connected(id, format: .proto, echo: false))
        h.send(id, .init(hello: .init(workspace: workspace, clientId: "c\(id)", token: "t")))
        var actions = h.handle(.tokenVerified(.session(id), .success(grant)))
        if actions.contains(where: { if case .load = $0 { true } else { false } }) {
            actions += h.handle(.loaded(workspaceId: workspace, .success(nil)))
        }
        return actions
    }

    /// An admin request by `grant`; returns the actions after its token check.
    static func admin(_ h: inout CoreHarness, _ request: AdminRequest, _ grant: AccessGrant, id: RequestID = 100) -> [ServerCore.Action] {
        let asked = h.handle(.adminRequested(id, request, bearerToken: "admin-token"))
        #expect(asked.contains { if case .verifyToken(.admin(id), _) = $0 { true } else { false } })
        return h.handle(.tokenVerified(.admin(id), .success(grant)))
    }

    /// The store call among the actions, answered as the store would.
    static func answer(_ h: inout CoreHarness, _ actions: [ServerCore.Action], number: Int64 = 1) -> [ServerCore.Action] {
        for case .admin(let call) in actions {
            switch call.work {
            case .append(let command):
                return h.handle(.adminAnswered(call, .success(.appended(AdminEntry(number: number, at: Date(), command: command)))))
            case .delete: return h.handle(.adminAnswered(call, .success(.deleted(true))))
            case .readLog: return h.handle(.adminAnswered(call, .success(.entries([]))))
            case .listWorkspaces: return h.handle(.adminAnswered(call, .success(.workspaces([]))))
            case .addWebhook(let hook): return h.handle(.adminAnswered(call, .success(.webhookAdded(hook))))
            case .listWebhooks: return h.handle(.adminAnswered(call, .success(.webhooks([], failing: [:]))))
            case .removeWebhook: return h.handle(.adminAnswered(call, .success(.webhookRemoved(true))))
            case .enableWebhook: return h.handle(.adminAnswered(call, .success(.webhookEnabled(nil))))
            }
        }
        Issue.record("no admin store call among \(actions)")
        return []
    }

    static func response(_ actions: [ServerCore.Action]) -> HTTPResponse? {
        for case .respond(_, let response) in actions { return response }
        return nil
    }

    static func text(_ response: HTTPResponse?) -> String { String(decoding: response?.body ?? [], as: UTF8.self) }

    static let root = grant("root", role: .admin)

    @Test func aRevokedTokenIsClosedAtOnceAndRefusedAfter() {
        var h = Self.harness()
        Self.join(&h, 1, Self.grant("alice", jti: "a1"))
        Self.join(&h, 2, Self.grant("alice", jti: "a2"))
        let asked = Self.admin(&h, .revoke(.revokeToken(jti: "a1")), Self.root)
        #expect(Said.of(asked).allSatisfy { $0 == .other }, "nothing closes before the revocation is durable")
        let acted = Self.answer(&h, asked)
        #expect(Said.of(acted).contains(.error(to: 1, code: .unauthorized)))
        #expect(Said.of(acted).contains(.close(1, 4401)))
        #expect(!Said.of(acted).contains(.close(2, 4401)), "another token of the same sub stays")
        #expect(Self.response(acted)?.status == 201)
        let again = Self.join(&h, 3, Self.grant("alice", jti: "a1"))
        #expect(Said.of(again) == [.error(to: 3, code: .unauthorized), .close(3, 4401)])
    }

    @Test func aSubjectsRevocationCutsTokensIssuedBeforeItsTime() {
        var h = Self.harness()
        let cut = Date(timeIntervalSince1970: 1_800_000_000)
        Self.join(&h, 1, Self.grant("bob", iat: cut.addingTimeInterval(-60)))
        Self.join(&h, 2, Self.grant("bob", iat: cut.addingTimeInterval(60)))
        Self.join(&h, 3, Self.grant("bob"))  // no iat: taken as issued before
        let acted = Self.answer(&h, Self.admin(&h, .revoke(.revokeSubject(sub: "bob", issuedBefore: cut)), Self.root))
        let closed = Said.of(acted).filter { if case .close = $0 { true } else { false } }
        #expect(closed == [.close(1, 4401), .close(3, 4401)])
    }

    @Test func refusedCallersGetReasonsThatDoNotDependOnTheWorkspace() {
        var h = Self.harness()
        #expect(Self.response(h.handle(.adminRequested(1, .listRevocations, bearerToken: nil)))?.status == 401)
        let editor = Self.response(Self.admin(&h, .listSessions(workspace: "w"), Self.grant("alice"), id: 2))
        #expect(editor?.status == 403)
        #expect(Self.text(editor).contains("role admin"))
        let scoped = Self.grant("ta", "team-*", role: .admin)
        for (n, request) in [AdminRequest.listSessions(workspace: "other"), .deleteWorkspace("nope")].enumerated() {
            let refused = Self.response(Self.admin(&h, request, scoped, id: 10 + n))
            #expect(refused?.status == 403, "\(request)")
        }
        let revoke = Self.response(Self.admin(&h, .revoke(.revokeToken(jti: "x")), scoped, id: 20))
        #expect(revoke?.status == 403)
        #expect(Self.text(revoke).contains(#"ws: "*""#))
        let bad = Self.response(h.handle(.adminRequested(30, .listRevocations, bearerToken: "t"))
            + h.handle(.tokenVerified(.admin(30), .failure(.badSignature))))
        #expect(bad?.status == 401)
        var open = CoreHarness()
        #expect(Self.response(open.handle(.adminRequested(1, .listRevocations, bearerToken: "t")))?.status == 403)
    }

    @Test func aScopedAdminKicksItsSubjectOnlyInItsWorkspaces() {
        var h = Self.harness()
        Self.join(&h, 1, Self.grant("bob"), workspace: "team-a")
        Self.join(&h, 2, Self.grant("bob"), workspace: "home")
        Self.join(&h, 3, Self.grant("carol"), workspace: "team-a")
        let kicked = Self.admin(&h, .kick(.subject("bob")), Self.grant("ta", "team-*", role: .admin))
        let answered = Self.answer(&h, kicked)
        #expect(Said.of(answered).contains(.close(1, 4408)))
        #expect(!Said.of(answered).contains(.close(2, 4408)))
        #expect(!Said.of(answered).contains(.close(3, 4408)))
        #expect(Self.text(Self.response(answered)).contains(#""closedHere":1"#))
    }

    /// A kick is durable before it closes anything, as a revocation: a log append that fails
    /// answers 503 with every session still open.
    @Test(arguments: [AdminRequest.kick(.subject("bob")), .kick(.session("n1.1"))])
    func aKickIsDurableBeforeItClosesAnything(_ request: AdminRequest) {
        var h = Self.harness()
        Self.join(&h, 1, Self.grant("bob"))
        let asked = Self.admin(&h, request, Self.root)
        #expect(!Said.of(asked).contains(.close(1, 4408)), "closed before the kick was in the log")
        guard case .admin(let call)? = asked.first(where: { if case .admin = $0 { true } else { false } }) else {
            Issue.record("no log append")
            return
        }
        let failed = h.handle(.adminAnswered(call, .failure(.writeFailed("disk full"))))
        #expect(Self.response(failed)?.status == 503)
        #expect(!Said.of(failed).contains(.close(1, 4408)))
        let again = Self.answer(&h, Self.admin(&h, request, Self.root, id: 101))
        #expect(Said.of(again).contains(.close(1, 4408)))
        #expect(Self.text(Self.response(again)).contains(#""closedHere":1"#))
    }

    /// A node alone never reads its admin log back, so it remembers nothing of what it appended.
    @Test func aSingleNodeKeepsNoRecordOfTheCommandsItActedOn() {
        var h = Self.harness()
        for n in 1...50 {
            let asked = Self.admin(&h, .revoke(.revokeToken(jti: "j\(n)")), Self.root, id: RequestID(n))
            #expect(Self.response(Self.answer(&h, asked, number: Int64(n)))?.status == 201)
        }
        #expect(h.core.admin.actedOn.isEmpty)
        #expect(h.core.admin.cursor == 50)
    }

    @Test func anotherNodesKickClosesOnlySessionsOpenedBeforeIt() {
        var h = Self.harness { $0.sharedStorePollInterval = .seconds(1) }
        Self.join(&h, 1, Self.grant("bob"))
        h.advance(.seconds(2))
        h.handle(.timeout)  // the core's clock moves with events
        let kickedAt = h.core.wallNow
        h.advance(.seconds(2))
        Self.join(&h, 2, Self.grant("bob"))  // reconnected after the kick
        let entry = AdminEntry(number: 7, at: kickedAt, command: .kickSubject(sub: "bob", workspaces: "*"))
        let call = ServerCore.AdminCall(request: nil, work: .readLog(after: 0))
        let acted = h.handle(.adminAnswered(call, .success(.entries([entry]))))
        #expect(Said.of(acted) == [.close(1, 4408)])
    }

    @Test func aDeleteClosesItsSessionsAndWaitsForItsCommits() {
        var h = Self.harness()
        Self.join(&h, 1, Self.grant("alice"))
        let committing = h.submit(1, seq: 1, CoreHarness.add("t1"))
        guard let batch = committing.commitId else { Issue.record("no commit"); return }
        let asked = Self.admin(&h, .deleteWorkspace("w"), Self.root)
        #expect(Said.of(asked).contains(.close(1, 4410)))
        #expect(!asked.contains { if case .admin(let call) = $0, case .delete = call.work { true } else { false } },
                "the store delete waits for the batch holding the workspace's op")
        let refused = Self.join(&h, 2, Self.grant("alice"))
        #expect(Said.of(refused) == [.error(to: 2, code: .unavailable), .close(2, 1013)])
        h.handle(.committed(batch: batch, .stored, duration: .zero))
        let ticked = h.handle(.timeout)
        #expect(ticked.contains { if case .admin(let call) = $0, case .delete("w") = call.work { true } else { false } })
        let done = Self.answer(&h, ticked)
        #expect(Self.response(done)?.status == 200)
        #expect(h.core.workspacesInMemory == 0)
    }

    @Test func quotasRefuseTheSessionOverTheLimitWithItsReason() {
        var h = Self.harness { $0.quotas = .init(maxConnectionsPerSubject: 2, maxConnectionsPerWorkspace: 3) }
        Self.join(&h, 1, Self.grant("bob"))
        Self.join(&h, 2, Self.grant("bob"))
        #expect(Said.of(Self.join(&h, 3, Self.grant("bob"))) == [.error(to: 3, code: .limitExceeded), .close(3, 4429)])
        h.handle(.disconnected(3))
        Self.join(&h, 4, Self.grant("carol"))
        #expect(Said.of(Self.join(&h, 5, Self.grant("dave"))) == [.error(to: 5, code: .limitExceeded), .close(5, 4429)])
        h.handle(.disconnected(5))
        h.handle(.disconnected(1))  // bob's first session leaves: one more of his fits again
        #expect(!Said.of(Self.join(&h, 6, Self.grant("bob"))).contains(.close(6, 4429)))
    }

    /// With only the ops quota set, a sub's bucket still goes with its last session: the table is
    /// bounded by the subs connected now, not by every sub ever seen.
    @Test func aSubjectsOpBucketGoesWithItsLastSession() {
        var h = Self.harness { $0.quotas = .init(maxOpsPerSecondPerSubject: 5) }
        for n in ConnectionID(1)...200 { Self.join(&h, n, Self.grant("user\(n % 100)")) }
        for n in ConnectionID(1)...200 {
            var actions = h.submit(n, seq: 1, CoreHarness.add("t\(n)"))
            while let batch = actions.commitId { actions = h.handle(.committed(batch: batch, .stored, duration: .zero)) }
        }
        #expect(h.core.quotas.buckets.count == 100)
        for n in ConnectionID(1)...200 { h.handle(.disconnected(n)) }
        #expect(h.core.quotas.buckets.isEmpty && h.core.quotas.connectionsBySubject.isEmpty)
    }

    @Test func aSubjectsOpRateIsSharedByItsSessions() {
        var h = Self.harness { $0.quotas = .init(maxOpsPerSecondPerSubject: 3) }
        Self.join(&h, 1, Self.grant("bob"))
        Self.join(&h, 2, Self.grant("bob"))
        var batches: [CommitBatch] = []
        var inFlight: UInt64?
        for seq in UInt64(1)...4 {
            for case .commit(let id, let batch) in h.submit(seq % 2 == 0 ? 2 : 1, seq: seq, CoreHarness.add("t\(seq)")) {
                inFlight = id
                batches.append(batch)
            }
        }
        if let id = inFlight {
            for case .commit(_, let batch) in h.handle(.committed(batch: id, .stored, duration: .zero)) { batches.append(batch) }
        }
        let outcomes = batches.flatMap(\.records).map { record -> String in
            if case .rejected(let error) = record.outcome { return "\(record.clientId)#\(record.seq) \(error.code)" }
            return "\(record.clientId)#\(record.seq) applied"
        }
        #expect(outcomes == ["c1#1 applied", "c2#2 applied", "c1#3 applied", "c2#4 rateLimited"])
    }

    @Test func theRequestParserSaysWhatIsWrong() throws {
        func refusal(_ method: String, _ path: String, _ query: String = "", _ body: String = "") -> UInt32? {
            if case .failure(let refusal) = AdminRequest.parse(method: method, path: path, query: query, body: Array(body.utf8)) {
                return refusal.response.status
            }
            return nil
        }
        #expect(refusal("GET", "/v1/admin/workspaces") == nil)
        #expect(refusal("GET", "/v1/admin/workspaces", "limit=0") == 400)
        #expect(refusal("PUT", "/v1/admin/kick") == 405)
        #expect(refusal("POST", "/v1/admin/kick", "", #"{"session":"n1.3","sub":"x"}"#) == 400)
        #expect(refusal("POST", "/v1/admin/revocations", "", #"{"sub":"x","issuedBefore":"yesterday"}"#) == 400)
        #expect(refusal("GET", "/v1/admin/nothing") == 404)
        #expect(refusal("DELETE", "/v1/admin/workspaces/bad%20id") == 400)
        #expect(try AdminRequest.parse(
            method: "POST", path: "/v1/admin/revocations", query: "",
            body: Array(#"{"sub":"bob","issuedBefore":"2026-11-27T18:00:00Z"}"#.utf8)).get()
            == .revoke(.revokeSubject(sub: "bob", issuedBefore: Date(timeIntervalSince1970: RFC3339.parse("2026-11-27T18:00:00Z")!))))
    }
}
