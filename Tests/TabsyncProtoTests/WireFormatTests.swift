import Testing
import TabsyncCore
@testable import TabsyncProto

private func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }
private func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

@Suite struct WireFormatTests {
    // The example lines of docs/design.md ('The protocol in brief'), verbatim.
    static let helloLine = #"{"hello":{"workspace":"team","clientId":"c1"}}"#
    static let submitLine = #"{"submit":{"seq":"1","op":{"add":{"tab":{"id":"t1","title":"Docs"},"activate":true}}}}"#
    static let appliedLine = #"{"applied":{"version":"1","op":{"add":{"tab":{"id":"t1","title":"Docs","key":"a0"},"activate":true}},"clientId":"c1","seq":"1","activeTabId":"t1"}}"#

    @Test func subprotocolNamesAndFrameKinds() {
        #expect(WireFormat.json.subprotocol == "tabsync.v1.json")
        #expect(WireFormat.proto.subprotocol == "tabsync.v1.proto")
        #expect(WireFormat(subprotocol: "tabsync.v1.json") == .json)
        #expect(WireFormat(subprotocol: "tabsync.v1.proto") == .proto)
        #expect(WireFormat(subprotocol: "tabsync.v2.json") == nil)
        #expect(WireFormat(subprotocol: "") == nil)
        #expect(WireFormat.json.usesTextFrames)
        #expect(!WireFormat.proto.usesTextFrames)
    }

    @Test(arguments: WireFormat.allCases, Samples.pairs)
    func everyOpRoundTripsInASubmit(format: WireFormat, pair: Samples.Pair) throws {
        let message = Tabsync_V1_ClientMessage(submit: Tabsync_V1_Submit(seq: UInt64.max, baseVersion: 12, op: pair.core))
        let decoded = try format.decodeClientMessage(format.encode(message))
        #expect(decoded == message)
        guard case .submit(let submit)? = decoded.message else {
            Issue.record("not a submit")
            return
        }
        #expect(submit.seq == UInt64.max)
        #expect(submit.baseVersion == 12)
        #expect(try Operation(submit.op) == pair.core)
    }

    @Test(arguments: WireFormat.allCases, Samples.pairs)
    func everyOpRoundTripsInAnApplied(format: WireFormat, pair: Samples.Pair) throws {
        let applied = AppliedOp(version: 1 << 60, op: pair.core, clientId: "c1", seq: 3, activeTabId: "t1")
        let decoded = try format.decodeServerMessage(format.encode(Tabsync_V1_ServerMessage(applied: applied)))
        guard case .applied(let wire)? = decoded.message else {
            Issue.record("not an applied")
            return
        }
        #expect(try AppliedOp(wire) == applied)
    }

    @Test func designHelloLineParsesConvertsAndReencodesExactly() throws {
        let message = try WireFormat.json.decodeClientMessage(bytes(Self.helloLine))
        guard case .hello(let hello)? = message.message else {
            Issue.record("not a hello")
            return
        }
        #expect(hello.workspace == "team")
        #expect(hello.clientID == "c1")
        #expect(hello.lastVersion == 0)
        let rebuilt = Tabsync_V1_ClientMessage(hello: Tabsync_V1_Hello(workspace: "team", clientId: "c1"))
        #expect(text(WireFormat.json.encode(rebuilt)) == Self.helloLine)
    }

    @Test func designSubmitLineParsesConvertsAndReencodesExactly() throws {
        let message = try WireFormat.json.decodeClientMessage(bytes(Self.submitLine))
        guard case .submit(let submit)? = message.message else {
            Issue.record("not a submit")
            return
        }
        #expect(submit.seq == 1)
        #expect(submit.baseVersion == 0)
        let op = try Operation(submit.op)
        #expect(op == .add(tab: Tab(id: "t1", title: "Docs"), place: .end, activate: true))
        let rebuilt = Tabsync_V1_ClientMessage(submit: Tabsync_V1_Submit(seq: submit.seq, baseVersion: 0, op: op))
        #expect(text(WireFormat.json.encode(rebuilt)) == Self.submitLine)
    }

