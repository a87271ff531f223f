import TabsyncCore
import Testing
@testable import TabsyncTerminal

@Suite struct FrameTests {
    @Test func frameIsExactlyRowsByColumns() {
        for (rows, cols) in [(1, 10), (2, 20), (3, 30), (4, 5), (24, 80), (40, 200)] {
            for position in BarModel.Position.allCases {
                let m = model(workspace(["日本語", "🚀", "Docs\u{1B}[31m"]), rows: rows, cols: cols, position: position)
                let f = m.frame()
                #expect(f.lines.count == rows)
                for line in f.lines { #expect(line.width == cols) }
            }
        }
    }

    @Test func barIsOnTopOrAtTheBottom() {
        let ws = workspace(["A", "B"])
        let top = model(ws, rows: 10, cols: 80, position: .top).frame()
        #expect(top.lines[0].plain.hasPrefix(" 1:A*  2:B"))
        #expect(top.lines[9].plain.hasPrefix("ws://127.0.0.1:7070 | default v1 | connecting"))
        #expect(top.lines[8].plain.trimmingSpaces.isEmpty)  // the message row, empty
        #expect(top.lines[1].plain.hasPrefix("←→/hl tab"))
        let bottom = model(ws, rows: 10, cols: 80, position: .bottom).frame()
        #expect(bottom.lines[9].plain.hasPrefix(" 1:A*  2:B"))
        #expect(bottom.lines[8].plain.hasPrefix("ws://127.0.0.1:7070"))
        #expect(bottom.lines[6].plain.hasPrefix("←→/hl tab"))
    }

    @Test func statusShowsConnectionVersionRttAndPending() {
        var m = model(workspace(["A"], version: 12), rows: 10, cols: 120)
        _ = m.handle(.link(.reconnecting(seconds: 3)))
        _ = m.handle(.stats(rttMillis: 4, pending: 2))
        #expect(m.statusLine().plain
            == "ws://127.0.0.1:7070 | default v12 | reconnecting in 3s | rtt 4ms | pending 2 | follow")
    }

    @Test func promptShowsTheCursorAfterTheText() {
        var m = model(workspace(["A"]), rows: 10, cols: 40)
        _ = m.handle(.key(.char("n")))
        _ = m.handle(.key(.char("日")))
        let f = m.frame()
        #expect(f.lines[8].plain.hasPrefix("New tab title: 日"))
        #expect(f.cursor == Frame.Cursor(row: 8, col: 17))
    }

    @Test func resizeRelaysOut() {
        var m = model(workspace((1...20).map { "tab\($0)" }), rows: 10, cols: 200)
        #expect(m.barLayout().hiddenRight == 0)
        _ = m.handle(.resize(rows: 5, cols: 30))
        let f = m.frame()
        #expect(f.rows == 5 && f.cols == 30)
        #expect(f.lines[0].plain.hasSuffix("›"))
    }

    @Test func rendererRewritesOnlyChangedLines() {
        var r = Renderer()
        var m = model(workspace(["A", "B"]), rows: 6, cols: 100)
        let first = r.render(m.frame())
        #expect(first.hasPrefix("\u{1B}[0m\u{1B}[2J"))
        #expect(first.contains("\u{1B}[1;1H") && first.contains("\u{1B}[6;1H"))
        #expect(r.render(m.frame()) == "")  // nothing changed, nothing written
        _ = m.handle(.stats(rttMillis: 5, pending: 0))
        let update = r.render(m.frame())
        #expect(update.contains("\u{1B}[6;1H"))  // the status line
        #expect(!update.contains("\u{1B}[1;1H") && !update.contains("\u{1B}[2J"))
        r.invalidate()
        #expect(r.render(m.frame()).contains("\u{1B}[2J"))
    }

    @Test func rendererOutputCarriesNoEscapeFromTheNetwork() {
        var r = Renderer()
        let m = model(workspace(["\u{1B}]0;title\u{7}", "\u{9B}2J", "x\u{1B}[?1049l"]), rows: 10, cols: 80)
        let out = r.render(m.frame())
        #expect(!out.contains("\u{1B}]"))
        #expect(!out.contains("\u{9B}"))
        #expect(!out.contains("\u{1B}[?1049l"))
        #expect(!out.contains("\u{7}"))
    }

    @Test func rendererStylesSpans() {
        let line = Line([Span("a"), Span("b", [.bold, .reverse]), Span("c")])
        #expect(Renderer.encode(line) == "a\u{1B}[0;1;7mb\u{1B}[0mc")
    }
}
