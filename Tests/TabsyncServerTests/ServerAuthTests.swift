import Foundation
import JWTKit
import TabsyncCore
import TabsyncProto
@testable import TabsyncServer
import TabsyncTestServer
import TabsyncTestSupport
import Testing
import Yams

/// Access control with tokens over real sockets: what only the driver shows (signatures, keys and
/// their rotation, the `Authorization` header, every refusal reaching the peer with its code, logs
/// free of tokens) and one end-to-end run of roles and isolation. The rules themselves (refusals
/// before the workspace is looked at, expiry on the core's clock, roles, the subject in presence)
/// are AccessRuleTests, on the virtual clock.
@Suite("Access tokens", .serialized)
struct ServerAuthTests {
    static let key1 = try! AuthKey(id: "k1", secret: Array("k1-0123456789abcdef0123456789abcdef".utf8))
    static let key2 = try! AuthKey(id: "k2", secret: Array("k2-fedcba9876543210fedcba9876543210".utf8))
    /// Same id as key1, another secret: its tokens are wrongly signed for a server holding key1.
    static let forged = try! AuthKey(id: "k1", secret: Array("forged-0000000000000000000000000000".utf8))

    static func server(keys: [AuthKey] = [key1]) throws -> TestServer {
        let verifier = try TokenVerifier(keys: keys)
        return try TestServer(configure: { $0.accessTokens = verifier })
    }

    static func token(
        _ ws: String, _ role: AccessRole, sub: String = "alice", key: AuthKey = key1,
        expiresIn: TimeInterval = 3600, notBeforeIn: TimeInterval? = nil
    ) async throws -> String {
        let now = Date().timeIntervalSince1970.rounded(.down)
        return try await TokenMinter(key: key).mint(AccessClaims(
            subject: sub, workspaces: ws, role: role, expiresAt: Date(timeIntervalSince1970: now + expiresIn),
            notBefore: notBeforeIn.map { Date(timeIntervalSince1970: now + $0) }))
    }

    /// A token with any header and claims, signed with `key`'s secret by hand-built JWS (for
    /// headers the minter never makes), or unsigned (`alg: none`, empty signature).
    static func rawToken(header: String, claims: String) -> String {
        func b64(_ s: String) -> String {
            Data(s.utf8).base64EncodedString().replacingOccurrences(of: "=", with: "")
                .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        }
        return b64(header) + "." + b64(claims) + "."
    }

    /// Connects and sends a Hello with `token`.
    static func hello(_ server: TestServer, _ workspace: String, token: String, clientId: String = "c1",
                      name: String = "") throws -> TestClient {
        let client = try TestClient(port: server.port)
        try client.send(Tabsync_V1_ClientMessage(hello: Tabsync_V1_Hello(
            workspace: workspace, clientId: clientId, clientName: name, token: token)))
        return client
    }

    static func joined(_ server: TestServer, _ workspace: String, token: String, clientId: String = "c1",
                       name: String = "") throws -> (TestClient, Tabsync_V1_Welcome) {
        let client = try hello(server, workspace, token: token, clientId: clientId, name: name)
        let welcome = try client.next { if case .welcome(let w) = $0 { return w } else { return nil } }
        return (client, welcome)
    }

    /// Reads everything up to the close: the close code and the Errors before it; fails if any
    /// other message (a Welcome, a snapshot, presence) came first, unless the session had joined
    /// (`joined`: presence may come before the refusal).
    static func expectUnauthorized(_ client: TestClient, joined: Bool = false,
                                   sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
        let (code, _, before) = try client.socket.receiveClose()
        #expect(code == 4401, sourceLocation: sourceLocation)
        var messages: [String] = []
        for message in before {
            guard case .text(let text) = message else { continue }
            let decoded = try WireFormat.json.decodeServerMessage(Array(text.utf8))
            if joined, case .presence = decoded.message { continue }
            guard case .error(let error) = decoded.message else {
                Issue.record("something other than an Error before the close: \(text)", sourceLocation: sourceLocation)
                continue
            }
            #expect(error.code == .unauthorized, sourceLocation: sourceLocation)
            messages.append(error.message)
        }
        #expect(messages.count == 1, sourceLocation: sourceLocation)
        return messages.first ?? ""
    }

