import Foundation
import TabsyncCore
import TabsyncProto
@testable import TabsyncServerCore
import Testing

/// Access control's rules on the core alone, on the virtual clock (ServerCore+Access.swift;
/// docs/design.md, "Access control"): nothing of a workspace before the token checks out, every
/// refusal 4401 before the workspace is looked at, a session ended at its token's `exp`, roles on
/// every Submit. Signatures, keys and the HTTP header are the driver's (ServerAuthTests, over sockets).
@Suite struct AccessRuleTests {
    static func harness() -> CoreHarness { CoreHarness { $0.accessControl = true } }

    static func grant(_ h: CoreHarness, _ ws: String = "w", role: AccessRole = .editor, expiresIn: TimeInterval = 3600) -> AccessGrant {
        AccessGrant(subject: "alice", workspaces: WorkspacePattern(ws)!, role: role, expiresAt: h.core.wallNow.addingTimeInterval(expiresIn))
    }

    /// Session `id` says Hello for `workspace`; its token checks out as `grant`; the workspace loads
    /// empty when it was not in memory. Returns the actions after the token check.
    @discardableResult
    static func join(_ h: inout CoreHarness, _ id: ConnectionID, _ grant: AccessGrant, workspace: String = "w") -> [ServerCore.Action] {
        h.handle(.connected(id, format: .proto, echo: false))
        let asked = h.send(id, .init(hello: .init(workspace: workspace, clientId: "c\(id)", token: "token-\(id)")))
        #expect(asked.contains { if case .verifyToken(.session(id), "token-\(id)") = $0 { true } else { false } })
        var actions = h.handle(.tokenVerified(.session(id), .success(grant)))
        if actions.contains(where: { if case .load = $0 { true } else { false } }) {
            actions += h.handle(.loaded(workspaceId: workspace, .success(nil)))
        }
        return actions
    }

    /// The HTTP answers among the actions: request id and status.
    static func responded(_ actions: [ServerCore.Action]) -> [RequestID: UInt32] {
        var statuses: [RequestID: UInt32] = [:]
        for case .respond(let id, let response) in actions { statuses[id] = response.status }
        return statuses
    }

    static func loadsOrSends(_ actions: [ServerCore.Action]) -> Bool {
        actions.contains { if case .load = $0 { true } else if case .hold = $0 { true } else { false } }
    }

    @Test func nothingOfTheWorkspaceIsReadBeforeTheTokenChecksOut() {
        var h = Self.harness()
        h.handle(.connected(1, format: .proto, echo: false))
        let hello = h.send(1, .init(hello: .init(workspace: "w", clientId: "c1", token: "t")))
        #expect(!Self.loadsOrSends(hello) && Said.of(hello).allSatisfy { $0 == .other })
        let checked = h.handle(.tokenVerified(.session(1), .success(Self.grant(h))))
        #expect(Said.of(checked) == [.load("w")])
        #expect(Said.of(h.handle(.loaded(workspaceId: "w", .success(nil)))).contains(.welcome(to: 1, snapshotVersion: 0, missed: 0)))
    }

    @Test(arguments: [AuthError.missingToken, .badSignature, .unknownKey, .expired, .notYetValid])
    func aRefusedTokenIs4401BeforeTheWorkspaceIsLookedAt(_ error: AuthError) {
        var h = Self.harness()
        h.handle(.connected(1, format: .proto, echo: false))
        h.send(1, .init(hello: .init(workspace: "w", clientId: "c1", token: "t")))
        let refused = h.handle(.tokenVerified(.session(1), .failure(error)))
        #expect(Said.of(refused) == [.error(to: 1, code: .unauthorized), .close(1, 4401)])
        #expect(h.core.workspacesInMemory == 0)
    }

    @Test func aGrantForAnotherWorkspaceOrAlreadyPastItsExpiryIsRefused() {
        var h = Self.harness()
        let other = Self.join(&h, 1, Self.grant(h, "team-*"), workspace: "w")
        #expect(Said.of(other) == [.error(to: 1, code: .unauthorized), .close(1, 4401)])
        let past = Self.join(&h, 2, Self.grant(h, expiresIn: -1))
        #expect(Said.of(past) == [.error(to: 2, code: .unauthorized), .close(2, 4401)])
        #expect(h.core.workspacesInMemory == 0)
        // A glob opens what it matches.
        let matching = Self.join(&h, 3, Self.grant(h, "team-*"), workspace: "team-red")
        #expect(Said.of(matching).contains(.welcome(to: 3, snapshotVersion: 0, missed: 0)))
    }

    @Test func aSessionEnds4401AtItsTokensExpiryOnTheCoresClock() {
        var h = Self.harness()
        Self.join(&h, 1, Self.grant(h, expiresIn: 3))
        h.handle(.timeout)  // the first presence list
        #expect(h.core.nextDeadline == h.now + .milliseconds(3_001))
        h.advance(.milliseconds(2_900))
        #expect(Said.of(h.handle(.timeout)).isEmpty)  // early: nothing
        h.advance(.milliseconds(101))
        #expect(Said.of(h.handle(.timeout)) == [.error(to: 1, code: .unauthorized), .close(1, 4401)])
    }

