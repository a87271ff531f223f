import Testing
@testable import TabsyncClient

/// The SSE parser and the feed cursor without sockets: the HTML standard's parsing rules, and the
/// no-gap, no-repeat rule a resume relies on.
@Suite struct EventStreamParserTests {
    private func parse(_ text: String, pieces: Int = 1) -> (events: [ServerSentEvent], parser: EventStreamParser) {
        var parser = EventStreamParser()
        var events: [ServerSentEvent] = []
        let bytes = Array(text.utf8)
        let size = max(1, (bytes.count + pieces - 1) / pieces)
        var start = 0
        while start < bytes.count {
            events += parser.feed(bytes[start..<min(bytes.count, start + size)])
            start += size
        }
        return (events, parser)
    }

    @Test func idEventAndDataMakeOneEvent() {
        let (events, parser) = parse("id: 7\nevent: op\ndata: {\"a\":1}\n\n")
        #expect(events == [ServerSentEvent(event: "op", data: "{\"a\":1}", id: "7")])
        #expect(parser.lastEventId == "7")
    }

    @Test func severalDataLinesAreJoinedWithNewlines() {
        let (events, _) = parse("data: one\ndata:two\ndata\ndata:  four\n\n")
        #expect(events.map(\.data) == ["one\ntwo\n\n four"])
        #expect(events.first?.event == "message")
    }

    @Test(arguments: [1, 2, 3, 7, 1000])
    func crlfCrAndLfAllEndLinesEvenSplitAcrossPieces(_ pieces: Int) {
        let text = "id: 1\r\nevent: op\r\ndata: a\r\n\r\nid: 2\revent: op\rdata: b\r\rid: 3\nevent: op\ndata: c\n\n"
        let (events, _) = parse(text, pieces: pieces)
        #expect(events.map(\.id) == ["1", "2", "3"])
        #expect(events.map(\.data) == ["a", "b", "c"])
    }

    @Test func commentsAreCountedAndNeverEvents() {
        let (events, parser) = parse(": keep-alive\n\n:another\n\ndata: x\n\n")
        #expect(events.map(\.data) == ["x"])
        #expect(parser.comments == 2)
    }

    @Test func idPersistsAcrossEventsAndAnIdWithNulIsIgnored() {
        let (events, parser) = parse("id: 5\ndata: a\n\ndata: b\n\nid: 6\u{0}\ndata: c\n\n")
        #expect(events.map(\.id) == ["5", "5", "5"])
        #expect(parser.lastEventId == "5")
    }

    @Test func retryTakesDigitsOnly() {
        #expect(parse("retry: 1500\n\n").parser.retry == .milliseconds(1500))
        #expect(parse("retry: 15x\n\n").parser.retry == nil)
        #expect(parse("retry: \n\n").parser.retry == nil)
    }

    @Test func anEventWithoutDataIsNotDispatchedAndUnknownFieldsAreIgnored() {
        let (events, parser) = parse("id: 9\nevent: op\n\nfoo: bar\ndata: y\n\n")
        #expect(events == [ServerSentEvent(event: "message", data: "y", id: "9")])
        #expect(parser.lastEventId == "9")
    }

    @Test func aLeadingBomIsDropped() {
        let (events, _) = parse("\u{FEFF}data: z\n\n")
        #expect(events.map(\.data) == ["z"])
    }

    @Test func aHalfWrittenEventIsDroppedByReset() {
        var parser = EventStreamParser()
        #expect(parser.feed(Array("id: 1\nevent: op\ndata: a\n\nid: 2\nevent: op\ndata: b".utf8)).map(\.id) == ["1"])
        parser.reset()
        #expect(parser.feed(Array("\n\n".utf8)).isEmpty, "the cut event's data is gone")
        #expect(parser.lastEventId == "2", "an id line that was whole counts, as in EventSource")
    }
}

@Suite struct FeedCursorTests {
    private func op(_ version: Int) -> ServerSentEvent { ServerSentEvent(event: "op", data: "{}", id: "\(version)") }

    @Test func opsInOrderPassAndRepeatsAreDropped() throws {
        var cursor = FeedCursor(after: 3)
        #expect(try cursor.accept(op(4)) == .op(version: 4, json: "{}"))
        #expect(try cursor.accept(op(4)) == nil)
        #expect(try cursor.accept(op(2)) == nil)
        #expect(try cursor.accept(op(5))?.version == 5)
        #expect(cursor.version == 5)
    }

    @Test func aGapThrowsAndLeavesTheVersion() {
        var cursor = FeedCursor(after: 3)
        #expect(throws: FeedCursor.Violation.gap(expected: 4, got: 6)) { try cursor.accept(op(6)) }
        #expect(cursor.version == 3)
    }

    @Test func aSnapshotResetsTheVersionAndOtherEventsAreIgnored() throws {
        var cursor = FeedCursor()
        #expect(try cursor.accept(ServerSentEvent(event: "snapshot", data: "{}", id: "10")) == .snapshot(version: 10, json: "{}"))
        #expect(try cursor.accept(ServerSentEvent(event: "presence", data: "{}", id: "99")) == nil)
        #expect(try cursor.accept(op(11))?.version == 11)
        #expect(throws: FeedCursor.Violation.notAVersion("x")) { try cursor.accept(ServerSentEvent(event: "op", data: "{}", id: "x")) }
    }
}

@Suite struct ChunkedDecoderTests {
    @Test(arguments: [1, 2, 5, 100])
    func decodesChunksSplitAnywhere(_ size: Int) throws {
        let wire = Array("5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nTrailer: x\r\n\r\n".utf8)
        var decoder = ChunkedDecoder()
        var out: [UInt8] = []
        var start = 0
        while start < wire.count {
            out += try decoder.feed(wire[start..<min(wire.count, start + size)])
            start += size
        }
        #expect(String(decoding: out, as: UTF8.self) == "hello world")
        #expect(decoder.finished)
    }

    @Test func aSizeThatIsNotHexThrows() {
        var decoder = ChunkedDecoder()
        #expect(throws: ChunkedDecoder.Malformed.self) { try decoder.feed(Array("zz\r\n".utf8)) }
    }
}