    /// Seeds `workspace` with t1..t3 through an admin session; returns it.
    static func seed(_ server: TestServer, _ workspace: String) async throws -> TestClient {
        let (admin, _) = try joined(server, workspace, token: try await token(workspace, .admin, sub: "root"), clientId: "seeder")
        for i in 1...3 { try admin.submit(.add(tab: .named("t\(i)"), place: .end, activate: i == 1)) }
        for _ in 1...3 { _ = try admin.nextApplied() }
        return admin
    }

    // MARK: refusals

    enum BadToken: String, CaseIterable, CustomTestStringConvertible {
        case missing, malformed, wronglySigned, expired, notYetValid, wrongWorkspace, algNone, unknownKid,
             unknownRole, missingExp
        var testDescription: String { rawValue }
    }

    static func make(_ bad: BadToken) async throws -> String {
        let exp = Int(Date().timeIntervalSince1970) + 3600
        switch bad {
        case .missing: return ""
        case .malformed: return "not-a-jwt"
        case .wronglySigned: return try await token("team", .admin, key: forged)
        case .expired: return try await token("team", .admin, expiresIn: -5)
        case .notYetValid: return try await token("team", .admin, notBeforeIn: 600)
        case .wrongWorkspace: return try await token("other", .admin)
        case .algNone:
            return rawToken(header: #"{"alg":"none","typ":"JWT"}"#,
                            claims: #"{"sub":"eve","ws":"team","role":"admin","exp":\#(exp)}"#)
        case .unknownKid: return try await token("team", .admin, key: try AuthKey(id: "k9", secret: Array(repeating: 7, count: 32)))
        case .unknownRole:
            // Signed correctly, but "owner" is no role: hand-built claims through the minter's key.
            return try await TokenMinter(key: key1).mint(AccessClaims(
                subject: "alice", workspaces: "team", role: .admin, expiresAt: Date(timeIntervalSince1970: Double(exp)))
                .with(role: "owner"))
        case .missingExp:
            let keys = JWTKeyCollection()
            await keys.add(hmac: HMACKey(from: Array("k1-0123456789abcdef0123456789abcdef".utf8)), digestAlgorithm: .sha256,
                           kid: JWKIdentifier(string: "k1"))
            return try await keys.sign(ClaimsWithoutExp(sub: .init(value: "alice"), ws: "team", role: "admin"))
        }
    }

    @Test(arguments: BadToken.allCases)
    func aBadTokenIsUnauthorized4401BeforeAnythingOfTheWorkspace(bad: BadToken) async throws {
        let server = try Self.server()
        defer { server.stop() }
        _ = try await Self.seed(server, "team")
        let client = try Self.hello(server, "team", token: try await Self.make(bad))
        _ = try Self.expectUnauthorized(client)
        #expect(try Self.httpGet(server, "/v1/workspaces/team", bearer: try await Self.token("team", .viewer)).status == 200)
    }

    @Test func theRefusalsSayWhy() async throws {
        let server = try Self.server()
        defer { server.stop() }
        var messages: [BadToken: String] = [:]
        for bad in BadToken.allCases {
            messages[bad] = try Self.expectUnauthorized(try Self.hello(server, "team", token: try await Self.make(bad)))
        }
        #expect(messages[.expired] == AuthError.expired.description)
        #expect(messages[.notYetValid] == AuthError.notYetValid.description)
        #expect(messages[.wronglySigned] == AuthError.badSignature.description)
        #expect(messages[.wrongWorkspace] == AuthError.wrongWorkspace.description)
        #expect(messages[.algNone] == AuthError.unsupportedAlgorithm.description)
        #expect(messages[.unknownKid] == AuthError.unknownKey.description)
        #expect(messages[.missing] == AuthError.missingToken.description)
        #expect(messages[.malformed] == AuthError.malformedToken.description)
    }

    // MARK: roles

    /// Every op kind, with random fields (some valid, some not), and an empty op.
    static func randomSubmit(seq: UInt64, using rng: inout some RandomNumberGenerator) -> Tabsync_V1_Submit {
        let tab = "t\(Int.random(in: 1...5, using: &rng))"
        let op: TabsyncCore.Operation
        switch Int.random(in: 0...9, using: &rng) {
        case 0: op = .add(tab: .named("n\(seq)"), place: .index(UInt32.random(in: 0...4, using: &rng)), activate: Bool.random(using: &rng))
        case 1: op = .open(tab: .named("o\(seq)"), place: .end)
        case 2: op = .move(tabId: tab, place: .index(0))
        case 3: op = .remove(tabId: tab)
        case 4: op = .activate(.tabId(tab))
        case 5: op = .update(TabUpdate(tabId: tab, title: "x\(seq)", locked: Bool.random(using: &rng)))
        case 6: op = .setEditable(Bool.random(using: &rng))
        case 7: op = .replace(tabs: [.named("r\(seq)")])
        case 8: op = .rekey(keys: [TabKey(tabId: tab, key: "a0")])
        default:
            var empty = Tabsync_V1_Submit()
            empty.seq = seq
            return empty
        }
        return Tabsync_V1_Submit(seq: seq, op: op)
    }

    @Test func aViewerCanNeverChangeTheWorkspace() async throws {
        let server = try Self.server()
        defer { server.stop() }
        let admin = try await Self.seed(server, "team")
        let adminToken = try await Self.token("team", .admin)
        let before = try Self.snapshotJSON(server, "team", bearer: adminToken)
        let (viewer, welcome) = try Self.joined(server, "team", token: try await Self.token("team", .viewer, sub: "vic"), clientId: "v1")
        #expect(welcome.snapshot.tabs.count == 3)  // a viewer receives everything
        var rng = SystemRandomNumberGenerator()
        let count: UInt64 = 60
        for seq in 1...count { try viewer.send(Tabsync_V1_ClientMessage(submit: Self.randomSubmit(seq: seq, using: &rng))) }
        for seq in 1...count {
            let rejected = try viewer.nextRejected()
            #expect(rejected.seq == seq)
            #expect(rejected.code == .notPermitted)
        }
        #expect(try Self.snapshotJSON(server, "team", bearer: adminToken) == before)
        // ...and still receives the others' ops.
        try admin.submit(.add(tab: .named("t4"), place: .end, activate: false))
        #expect(try viewer.nextApplied().version == 4)
    }

    // MARK: isolation

    @Test func aTokenForOneWorkspaceNeitherReadsNorWritesAnotherNorLearnsItExists() async throws {
        let server = try Self.server()
        defer { server.stop() }
        _ = try await Self.seed(server, "b")
        let tokenA = try await Self.token("a", .admin)
        // WebSocket: the same answer for an existing and a missing workspace.
        let existing = try Self.expectUnauthorized(try Self.hello(server, "b", token: tokenA))
        let missing = try Self.expectUnauthorized(try Self.hello(server, "nowhere", token: tokenA))
        #expect(existing == missing)
        // HTTP: the same 401 for both, and for no token; the open endpoints stay open.
        let b = try Self.httpGet(server, "/v1/workspaces/b", bearer: tokenA)
        let nowhere = try Self.httpGet(server, "/v1/workspaces/nowhere", bearer: tokenA)
        #expect(b.status == 401 && nowhere.status == 401 && b.body == nowhere.body)
        #expect(try Self.httpGet(server, "/v1/workspaces/b", bearer: nil).status == 401)
        #expect(try Self.httpGet(server, "/v1/workspaces/b", bearer: "garbage").status == 401)
        #expect(try Self.httpGet(server, "/v1/workspaces/b", bearer: try await Self.token("b", .viewer)).status == 200)
        #expect(try Self.httpGet(server, "/v1/workspaces/a", bearer: tokenA).status == 404)
        #expect(try Self.httpGet(server, "/healthz", bearer: nil).status == 200)
        #expect(try Self.httpGet(server, "/metrics", bearer: nil).status == 200)
        // B is untouched.
        let snapshot = try Self.snapshotJSON(server, "b", bearer: try await Self.token("b", .viewer))
        #expect(snapshot.contains(#""version":"3""#))
    }

    @Test func aGlobTokenOpensTheWorkspacesItMatchesOnly() async throws {
        let server = try Self.server()
        defer { server.stop() }
        let token = try await Self.token("team-*", .editor)
        _ = try Self.joined(server, "team-red", token: token)
        _ = try Self.joined(server, "team-", token: token, clientId: "c2")
        _ = try Self.expectUnauthorized(try Self.hello(server, "teamred", token: token))
        _ = try Self.expectUnauthorized(try Self.hello(server, "x-team-red", token: token))
    }

    // MARK: key rotation

    @Test func aTokenOfARetiredKeyWorksUntilTheKeyIsRemoved() async throws {
        let oldToken = try await Self.token("team", .editor, key: Self.key1)
        let newToken = try await Self.token("team", .editor, key: Self.key2)
        let both = try Self.server(keys: [Self.key2, Self.key1])
        _ = try Self.joined(both, "team", token: oldToken)
        _ = try Self.joined(both, "team", token: newToken, clientId: "c2")
        both.stop()
        let newOnly = try Self.server(keys: [Self.key2])
        defer { newOnly.stop() }
        let refusal = try Self.expectUnauthorized(try Self.hello(newOnly, "team", token: oldToken))
        #expect(refusal == AuthError.unknownKey.description)
        _ = try Self.joined(newOnly, "team", token: newToken)
    }

    @Test func aTokenWithoutKidIsTriedWithEveryKey() async throws {
        let server = try Self.server(keys: [Self.key1, Self.key2])
        defer { server.stop() }
        // Signed with key2's secret by jwt-kit directly, without a kid (as most JWT libraries do).
        let keys = JWTKeyCollection()
        await keys.add(hmac: HMACKey(from: Array("k2-fedcba9876543210fedcba9876543210".utf8)), digestAlgorithm: .sha256)
        let token = try await keys.sign(AccessClaims(
            subject: "bob", workspaces: "team", role: .viewer, expiresAt: Date().addingTimeInterval(600)))
        #expect(TokenVerifier.header(of: token)?.kid == nil)
        _ = try Self.joined(server, "team", token: token)
    }

    // MARK: logs

    @Test func noTokenOrSecretReachesTheLog() async throws {
        let verifier = try TokenVerifier(keys: [Self.key1])
        let server = try TestServer(capturingLog: .trace, configure: { $0.accessTokens = verifier })
        defer { server.stop() }
        let port = server.port
        let tokens = [
            try await Self.token("team", .admin), try await Self.token("team", .admin, expiresIn: -5),
            try await Self.token("zzz", .viewer), try await Self.token("team", .admin, key: Self.forged),
        ]
        for (i, token) in tokens.enumerated() {
            let client = try TestClient(port: port)
            try client.send(Tabsync_V1_ClientMessage(hello: Tabsync_V1_Hello(workspace: "team", clientId: "c\(i)", token: token)))
            _ = try? client.next(timeout: 2) { message -> Bool? in
                if case .welcome = message { return true }
                if case .error = message { return true }
                return nil
            }
            _ = try TabsyncServerTests.httpGet(port: port, path: "/v1/workspaces/team", bearer: token)
        }
        server.stop()  // every line written
        let log = server.logEntries.map { entry in
            "\(entry.level) \(entry.message) \(entry.metadata) \(entry.error.map { "\($0)" } ?? "")"
        }.joined(separator: "\n")
        #expect(log.contains("session unauthorized"))
        for token in tokens {
            for part in token.split(separator: ".") where part.count > 8 {
                #expect(!log.contains(part), "a token part is in the log")
            }
        }
        #expect(!log.contains("k1-0123456789abcdef"))
    }

    // MARK: keys and patterns (no sockets)

    @Test func keyFilesAreReadAsSecretsOrPublicKeys() throws {
        let scratch = TemporaryDirectory(prefix: "tabsync-keys")
        let dir = URL(fileURLWithPath: scratch.path)
        let secret = dir.appendingPathComponent("team-2026.key")
        try Data("0123456789abcdef0123456789abcdef\n".utf8).write(to: secret)
        let key = try AuthKey.load(file: secret.path)
        #expect(key.id == "team-2026")
        #expect(key.algorithm == "HS256")
        guard case .hmac(let bytes) = key.material else { Issue.record("not a secret"); return }
        #expect(bytes.count == 32)  // the trailing newline is not part of the secret
        #expect(!key.description.contains("0123"))
        let short = dir.appendingPathComponent("short")
        try Data("tooshort\n".utf8).write(to: short)
        #expect(throws: AuthKeyError.secretTooShort(id: "short", bytes: 8)) { try AuthKey.load(file: short.path) }
        #expect(throws: AuthKeyError.unreadable(path: dir.appendingPathComponent("none").path)) {
            try AuthKey.load(file: dir.appendingPathComponent("none").path)
        }
        #expect(throws: AuthKeyError.duplicateId("k1")) { try TokenVerifier(keys: [Self.key1, Self.forged]) }
    }

