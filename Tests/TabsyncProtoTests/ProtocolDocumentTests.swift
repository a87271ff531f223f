import Foundation
import Testing
import TabsyncCore
import TabsyncProto

/// proto/README.md's example exchanges are real: every `→` line is a ClientMessage and every `←`
/// line a ServerMessage in the JSON encoding, each re-encodes to exactly the line written (field
/// order, compactness, 64-bit numbers as strings), and every op in them converts to core.
@Suite struct ProtocolDocumentTests {
    struct Line: CustomTestStringConvertible, Sendable {
        var number: Int
        var fromClient: Bool
        var json: String
        var testDescription: String { "README.md:\(number)" }
    }

    static let readmePath = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("proto/README.md").path

    static let lines: [Line] = {
        guard let text = try? String(contentsOfFile: readmePath, encoding: .utf8) else { return [] }
        var lines: [Line] = []
        for (index, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = String(raw)
            guard let arrow = line.firstIndex(where: { $0 == "→" || $0 == "←" }),
                  line[..<arrow].allSatisfy({ $0.isLetter || $0.isNumber || $0 == " " }),
                  let brace = line[arrow...].firstIndex(of: "{")
            else { continue }
            lines.append(Line(number: index + 1, fromClient: line[arrow] == "→", json: String(line[brace...])))
        }
        return lines
    }()

    @Test func readmeHasExampleExchanges() {
        #expect(Self.lines.count >= 30, "found \(Self.lines.count) example lines in \(Self.readmePath)")
        #expect(Self.lines.contains { $0.fromClient } && Self.lines.contains { !$0.fromClient })
    }

    @Test(arguments: lines)
    func exampleLineDecodesAndReencodesExactly(line: Line) throws {
        let bytes = Array(line.json.utf8)
        if line.fromClient {
            let message = try WireFormat.json.decodeClientMessage(bytes)
            #expect(message.message != nil)
            if case .submit(let submit)? = message.message {
                _ = try Operation(submit.op)
            }
            #expect(String(decoding: WireFormat.json.encode(message), as: UTF8.self) == line.json)
        } else {
            let message = try WireFormat.json.decodeServerMessage(bytes)
            #expect(message.message != nil)
            switch message.message {
            case .applied(let applied)?: _ = try AppliedOp(applied)
            case .welcome(let welcome)?: _ = try welcome.missedOps()
            default: break
            }
            #expect(String(decoding: WireFormat.json.encode(message), as: UTF8.self) == line.json)
        }
    }
}
