import TabsyncCore
import TabsyncProto
import Testing
@testable import TabsyncServerCore

/// The workspace in the connection's URL (docs/design.md, "The protocol in brief"): the upgrade
/// path's rules (``UpgradePath``), the `Hello` checked against it, and `/healthz` while draining
/// (docs/design.md, "HTTP endpoints"), without sockets.
struct WorkspacePathRuleTests {
    // MARK: the path

    @Test func theRootAndAWorkspacePathAreUpgradePaths() throws {
        #expect(try UpgradePath.parse("/") == .root)
        #expect(try UpgradePath.parse("/v1/workspaces/team/ws") == .workspace("team"))
        #expect(try UpgradePath.parse("/v1/workspaces/A.b_c-9/ws") == .workspace("A.b_c-9"))
        let longest = String(repeating: "x", count: 64)
        #expect(try UpgradePath.parse("/v1/workspaces/\(longest)/ws") == .workspace(longest))
        #expect(UpgradePath.root.workspaceId == nil)
        #expect(UpgradePath.workspace("team").workspaceId == "team")
    }

    @Test(arguments: ["/ws", "/v1/workspaces/team", "/v1/workspaces/team/ws/", "/v1/workspaces/a/b/ws", "/v1/workspaces/ws", "/v2/workspaces/team/ws", "", "/index.html"])
    func anyOtherPathIsNotFound(_ path: String) {
        #expect(throws: UpgradePathError.notFound) { try UpgradePath.parse(path) }
        #expect(UpgradePathError.notFound.status == 404)
    }

    /// The path comes percent-decoded from libwebsockets: what is left must pass the id rule as it
    /// is (a `%` that was `%25` stays a `%`, refused; nothing is decoded twice).
    @Test(arguments: ["", "has space", "te%61m", "colon:id", "ünïcode", String(repeating: "x", count: 65), "tab\tid"])
    func anInvalidWorkspaceIdIsA400(_ id: String) throws {
        do {
            _ = try UpgradePath.parse("/v1/workspaces/\(id)/ws")
            Issue.record("\(id) was taken")
        } catch {
            #expect(error.status == 400)
            #expect(error.response.status == 400)
            #expect(String(decoding: error.response.body, as: UTF8.self).contains("invalid workspace id"))
        }
    }

    // MARK: the Hello

    @Test func aHelloNamingAnotherWorkspaceThanThePathIsClosed4400WithProtocolError() {
        var h = CoreHarness()
        h.handle(.connected(1, format: .proto, echo: false, workspace: "team"))
        let actions = h.send(1, .init(hello: .init(workspace: "other", clientId: "c1")))
        #expect(Said.of(actions) == [.error(to: 1, code: .protocolError), .close(1, 4400)])
        // The close names the mismatch; the Error says both names; nothing was loaded.
        #expect(actions.contains { action in
            if case .close(1, .workspaceNotInPath(path: "team", hello: "other"), _) = action { true } else { false }
        })
        #expect(actions.contains { action in
            guard case .send(1, let message) = action, case .error(let error)? = message.message else { return false }
            return error.message.contains("\"other\"") && error.message.contains("\"team\"")
        })
        #expect(CloseReason.workspaceNotInPath(path: "team", hello: "other").text
            == "PROTOCOL_ERROR: Hello workspace differs from the URL path")
        #expect(h.core.workspacesInMemory == 0)
    }

    @Test func aHelloNamingThePathsWorkspaceIsWelcomed() {
        var h = CoreHarness()
        h.handle(.connected(1, format: .proto, echo: false, workspace: "team"))
        let hello = h.send(1, .init(hello: .init(workspace: "team", clientId: "c1")))
        #expect(Said.of(hello) == [.load("team")])
        let loaded = h.handle(.loaded(workspaceId: "team", .success(nil)))
        #expect(Said.of(loaded) == [.welcome(to: 1, snapshotVersion: 0, missed: 0)])
    }

    @Test func aSessionOnTheRootPathMayNameAnyWorkspace() {
        var h = CoreHarness()
        h.handle(.connected(1, format: .proto, echo: false))
        #expect(Said.of(h.send(1, .init(hello: .init(workspace: "any", clientId: "c1")))) == [.load("any")])
    }

    /// With access control the mismatch is refused before the token is checked, so the answer is
    /// the same whatever the token (docs/design.md, "Access control").
    @Test func theMismatchIsRefusedBeforeTheTokenIsChecked() {
        var h = CoreHarness { $0.accessControl = true }
        h.handle(.connected(1, format: .proto, echo: false, workspace: "team"))
        let actions = h.send(1, .init(hello: .init(workspace: "other", clientId: "c1", token: "t")))
        #expect(!actions.contains { if case .verifyToken = $0 { true } else { false } })
        #expect(Said.of(actions) == [.error(to: 1, code: .protocolError), .close(1, 4400)])
    }

    /// An invalid Hello field is still refused as before (`INVALID_ARGUMENT`), path or not.
    @Test func anInvalidHelloOnAWorkspacePathIsStillInvalidArgument() {
        var h = CoreHarness()
        h.handle(.connected(1, format: .proto, echo: false, workspace: "team"))
        let actions = h.send(1, .init(hello: .init(workspace: "team", clientId: "bad client")))
        #expect(Said.of(actions) == [.error(to: 1, code: .invalidArgument), .close(1, 4400)])
    }

    // MARK: /healthz

    @Test func healthzIsOkWhileRunningAnd503DrainingFromTheStartOfTheStop() {
        var h = CoreHarness()
        #expect(h.core.health == HTTPResponse(status: 200, body: "ok\n"))
        h.hello(1, client: "c1")
        h.handle(.loaded(workspaceId: "w", .success(nil)))
        h.submit(1, seq: 1, CoreHarness.add("a"))  // a batch in flight keeps the stop draining
        h.handle(.shutdown)
        #expect(h.core.health == HTTPResponse(status: 503, body: "draining\n"))
        #expect(h.core.sessionCount == 1)  // from the start, before any session is closed
    }
}