    @Test(arguments: [
        ("team", "team", true), ("team", "team2", false), ("team-*", "team-a", true), ("team-*", "team", false),
        ("*", "anything", true), ("a?c", "abc", true), ("a?c", "ac", false), ("*-prod", "x-prod", true),
        ("*-prod", "x-prod2", false), ("a*b*c", "a-b-b-c", true),
    ])
    func workspacePatternsMatchWholeIds(pattern: String, id: String, matches: Bool) throws {
        #expect(try #require(WorkspacePattern(pattern)).matches(id) == matches)
    }

    @Test func rolesPermitWhatTheIssueSays() {
        let ops: [TabsyncCore.Operation] = [
            .add(tab: .named("t"), place: .end, activate: false), .open(tab: .named("t"), place: .end),
            .move(tabId: "t", place: .end), .remove(tabId: "t"), .activate(.tabId("t")),
            .update(TabUpdate(tabId: "t", title: "x")), .setEditable(true), .replace(tabs: []),
            .rekey(keys: []), .restore(version: 1, state: nil), .reopen(tabId: "t"),
            .group(GroupTabs(tabIds: ["t"], groupId: "g")), .ungroup(UngroupTabs(tabIds: ["t"])),
            .updateGroup(GroupUpdate(groupId: "g", title: "x")),
        ]
        let kinds: [Tabsync_V1_Op.OneOf_Kind?] = ops.map { Tabsync_V1_Op($0).kind } + [nil]
        #expect(Set(ops.map(\.kind)) == Set(TabsyncCore.Operation.Kind.allCases))
        for kind in kinds {
            #expect(!AccessRole.viewer.permits(kind))
            #expect(AccessRole.admin.permits(kind))
            #expect(AccessRole.editor.permits(kind) == (ServerCore.opName(kind) != "setEditable"))
        }
    }

