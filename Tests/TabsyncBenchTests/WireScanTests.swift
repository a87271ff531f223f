import SwiftProtobuf
@testable import TabsyncBench
import TabsyncProto
import Testing

/// ``WireScan`` reads `Applied` by hand (protobuf field numbers, JSON key names). These tests encode
/// every kind of `ServerMessage` with the generated code, in both encodings, and check that the scan
/// agrees with the generated decoder, so a change to the .proto that the scan does not follow fails
/// here instead of silently losing answers in the bench.
@Suite("the bench's wire scan agrees with the generated code")
struct WireScanTests {
    // MARK: what the generated code says

    /// The bench's client index in an id: `c<N>` with 1 to 9 ASCII digits, else nil. Written apart
    /// from ``WireScan/clientIndex(_:)`` on purpose.
    static func benchClient(_ id: String) -> Int? {
        let bytes = Array(id.utf8)
        guard (2...10).contains(bytes.count), bytes[0] == UInt8(ascii: "c"),
              bytes.dropFirst().allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) })
        else { return nil }
        return Int(String(decoding: bytes.dropFirst(), as: UTF8.self))
    }

    /// What the scan must return for a message the generated decoder reads as `message`.
    static func expected(_ message: Tabsync_V1_ServerMessage) -> WireScan.Message {
        switch message.message {
        case .applied(let applied)?: .applied(client: benchClient(applied.clientID), seq: applied.seq)
        case .presence?: .presence
        case .welcome?, .rejected?, .error?, .history?, nil: .other
        }
    }

    static func scan(_ bytes: [UInt8], _ format: WireFormat) -> WireScan.Message {
        bytes.withUnsafeBytes { format == .json ? WireScan.json($0) : WireScan.proto($0) }
    }

    /// Encodes `message` with the generated code, decodes it back the same way, and checks the
    /// scan of the bytes against what the decoder read.
    func checkAgreement(_ message: Tabsync_V1_ServerMessage, _ format: WireFormat,
                        sourceLocation: SourceLocation = #_sourceLocation) throws {
        let bytes = format.encode(message)
        let decoded = try format.decodeServerMessage(bytes)
        #expect(decoded == message, "the generated code round-trips", sourceLocation: sourceLocation)
        #expect(Self.scan(bytes, format) == Self.expected(decoded),
                "\(String(decoding: bytes, as: UTF8.self))", sourceLocation: sourceLocation)
    }

    // MARK: messages

    static func tab(_ id: String, title: String = "Docs", url: String = "https://example.com/") -> Tabsync_V1_Tab {
        .with {
            $0.id = id
            $0.title = title
            $0.url = url
            $0.key = "a0"
        }
    }

    static func applied(client: String, seq: UInt64, version: UInt64 = 7, op: Tabsync_V1_Op? = nil,
                        active: String = "t-1") -> Tabsync_V1_ServerMessage {
        .with {
            $0.applied = .with {
                $0.version = version
                if let op { $0.op = op }
                $0.clientID = client
                $0.seq = seq
                $0.activeTabID = active
            }
        }
    }

    /// One op of every kind, with the text a scan could trip on inside it.
    static let ops: [Tabsync_V1_Op] = [
        .with { $0.add = .with { $0.tab = tab("t-1"); $0.place = .with { $0.index = 3 }; $0.activate = true } },
        .with { $0.open = .with { $0.tab = tab("t-2", title: #""clientId":"c7","seq":"99""#); $0.place = .with { $0.key = "a1" } } },
        .with { $0.move = .with { $0.tabID = "t-1"; $0.place = .with { $0.key = "Zz" } } },
        .with { $0.remove = .with { $0.tabID = "t-3" } },
        .with { $0.activate = .with { $0.tabID = "t-1" } },
        .with { $0.activate = .with { $0.index = 0 } },
        .with { $0.update = .with { $0.tabID = "t-1"; $0.title = "日本語タブ"; $0.url = ""; $0.badge = "7"; $0.locked = true } },
        .with { $0.setEditable = .with { $0.editable = true } },
        .with { $0.replace = .with { $0.tabs = [tab("t-1"), tab("t-2", title: "\u{0}\u{1B}[2J\"\\")] } },
        .with { $0.rekey = .with { $0.keys = [.with { $0.tabID = "t-1"; $0.key = "a0" }] } },
    ]

    /// Every kind of server message, with the fields the scan reads in many shapes.
    static let messages: [Tabsync_V1_ServerMessage] = {
        var messages: [Tabsync_V1_ServerMessage] = []
        // Applied: the bench's own ops, with every op kind.
        for (index, op) in ops.enumerated() {
            messages.append(applied(client: "c\(index)", seq: UInt64(index + 1), op: op))
        }
        // Seqs across the varint byte boundaries, up to 64 bits (JSON writes them as strings).
        for seq: UInt64 in [1, 127, 128, 16_383, 16_384, 1 << 32 - 1, 1 << 32, 1 << 56, 1 << 63, .max] {
            messages.append(applied(client: "c5", seq: seq, version: .max))
        }
        // Server-made ops (rekey: no client id, seq 0), no op at all, nothing set.
        messages.append(applied(client: "", seq: 0, op: ops.last))
        messages.append(applied(client: "", seq: 0, version: 0, active: ""))
        messages.append(.with { $0.applied = Tabsync_V1_Applied() })
        // Client ids the bench did not make: the scan gives no client, but still the seq.
        for id in ["c", "c0", "c999999999", "c1234567890", "C12", "x12", "c-1", "c1.5", "c１２", "c12 ", "c1\"", "c\\1",
                   "c1\n", "\u{7F}c1", "日本", #""seq":"9""#] {
            messages.append(applied(client: id, seq: 42))
        }
        // Text that looks like the fields the scan searches for, after them (the active tab id).
        messages.append(applied(client: "c3", seq: 8, active: #"","seq":"99","clientId":"c7"#))
        messages.append(applied(client: "c3", seq: 8, active: #"seq":""#))

        // Welcome, with missed Applieds inside (not answers to anything).
        messages.append(.with { $0.welcome = Tabsync_V1_Welcome() })
        messages.append(.with {
            $0.welcome = .with {
                $0.sessionID = "s-1"
                $0.clientID = "c4"
                $0.epoch = "e1"
                $0.recovered = true
                $0.missed = [applied(client: "c4", seq: 3).applied, applied(client: "c5", seq: .max).applied]
                $0.lastSeq = 3
                $0.limits = .with { $0.maxTabs = 500; $0.maxFrameBytes = 1 << 20; $0.maxOpsPerSecond = 100; $0.maxResumeOps = 1000 }
            }
        })
        messages.append(.with {
            $0.welcome = .with {
                $0.clientID = "c4"
                $0.snapshot = .with {
                    $0.workspace = "bench-1"
                    $0.version = 1 << 40
                    $0.epoch = "e1"
                    $0.tabs = [tab("t-1"), tab("t-2")]
                    $0.activeTabID = "t-2"
                    $0.editable = true
                }
                $0.lastSeq = .max
            }
        })
        // Rejected and Error, with text that looks like an Applied.
        for code in Tabsync_V1_ErrorCode.allCases {
            messages.append(.with { $0.rejected = .with { $0.seq = 9; $0.code = code; $0.message = #"{"applied":{"seq":"9"}}"# } })
            messages.append(.with { $0.error = .with { $0.code = code; $0.message = "bad \"frame\"" } })
        }
        messages.append(.with { $0.rejected = Tabsync_V1_Rejected() })
        messages.append(.with { $0.error = Tabsync_V1_Error() })
        // Presence, empty and with peers.
        messages.append(.with { $0.presence = Tabsync_V1_Presence() })
        messages.append(.with {
            $0.presence = .with {
                $0.peers = [
                    .with { $0.sessionID = "s-1"; $0.clientID = "c1"; $0.name = "alice \"a\""; $0.focusTabID = "t-1" },
                    .with { $0.sessionID = "s-2"; $0.clientID = "c2"; $0.name = "bench" },
                ]
            }
        })
        // No message at all.
        messages.append(Tabsync_V1_ServerMessage())
        return messages
    }()

    // MARK: tests

    @Test("every message kind, encoded by the generated code, scans as it decodes", arguments: WireFormat.allCases)
    func everyMessageAgrees(format: WireFormat) throws {
        for message in Self.messages {
            try checkAgreement(message, format)
        }
    }

    @Test("the kinds the bench relies on scan as expected", arguments: WireFormat.allCases)
    func benchAnswers(format: WireFormat) {
        #expect(Self.scan(format.encode(Self.applied(client: "c12", seq: 3, op: Self.ops[0])), format)
                == .applied(client: 12, seq: 3))
        #expect(Self.scan(format.encode(Self.applied(client: "c5", seq: .max, version: .max)), format)
                == .applied(client: 5, seq: .max))
        #expect(Self.scan(format.encode(Self.applied(client: "", seq: 0)), format) == .applied(client: nil, seq: 0))
        let presence = Tabsync_V1_ServerMessage.with { $0.presence = Tabsync_V1_Presence() }
        let welcome = Tabsync_V1_ServerMessage.with { $0.welcome = .with { $0.lastSeq = 4 } }
        let rejected = Tabsync_V1_ServerMessage.with { $0.rejected = .with { $0.seq = 4; $0.code = .tabGone } }
        let error = Tabsync_V1_ServerMessage.with { $0.error = .with { $0.code = .protocolError } }
        #expect(Self.scan(format.encode(presence), format) == .presence)
        #expect(Self.scan(format.encode(welcome), format) == .other)
        #expect(Self.scan(format.encode(rejected), format) == .other)
        #expect(Self.scan(format.encode(error), format) == .other)
    }

    @Test("64-bit values are JSON strings, and the scan reads every digit")
    func jsonSeqIsAString() {
        let text = String(decoding: WireFormat.json.encode(Self.applied(client: "c1", seq: .max, version: .max)), as: UTF8.self)
        #expect(text.contains(#""seq":"18446744073709551615""#))
        #expect(text.hasPrefix(#"{"applied":{"#))
    }

    // MARK: protobuf the generated encoder does not write, but a protobuf writer may

    /// One protobuf field, by hand: the tag, then the value as its wire type wants it.
    static func field(_ number: Int, varint value: UInt64) -> [UInt8] { varint(UInt64(number << 3)) + varint(value) }
    static func field(_ number: Int, bytes value: [UInt8]) -> [UInt8] {
        varint(UInt64(number << 3 | 2)) + varint(UInt64(value.count)) + value
    }
    static func field(_ number: Int, fixed64 value: UInt64) -> [UInt8] {
        varint(UInt64(number << 3 | 1)) + (0..<8).map { UInt8(truncatingIfNeeded: value >> (8 * $0)) }
    }
    static func field(_ number: Int, fixed32 value: UInt32) -> [UInt8] {
        varint(UInt64(number << 3 | 5)) + (0..<4).map { UInt8(truncatingIfNeeded: value >> (8 * $0)) }
    }
    static func varint(_ value: UInt64) -> [UInt8] {
        var value = value
        var bytes: [UInt8] = []
        while value >= 0x80 {
            bytes.append(UInt8(value & 0x7F) | 0x80)
            value >>= 7
        }
        return bytes + [UInt8(value)]
    }

    /// Fields of numbers the schema does not have, of every wire type; the length-delimited one
    /// holds bytes that read as a client id and a seq.
    static let unknownFields: [UInt8] =
        field(20, varint: .max) + field(21, fixed64: 0x0102_0304_0506_0708) + field(1000, fixed32: 0xFFFF_FFFF)
        + field(22, bytes: field(3, bytes: Array("c9".utf8)) + field(4, varint: 99))

    @Test("an Applied with unknown fields before, between and after the known ones scans as the generated code decodes it")
    func unknownFieldsInApplied() throws {
        let known = try Self.applied(client: "c12", seq: 300, op: Self.ops[1]).applied.serializedBytes() as [UInt8]
        let seqOnly = Self.field(4, varint: 300)
        let clientOnly = Self.field(3, bytes: Array("c12".utf8))
        let bodies: [(bytes: [UInt8], unknown: Bool)] = [
            (Self.unknownFields + known, true),
            (known + Self.unknownFields, true),
            (clientOnly + Self.unknownFields + seqOnly, true),
            (seqOnly + Self.unknownFields + clientOnly, true),
            // Repeated scalar fields: the last one wins.
            (Self.field(4, varint: 1) + known + Self.field(4, varint: 301) + Self.field(3, bytes: Array("c13".utf8)), false),
        ]
        for (body, unknown) in bodies {
            // The generated code keeps unknown fields when it reads them, and writes them back.
            let applied = try Tabsync_V1_Applied(serializedBytes: body)
            #expect(applied.unknownFields.data.count == (unknown ? Self.unknownFields.count : 0))
            let reencoded = WireFormat.proto.encode(Tabsync_V1_ServerMessage.with { $0.applied = applied })
            let byHand = Self.field(2, bytes: body)
            for bytes in [reencoded, byHand] {
                let decoded = try WireFormat.proto.decodeServerMessage(bytes)
                #expect(decoded.applied.clientID.hasPrefix("c1"))
                #expect(Self.scan(bytes, .proto) == Self.expected(decoded))
            }
        }
    }

    @Test("what the scan does not recognise is .other, never a wrong Applied")
    func malformedIsOther() throws {
        let good = WireFormat.proto.encode(Self.applied(client: "c1", seq: 5))
        // Cut short, one byte too many, an unknown envelope field next to it, a bad wire type.
        for bytes in [Array(good.dropLast()), good + [0], good + Self.field(9, varint: 1), [0x13] + good.dropFirst(), []] {
            #expect(Self.scan(bytes, .proto) == .other)
        }
        // Whatever the scan calls .other the bench decodes fully; an Applied there counts the same.
        #expect(try WireFormat.proto.decodeServerMessage(good + Self.field(9, varint: 1)).applied.seq == 5)
        #expect(Self.scan(Array("{}".utf8), .json) == .other)
        #expect(Self.scan(Array(#"{"welcome":{"missed":[{"clientId":"c1","seq":"5"}]}}"#.utf8), .json) == .other)
    }

    @Test("mirror messages carry the sender and seq the generator put in them")
    func mirrorRoundTrip() {
        for (client, seq, size) in [(0, UInt64(1), 32), (12, 34, 160), (59_999, UInt64.max, 40)] {
            let message = WireScan.mirrorMessage(client: client, seq: seq, size: size)
            #expect(message.count == max(size, "m\(client) \(seq) ".utf8.count))
            #expect(message.withUnsafeBytes { WireScan.mirror($0) } == .applied(client: client, seq: seq))
        }
        #expect(Array("hello".utf8).withUnsafeBytes { WireScan.mirror($0) } == .other)
    }
}
