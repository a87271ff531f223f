import Testing
@testable import TabsyncClient

@Suite struct ServerURLTests {
    @Test func plainURLGetsDefaultPortAndPath() throws {
        let url = try ServerURL(parsing: "ws://example.com")
        #expect(url == ServerURL(usesTLS: false, host: "example.com", port: 80, path: "/"))
        #expect(url.description == "ws://example.com:80/")
    }

    @Test func secureURLGetsPort443() throws {
        let url = try ServerURL(parsing: "WSS://sync.example.com/team?x=1")
        #expect(url.usesTLS)
        #expect(url.port == 443)
        #expect(url.host == "sync.example.com")
        #expect(url.path == "/team?x=1")
    }

    @Test func explicitPortAndQueryWithoutPath() throws {
        let url = try ServerURL(parsing: "ws://127.0.0.1:7070?debug")
        #expect(url.port == 7070)
        #expect(url.path == "/?debug")
    }

    @Test func ipv6LiteralKeepsItsAddressWithoutBrackets() throws {
        let url = try ServerURL(parsing: "ws://[::1]:9000/")
        #expect(url.host == "::1")
        #expect(url.port == 9000)
        #expect(url.description == "ws://[::1]:9000/")
        #expect(try ServerURL(parsing: "wss://[fe80::1]").port == 443)
    }

    @Test(arguments: [
        "http://example.com", "example.com:80", "ws://", "ws://:80/", "ws://host:0", "ws://host:65536",
        "ws://host:80x", "ws://user@host/", "ws://host/#frag", "ws://[::1/", "ws://[::1]x", "ws://host/a b",
        "ws://host:-1",
    ])
    func refusesMalformedURLs(_ text: String) {
        #expect(throws: ClientError.self) { try ServerURL(parsing: text) }
    }

    /// A session connects on `/v1/workspaces/{id}/ws` (docs/design.md, "The protocol in brief").
    @Test func aSessionConnectsOnItsWorkspacesPath() throws {
        #expect(try ServerURL(parsing: "ws://h:7070").session(for: "team").path == "/v1/workspaces/team/ws")
        #expect(try ServerURL(parsing: "ws://h:7070/").session(for: "team").description == "ws://h:7070/v1/workspaces/team/ws")
        #expect(try ServerURL(parsing: "wss://h/sync/?x=1").session(for: "a.b_c-9").path == "/sync/v1/workspaces/a.b_c-9/ws?x=1")
        #expect(try ServerURL(parsing: "ws://h/v1/workspaces/team/ws").session(for: "team").path == "/v1/workspaces/team/ws")
        #expect(try ServerURL(parsing: "ws://h").session(for: "a b/c").path == "/v1/workspaces/a%20b%2Fc/ws")
    }
}