    // MARK: HTTP helpers

    static func httpGet(_ server: TestServer, _ path: String, bearer: String?) throws -> (status: Int, body: String) {
        try TabsyncServerTests.httpGet(port: server.port, path: path, bearer: bearer)
    }

    static func snapshotJSON(_ server: TestServer, _ id: String, bearer: String) throws -> String {
        let (status, body) = try httpGet(server, "/v1/workspaces/\(id)", bearer: bearer)
        #expect(status == 200)
        return body
    }
}

extension AccessClaims {
    /// The same claims with any role text (for tokens the minter would never make).
    func with(role: String) -> AccessClaims {
        var copy = self
        copy.role = role
        return copy
    }
}

/// Claims without `exp` (a token that must be refused).
struct ClaimsWithoutExp: JWTPayload {
    var sub: SubjectClaim
    var ws: String
    var role: String
    func verify(using algorithm: some JWTAlgorithm) async throws {}
}

extension ServerAuthTests {
    @Test func composeAndDockerfileRunWithAuthOnFromAMountedSecret() throws {
        let root = DeploymentFilesTests.root
        let yaml = try String(contentsOf: root.appendingPathComponent("docker-compose.yml"), encoding: .utf8)
        let compose = try #require(try Yams.load(yaml: yaml) as? [String: Any])
        let service = try #require((compose["services"] as? [String: Any])?["tabsync"] as? [String: Any])
        let environment = try #require(service["environment"] as? [String: Any])
        let keyPath = try #require(environment["TABSYNC_AUTH_KEY_FILE"] as? String)
        let mounted = try #require(service["secrets"] as? [[String: Any]])
        #expect(mounted.contains { "/run/secrets/" + ($0["target"] as? String ?? "") == keyPath })
        let declared = try #require(compose["secrets"] as? [String: Any])
        for secret in mounted {
            let source = try #require(secret["source"] as? String)
            #expect((declared[source] as? [String: Any])?["file"] != nil)
        }
        #expect(!yaml.contains("TABSYNC_AUTH_SECRET"))  // never the secret itself in the environment
        #expect(yaml.contains("tabsync-server token"))  // says how to mint the first token
        let env = try DeploymentFilesTests.dockerfile().filter { $0.0 == "ENV" }.map(\.1).joined(separator: " ")
        #expect(env.contains("TABSYNC_AUTH_KEY_FILE=\(keyPath)"))
        #expect(AuthKey.keyId(forFile: keyPath) == "tabsync-auth")
    }
}
