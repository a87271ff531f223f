import Foundation
import TabsyncCore
import TabsyncProto
@testable import TabsyncServer
import TabsyncTestServer
import TabsyncTestSupport
import Testing

/// Issue 39's case over real sockets: under `--max-ops-per-second-per-sub 2`, a client closing
/// many tabs at once is refused `RATE_LIMITED` until the server closes it 1008. Every seq the
/// server consumed is answered before that close, the one that tipped it included, and `Welcome`
/// names the per-user rate (docs/design.md, "Submit, seqs and dedup", "Close codes").
@Suite("Answers before the close", .serialized)
struct ServerAnswerTests {
    @Test func aBulkCloseUnderThePerSubRateIsAnsweredSeqBySeqBeforeThe1008() async throws {
        let verifier = try TokenVerifier(keys: [ServerAuthTests.key1])
        let server = try TestServer {
            $0.accessTokens = verifier
            $0.quotas = .init(maxOpsPerSecondPerSubject: 2)
            $0.rateLimitStrikes = 2
        }
        defer { server.stop() }
        let token = try await ServerAuthTests.token("*", .editor, sub: "alice")
        let (c, welcome) = try ServerAuthTests.joined(server, "bulk", token: token, clientId: "closer")
        #expect(welcome.limits.maxOpsPerSecondPerUser == 2)
        #expect(welcome.limits.maxOpsPerSecond == UInt32(server.configuration.limits.maxOpsPerSecond))
        let tabs = (1...22).map { Tab(id: "t\($0)") }
        try c.submit(.replace(tabs: tabs))
        #expect(try c.nextApplied().version == 1)

        // Close 20 tabs at once, again and again as the extension would, until the server closes.
        var answered: [UInt64] = []
        var removed: Set<String> = []
        var seq: UInt64 = 1
        var closed: UInt16?
        let deadline = Date().addingTimeInterval(30)
        while closed == nil, Date() < deadline {
            do {
                for tab in tabs.prefix(20) where !removed.contains(tab.id) {
                    seq += 1
                    try c.submit(.remove(tabId: tab.id), seq: seq)
                }
            } catch {
                // The server closed while we wrote: read what it sent before it went.
            }
            let readUntil = Date().addingTimeInterval(0.4)
            while closed == nil, Date() < readUntil {
                guard let frame = try? c.socket.receive(timeout: 0.1) else { continue }
                switch frame {
                case .close(let code, _):
                    closed = code
                case .text(let text):
                    switch try WireFormat.json.decodeServerMessage(Array(text.utf8)).message {
                    case .applied(let a) where a.clientID == "closer":
                        answered.append(a.seq)
                        if case .remove(let id) = try AppliedOp(a).op { removed.insert(id) }
                    case .rejected(let r):
                        #expect(r.code == .rateLimited, "\(r)")
                        answered.append(r.seq)
                    default:
                        break
                    }
                default:
                    break
                }
            }
        }
        #expect(closed == 1008)
        let (_, again) = try ServerAuthTests.joined(server, "bulk", token: token, clientId: "closer")
        #expect(again.lastSeq > 1)
        #expect(answered == Array(2...again.lastSeq),
                "every seq consumed is answered, in order, before the close: answered \(answered), lastSeq \(again.lastSeq)")
    }
}