    @Test func designAppliedLineParsesConvertsAndReencodesExactly() throws {
        let message = try WireFormat.json.decodeServerMessage(bytes(Self.appliedLine))
        guard case .applied(let wire)? = message.message else {
            Issue.record("not an applied")
            return
        }
        let applied = try AppliedOp(wire)
        #expect(applied == AppliedOp(
            version: 1, op: .add(tab: Tab(id: "t1", title: "Docs", key: "a0"), place: .end, activate: true),
            clientId: "c1", seq: 1, activeTabId: "t1"))
        #expect(text(WireFormat.json.encode(Tabsync_V1_ServerMessage(applied: applied))) == Self.appliedLine)
    }

    @Test func sixtyFourBitNumbersAreAcceptedAsNumbersAndSentAsStrings() throws {
        let line = #"{"submit":{"seq":18446744073709551615,"baseVersion":2,"op":{"remove":{"tabId":"t1"}}}}"#
        let message = try WireFormat.json.decodeClientMessage(bytes(line))
        #expect(message.submit.seq == UInt64.max)
        #expect(message.submit.baseVersion == 2)
        #expect(text(WireFormat.json.encode(message))
            == #"{"submit":{"seq":"18446744073709551615","baseVersion":"2","op":{"remove":{"tabId":"t1"}}}}"#)
    }

    @Test func jsonIsCompactWithCamelCaseNamesAndEnumNames() {
        let rejected = Tabsync_V1_ServerMessage(rejected: Tabsync_V1_Rejected(seq: 2, code: .tabGone, message: "tab B does not exist"))
        #expect(text(WireFormat.json.encode(rejected))
            == #"{"rejected":{"seq":"2","code":"TAB_GONE","message":"tab B does not exist"}}"#)
        let update = Tabsync_V1_ClientMessage(submit: Tabsync_V1_Submit(
            seq: 1, op: .update(TabUpdate(tabId: "t1", url: "", locked: false))))
        #expect(text(WireFormat.json.encode(update))
            == #"{"submit":{"seq":"1","op":{"update":{"tabId":"t1","url":"","locked":false}}}}"#)
        let focus = Tabsync_V1_ClientMessage(focus: Tabsync_V1_Focus(tabId: "t1"))
        #expect(text(WireFormat.json.encode(focus)) == #"{"focus":{"tabId":"t1"}}"#)
        let editable = Tabsync_V1_ClientMessage(submit: Tabsync_V1_Submit(seq: 4, op: .setEditable(false)))
        #expect(text(WireFormat.json.encode(editable)) == #"{"submit":{"seq":"4","op":{"setEditable":{}}}}"#)
        let activate = Tabsync_V1_ClientMessage(submit: Tabsync_V1_Submit(seq: 5, op: .activate(.index(0))))
        #expect(text(WireFormat.json.encode(activate)) == #"{"submit":{"seq":"5","op":{"activate":{"index":0}}}}"#)
    }

    @Test(arguments: ErrorCode.allCases)
    func errorCodesTravelAsTheirWireNames(code: ErrorCode) throws {
        let message = Tabsync_V1_ServerMessage(error: Tabsync_V1_Error(code: code, message: "m"))
        let json = text(WireFormat.json.encode(message))
        #expect(json == #"{"error":{"code":"\#(code.wireName)","message":"m"}}"#)
        let back = try WireFormat.json.decodeServerMessage(bytes(json))
        #expect(ErrorCode(back.error.code) == code)
    }

    @Test func presenceAndWelcomeRoundTrip() throws {
        let presence = Tabsync_V1_ServerMessage(peers: [
            Tabsync_V1_Peer(sessionId: "s1", clientId: "c1", name: "Ann", focusTabId: "t1"),
            Tabsync_V1_Peer(sessionId: "s2", clientId: "c2", name: "Bo", focusTabId: ""),
        ])
        #expect(text(WireFormat.json.encode(presence)) == #"{"presence":{"peers":[{"sessionId":"s1","clientId":"c1","name":"Ann","focusTabId":"t1"},{"sessionId":"s2","clientId":"c2","name":"Bo"}]}}"#)
        let workspace = Workspace(id: "team", version: 3, epoch: "e1", tabs: [Tab(id: "t1", key: "a0")],
                                  activeTabId: "t1", editable: true)
        let welcome = Tabsync_V1_ServerMessage(welcome: Tabsync_V1_Welcome(
            sessionId: "s1", clientId: "c1", lastSeq: 2, limits: .default, snapshot: workspace))
        for format in WireFormat.allCases {
            #expect(try format.decodeServerMessage(format.encode(presence)) == presence)
            let decoded = try format.decodeServerMessage(format.encode(welcome))
            #expect(decoded == welcome)
            #expect(Workspace(decoded.welcome.snapshot) == workspace)
        }
        #expect(text(WireFormat.json.encode(welcome)) == #"{"welcome":{"sessionId":"s1","clientId":"c1","epoch":"e1","snapshot":{"workspace":"team","version":"3","epoch":"e1","tabs":[{"id":"t1","key":"a0"}],"activeTabId":"t1","editable":true},"lastSeq":"2","limits":{"maxTabs":500,"maxFrameBytes":1048576,"maxOpsPerSecond":100,"maxResumeOps":1000,"maxGroups":100}}}"#)
    }

    @Test func unknownJsonFieldIsRefused() {
        let lines = [
            #"{"hello":{"workspace":"team","clientId":"c1","colour":"red"}}"#,
            #"{"hullo":{"workspace":"team"}}"#,
            #"{"submit":{"seq":"1","op":{"add":{"tab":{"id":"t1","name":"x"}}}}}"#,
            #"{"hello":{"workspace":"team","client_idd":"c1"}}"#,
        ]
        for line in lines {
            #expect(throws: WireFormat.DecodingError.self) { try WireFormat.json.decodeClientMessage(bytes(line)) }
        }
    }

    @Test func protoFieldNamesAreAcceptedOnJsonInput() throws {
        // The canonical JSON mapping accepts the .proto names as well as lowerCamelCase.
        let message = try WireFormat.json.decodeClientMessage(bytes(#"{"hello":{"workspace":"team","client_id":"c1"}}"#))
        #expect(message.hello.clientID == "c1")
    }

    @Test func undecodableFramesAreRefusedWithClose1007() {
        let frames: [(WireFormat, [UInt8])] = [
            (.json, bytes("not json")),
            (.json, bytes("")),
            (.json, bytes(#"{"hello":{"workspace":"team"}} trailing"#)),
            (.json, bytes(#"{"submit":{"seq":"-1"}}"#)),
            (.json, bytes(#"{"submit":{"seq":"x"}}"#)),
            (.json, bytes(#"{"hello":{"workspace":7}}"#)),
            (.json, bytes(#"{"hello":{},"focus":{}}"#)),
            (.json, [0x7B, 0x22, 0xFF, 0x22, 0x3A, 0x31, 0x7D]),
            (.proto, [0x0A, 0x05, 0x01]),
            (.proto, [0xFF, 0xFF, 0xFF]),
        ]
        for (format, frame) in frames {
            #expect(throws: WireFormat.DecodingError.self) { try format.decodeClientMessage(frame) }
        }
        #expect(WireFormat.DecodingError(format: .json, reason: "x").closeCode == 1007)
    }

    @Test func messageWithNothingSetDecodesAndIsDetectable() throws {
        #expect(try WireFormat.json.decodeClientMessage(bytes("{}")).message == nil)
        #expect(try WireFormat.proto.decodeClientMessage([]).message == nil)
        #expect(try WireFormat.json.decodeClientMessage(bytes(#"{"hello":null}"#)).message == nil)
        #expect(try WireFormat.json.decodeClientMessage(bytes(#"{"hello":{}}"#)).message != nil)
        #expect(try WireFormat.json.decodeServerMessage(bytes("{}")).message == nil)
    }

    @Test func unknownBinaryFieldsAreSkipped() throws {
        // Field 15 (varint 1) is unknown to ClientMessage: skipped, the hello still reads.
        var frame = WireFormat.proto.encode(Tabsync_V1_ClientMessage(focus: Tabsync_V1_Focus(tabId: "t1")))
        frame += [0x78, 0x01]
        let message = try WireFormat.proto.decodeClientMessage(frame)
        #expect(message.focus.tabID == "t1")
        #expect(message.unknownFields.data.isEmpty)
    }
}
