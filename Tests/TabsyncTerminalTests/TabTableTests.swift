import TabsyncCore
import Testing
@testable import TabsyncTerminal

@Suite struct TabTableTests {
    @Test func referencesResolveByIdThenUniqueTitlePrefix() throws {
        let ws = workspace(["Docs", "Dashboard", "Mail", "mailbox"])
        #expect(try TabReference.resolve("t3", in: ws).title == "Mail")
        #expect(try TabReference.resolve("Do", in: ws).title == "Docs")
        #expect(try TabReference.resolve("Das", in: ws).title == "Dashboard")
        #expect(try TabReference.resolve("Mail", in: ws).title == "Mail")  // case-sensitive match first
        #expect(try TabReference.resolve("mailb", in: ws).title == "mailbox")
        #expect(throws: TabReference.Failure.ambiguous("D", ids: ["t1", "t2"])) { try TabReference.resolve("D", in: ws) }
        #expect(throws: TabReference.Failure.noMatch("zz")) { try TabReference.resolve("zz", in: ws) }
        #expect(throws: TabReference.Failure.noMatch("")) { try TabReference.resolve("", in: ws) }
    }

    @Test func tableLinesUpWideAndHostileTitles() {
        var ws = workspace(["日本語", "Docs\u{1B}[31m", "x"], active: 1)
        ws = try! applying(.update(TabUpdate(tabId: "t3", url: "https://x.example", badge: "2", locked: true)), to: ws)
        let text = TabTable.render(ws)
        #expect(text == """
            workspace default v2, 3 tabs
            #  ID  TITLE      URL                FLAGS
            1  t1  日本語
            2  t2  Docs?[31m                     active
            3  t3  x          https://x.example  locked,badge=2

            """)
        #expect(!text.contains("\u{1B}"))
    }
}