    @Test func aSubmitAfterExpiryEndsTheSessionEvenBeforeItsDeadline() {
        var h = Self.harness()
        Self.join(&h, 1, Self.grant(h, expiresIn: 1))
        h.advance(.seconds(1))  // no timeout yet: the Submit finds the token expired
        let late = h.submit(1, seq: 1, CoreHarness.add("a"))
        #expect(Said.of(late) == [.error(to: 1, code: .unauthorized), .close(1, 4401)])
        #expect(late.commitId == nil)
    }

    @Test func aViewerIsRefusedEveryOpAndStaysAndAnEditorEverythingButSetEditable() {
        var h = Self.harness()
        Self.join(&h, 1, Self.grant(h, role: .viewer))
        Self.join(&h, 2, Self.grant(h, role: .editor))
        Self.join(&h, 3, Self.grant(h, role: .admin))
        let ops: [TabsyncCore.Operation] = [
            CoreHarness.add("v"), .remove(tabId: "x"), .setEditable(false), .activate(.index(0)),
        ]
        for (n, op) in ops.enumerated() {
            let refused = h.submit(1, seq: UInt64(n + 1), op)
            #expect(Said.of(refused) == [.rejected(to: 1, seq: UInt64(n + 1), code: .notPermitted)])
            #expect(refused.commitId == nil)  // nothing sequenced or stored
        }
        let added = h.submit(2, seq: 1, CoreHarness.add("e"))
        #expect(added.commitId != nil)
        h.handle(.committed(batch: added.commitId ?? 0, .stored, duration: .zero))
        #expect(Said.of(h.submit(2, seq: 2, .setEditable(false))) == [.rejected(to: 2, seq: 2, code: .notPermitted)])
        let locked = h.submit(3, seq: 1, .setEditable(false))
        #expect(locked.commitId != nil)
        #expect(h.core.sessionCount == 3)  // refusals close nothing
    }

    /// A viewer flooding ops it may not make is closed 1008 like any flood, after the refusal
    /// that tipped it (before, the strike was counted and its verdict dropped: it was never closed).
    @Test func aViewerFloodingRefusedOpsIsClosed1008AfterItsLastRefusal() {
        var h = CoreHarness { $0.accessControl = true; $0.limits.maxOpsPerSecond = 2; $0.rateLimitStrikes = 3 }
        Self.join(&h, 1, Self.grant(h, role: .viewer))
        var said: [Said] = []
        var seq: UInt64 = 0
        for _ in 0..<4 {
            for _ in 0..<5 {
                seq += 1
                said += Said.of(h.submit(1, seq: seq, CoreHarness.add("t\(seq)")))
            }
            h.advance(.seconds(1))
        }
        let closes = said.filter { if case .close = $0 { true } else { false } }
        #expect(closes == [.close(1, 1008)], "\(closes)")
        guard let at = said.firstIndex(of: .close(1, 1008)) else { return }
        #expect(at > 0 && said[at - 1] == .rejected(to: 1, seq: UInt64(at), code: .notPermitted), "\(said)")
    }

    @Test func presenceNamesTheTokensSubjectNotTheChosenName() {
        var h = Self.harness()
        h.handle(.connected(1, format: .proto, echo: false))
        h.send(1, .init(hello: .init(workspace: "w", clientId: "c1", clientName: "Mallory", token: "t")))
        h.handle(.tokenVerified(.session(1), .success(Self.grant(h))))
        h.handle(.loaded(workspaceId: "w", .success(nil)))
        #expect(h.core.sessions[1]?.hello?.clientName == "alice")
    }

    @Test func aSnapshotNeedsABearerTokenForItsWorkspaceWhetherOrNotItExists() {
        var h = Self.harness()
        #expect(Self.responded(h.handle(.snapshotRequested(10, workspaceId: "w", bearerToken: nil))) == [10: 401])
        let asked = h.handle(.snapshotRequested(11, workspaceId: "nope", bearerToken: "t"))
        #expect(asked.contains { if case .verifyToken(.http(11), "t") = $0 { true } else { false } })
        let refused = h.handle(.tokenVerified(.http(11), .success(Self.grant(h, "w"))))
        #expect(Self.responded(refused) == [11: 401])  // the same answer: nothing learnt of "nope"
        h.handle(.snapshotRequested(12, workspaceId: "w", bearerToken: "t"))
        #expect(Said.of(h.handle(.tokenVerified(.http(12), .success(Self.grant(h, "w"))))) == [.load("w")])
        #expect(Self.responded(h.handle(.loaded(workspaceId: "w", .success(nil)))) == [12: 404])  // no op yet
    }
}
