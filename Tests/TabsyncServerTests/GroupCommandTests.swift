import Foundation
import TabsyncCore
import TabsyncTestServer
import Testing

/// The one-shot group commands of `tabsync` against a real server (docs/design.md, "Tab groups"):
/// `group` makes a group by title or joins one by id or title and prints its id, `ungroup` and
/// `group-edit` change it, `ls` shows a GROUP column, `export` and `import` carry groups, and bad
/// arguments exit 2 naming what is wrong while a refusal exits 3.
@Suite("tabsync group commands")
struct GroupCommandTests {
    static var tabsync: String {
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("tabsync").path
    }

    func run(_ server: TestServer, _ command: [String], input: String = "") throws -> ToolRun {
        try ToolRun.run(Self.tabsync, command + ["--server", "ws://127.0.0.1:\(server.port)", "--workspace", "g"], input: input)
    }

    @Test func groupUngroupEditListExportAndImport() throws {
        let server = try TestServer()
        defer { server.stop() }
        for title in ["Docs", "Mail", "Chat", "News"] {
            #expect(try run(server, ["add", "--title", title]).status == 0)
        }
        let made = try run(server, ["group", "Docs", "Mail", "--into", "Work", "--color", "blue"])
        #expect(made.status == 0, "\(made.output)")
        let id = made.output.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(id.hasPrefix("g-"))
        // By title: the same group; the server puts News after its last tab.
        #expect(try run(server, ["group", "News", "--into", "Work"]).output.trimmingCharacters(in: .whitespacesAndNewlines) == id)
        var snapshot = try #require(try server.snapshot("g"))
        #expect(snapshot.tabs.map { "\($0.title)\($0.group.isEmpty ? "" : "*")" } == ["Docs*", "Mail*", "News*", "Chat"])
        #expect(snapshot.groups == [TabGroup(id: id, title: "Work", color: "blue")])

        let listed = try run(server, ["ls"])
        #expect(listed.output.contains("4 tabs, 1 group"))
        #expect(listed.output.split(separator: "\n").contains { $0.contains("Mail") && $0.contains("Work") })

        #expect(try run(server, ["group-edit", "Work", "--title", "Deep", "--color", "red"]).status == 0)
        #expect(try run(server, ["ungroup", "Mail"]).status == 0)
        snapshot = try #require(try server.snapshot("g"))
        #expect(snapshot.groups == [TabGroup(id: id, title: "Deep", color: "red")])
        #expect(snapshot.tabs.map(\.title) == ["Docs", "News", "Mail", "Chat"], "Mail was inside the group: it left after its last tab")

        // export, wipe, import: the groups come back.
        let exported = try run(server, ["export"])
        #expect(exported.output.contains("\"groups\""))
        #expect(try run(server, ["ungroup", "Docs", "News"]).status == 0)
        #expect(try #require(try server.snapshot("g")).groups.isEmpty)
        let imported = try run(server, ["import", "-"], input: exported.output)
        #expect(imported.status == 0, "\(imported.output)")
        #expect(try #require(try server.snapshot("g")).groups == [TabGroup(id: id, title: "Deep", color: "red")])
    }

    @Test func badArgumentsExitTwoAndRefusalsThree() throws {
        let server = try TestServer()
        defer { server.stop() }
        #expect(try run(server, ["add", "--title", "Docs"]).status == 0)
        let colour = try run(server, ["group", "Docs", "--into", "Work", "--color", "magenta"])
        #expect(colour.status == 2 && colour.output.contains("color"), "\(colour.output)")
        let nothing = try run(server, ["group-edit", "Work"])
        #expect(nothing.status == 2 && nothing.output.contains("--title"), "\(nothing.output)")
        let missing = try run(server, ["group-edit", "Nope", "--title", "x"])
        #expect(missing.status == 2 && missing.output.contains("no group"), "\(missing.output)")
        #expect(try run(server, ["group", "Docs", "--into", "Work"]).status == 0)
        // The server's refusal (a title over 256 chars) exits 3 and says why.
        let refused = try run(server, ["group-edit", "Work", "--title", String(repeating: "x", count: 300)])
        #expect(refused.status == 3 && refused.output.contains("INVALID_ARGUMENT"), "\(refused.output)")
    }
}
