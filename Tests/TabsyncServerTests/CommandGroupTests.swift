import Foundation
import TabsyncCore
import TabsyncStore
import TabsyncTestServer
import TabsyncTestSupport
import Testing

/// `tabsync group`, `ungroup`, `group-edit` and `ls` with groups, run as processes against a real
/// server (docs/design.md, "Tab groups"): exit 0 on success, 2 for a bad argument (nothing sent),
/// 3 when the server refuses.
@Suite("tabsync group commands", .serialized)
struct CommandGroupTests {
    static var tabsync: String {
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("tabsync").path
    }

    /// Runs `tabsync` with `command` against `server`'s workspace "grp"; its stdout and stderr.
    func run(_ server: TestServer, _ command: [String]) throws -> (status: Int32, out: String, err: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Self.tabsync)
        process.arguments = command + ["--server", "ws://127.0.0.1:\(server.port)", "--workspace", "grp", "--client-id", "cli-group"]
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let outData = out.fileHandleForReading.readDataToEndOfFile()
        let errData = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: outData, as: UTF8.self), String(decoding: errData, as: UTF8.self))
    }

    @Test func groupJoinEditLsAndUngroup() throws {
        let server = try TestServer(store: MemoryStore())
        defer { server.stop() }
        _ = try seed(server, workspace: "grp")

        // A title no group has: a new group, its id printed.
        let made = try run(server, ["group", "t1", "t2", "--into", "Work", "--color", "blue"])
        #expect(made.status == 0, "\(made.err)")
        let id = made.out.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(id.hasPrefix("g-"))
        var ws = try #require(try server.snapshot("grp"))
        #expect(ws.groups == [TabGroup(id: id, title: "Work", color: "blue")])
        #expect(ws.tabs.map(\.group) == [id, id, ""])

        // An existing title means that group: t3 joins it, the same id printed.
        let joined = try run(server, ["group", "t3", "--into", "Work"])
        #expect(joined.status == 0 && joined.out.trimmingCharacters(in: .whitespacesAndNewlines) == id, "\(joined.err)")
        ws = try #require(try server.snapshot("grp"))
        #expect(ws.tabs.map(\.group) == [id, id, id])

        let edited = try run(server, ["group-edit", "Work", "--title", "Job", "--color", "red"])
        #expect(edited.status == 0, "\(edited.err)")
        ws = try #require(try server.snapshot("grp"))
        #expect(ws.groups == [TabGroup(id: id, title: "Job", color: "red")])

        let table = try run(server, ["ls"])
        #expect(table.status == 0)
        #expect(table.out.contains("1 group\n") && table.out.contains("GROUP"), "\(table.out)")
        #expect(table.out.contains("Job (red) \(id)"), "\(table.out)")
        let json = try run(server, ["ls", "--json"])
        #expect(json.out.contains("\"groups\"") && json.out.contains("\"Job\"") && json.out.contains("\"group\":\"\(id)\""),
                "\(json.out)")

        // A colour given with an existing group updates it (the tabs already in it stay).
        let recoloured = try run(server, ["group", "t1", "--into", id, "--color", "green"])
        #expect(recoloured.status == 0, "\(recoloured.err)")
        ws = try #require(try server.snapshot("grp"))
        #expect(ws.groups == [TabGroup(id: id, title: "Job", color: "green")] && ws.tabs.map(\.group) == [id, id, id])

        let ungrouped = try run(server, ["ungroup", "t2"])
        #expect(ungrouped.status == 0, "\(ungrouped.err)")
        ws = try #require(try server.snapshot("grp"))
        #expect(ws.tab("t2")?.group == "" && ws.tab("t1")?.group == id && ws.tab("t3")?.group == id)
        // t2 was inside the group's span: it moved to right after the group's last tab.
        #expect(ws.tabs.map(\.id) == ["t1", "t3", "t2"])

        // export, then import after the group is gone: the group comes back with its tabs.
        let exported = try run(server, ["export"])
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("grp-\(UUID().uuidString).json")
        try exported.out.write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        #expect(try run(server, ["ungroup", "t1", "t3"]).status == 0)
        #expect(try #require(try server.snapshot("grp")).groups.isEmpty)
        let imported = try run(server, ["import", file.path])
        #expect(imported.status == 0, "\(imported.err)")
        ws = try #require(try server.snapshot("grp"))
        #expect(ws.groups == [TabGroup(id: id, title: "Job", color: "green")])
        #expect(ws.tabs.map(\.group) == [id, id, ""])
    }

    @Test func badArgumentsExit2AndRefusalsExit3() throws {
        let server = try TestServer(store: MemoryStore())
        defer { server.stop() }
        let writer = try seed(server, workspace: "grp")
        let before = try #require(try server.snapshot("grp"))

        let colour = try run(server, ["group", "t1", "--into", "Work", "--color", "mauve"])
        #expect(colour.status == 2 && colour.err.contains("mauve"), "\(colour.err)")
        let noField = try run(server, ["group-edit", "Work"])
        #expect(noField.status == 2 && noField.err.contains("--title or --color"), "\(noField.err)")
        let noGroup = try run(server, ["group-edit", "Nope", "--title", "x"])
        #expect(noGroup.status == 2 && noGroup.err.contains("no group"), "\(noGroup.err)")
        let noTab = try run(server, ["ungroup", "zzz"])
        #expect(noTab.status == 2, "\(noTab.err)")
        #expect(try server.snapshot("grp") == before)

        try writer.submit(.update(TabUpdate(tabId: "t2", locked: true)))
        _ = try writer.nextApplied()
        let locked = try run(server, ["group", "t2", "--into", "Work"])
        #expect(locked.status == 3 && locked.err.contains("LOCKED"), "\(locked.err)")
        #expect(try #require(try server.snapshot("grp")).groups.isEmpty)
    }
}
