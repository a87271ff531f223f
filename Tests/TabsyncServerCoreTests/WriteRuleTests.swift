import Foundation
import Testing
import TabsyncCore
import TabsyncProto
import TabsyncStore
@testable import TabsyncServerCore

/// HTTP writes' rules in the core (docs/design.md, "HTTP writes"; ServerCore+Write.swift), with no
/// socket: answered only once stored, a repeat answered the same with nothing applied, another body
/// under a used key 422, a store failure 503 with `Retry-After` and nothing consumed, a bad request
/// refused whole.
@Suite struct WriteRuleTests {
    static let request: RequestID = 700
    static let body = Array(#"{"ops":[{"add":{"tab":{"id":"a"}}},{"add":{"tab":{"id":"b"}}}]}"#.utf8)

    static func write(_ body: [UInt8] = body, key: String? = "k") -> ServerCore.Event {
        .writeRequested(request, workspaceId: "w", key: key, body: body, bearerToken: nil)
    }

    /// The response sent to the write, if any.
    static func answer(_ actions: [ServerCore.Action]) -> HTTPResponse? {
        for case .respond(let r, let response) in actions where r == request { return response }
        return nil
    }

    static func text(_ response: HTTPResponse?) -> String { response.map { String(decoding: $0.body, as: UTF8.self) } ?? "" }

    /// A core with `w` loaded and empty, kept in memory by session 1.
    static func loaded() -> CoreHarness {
        var h = CoreHarness()
        h.hello(1, client: "c1")
        h.handle(.loaded(workspaceId: "w", .success(nil)))
        return h
    }

    @Test func theAnswerWaitsUntilTheOpsAreStored() {
        var h = Self.loaded()
        let sent = h.handle(Self.write())
        #expect(Self.answer(sent) == nil, "nothing is answered before the store says stored")
        let stored = h.handle(.committed(batch: sent.commitId!, .stored, duration: .zero))
        let answer = Self.answer(stored)
        #expect(answer?.status == 200)
        #expect(Self.text(answer).contains(#""version":"1""#) && Self.text(answer).contains(#""version":"2""#))
        #expect(h.core.liveWorkspace("w")?.version == 2)
    }

    /// A repeat that comes while the first send's load of the workspace is under way (a client that
    /// lost the answer and tried again at once) waits for the load: it is not refused 503.
    @Test func aWriteThatComesWhileTheWorkspaceLoadsWaitsForTheLoad() {
        var h = CoreHarness()
        func answer(_ actions: [ServerCore.Action], _ id: RequestID) -> HTTPResponse? {
            for case .respond(let r, let response) in actions where r == id { return response }
            return nil
        }
        let first = h.handle(.writeRequested(701, workspaceId: "w", key: "k", body: Self.body, bearerToken: nil))
        let second = h.handle(.writeRequested(702, workspaceId: "w", key: "k", body: Self.body, bearerToken: nil))
        #expect(answer(first, 701) == nil && answer(second, 702) == nil, "\(Self.text(answer(second, 702)))")
        var actions = h.handle(.loaded(workspaceId: "w", .success(nil)))
        var answers: [RequestID: HTTPResponse] = [:]
        while let batch = actions.commitId, answers.count < 2 {
            for id: RequestID in [701, 702] { if let a = answer(actions, id) { answers[id] = a } }
            actions = h.handle(.committed(batch: batch, .stored, duration: .zero))
        }
        for id: RequestID in [701, 702] { if let a = answer(actions, id) { answers[id] = a } }
        #expect(answers[701]?.status == 200)
        #expect(answers[702] == answers[701])
        #expect(h.core.liveWorkspace("w")?.version == 2, "the repeat applied nothing")
    }

    @Test func aRepeatIsAnsweredTheSameAndAppliesNothing() {
        var h = Self.loaded()
        let sent = h.handle(Self.write())
        let first = Self.answer(h.handle(.committed(batch: sent.commitId!, .stored, duration: .zero)))
        let again = h.handle(Self.write())
        let second = Self.answer(again) ?? again.commitId.flatMap {
            Self.answer(h.handle(.committed(batch: $0, .stored, duration: .zero)))
        }
        #expect(second == first)
        #expect(h.core.liveWorkspace("w")?.version == 2, "the repeat applied nothing")
    }

    @Test func anotherBodyUnderAUsedKeyIs422AndAppliesNothing() {
        var h = Self.loaded()
        let first = h.handle(Self.write())
        h.handle(.committed(batch: first.commitId!, .stored, duration: .zero))
        for other in [#"{"ops":[{"add":{"tab":{"id":"c"}}}]}"#, #"{"ops":[{"add":{"tab":{"id":"a"}}},{"add":{"tab":{"id":"c"}}}]}"#] {
            let answer = Self.answer(h.handle(Self.write(Array(other.utf8))))
            #expect(answer?.status == 422, "\(other)")
        }
        #expect(h.core.liveWorkspace("w")?.version == 2)
        // Another key is another write.
        let sent = h.handle(Self.write(Array(#"{"ops":[{"add":{"tab":{"id":"c"}}}]}"#.utf8), key: "k2"))
        #expect(Self.answer(h.handle(.committed(batch: sent.commitId!, .stored, duration: .zero)))?.status == 200)
        #expect(h.core.liveWorkspace("w")?.version == 3)
    }

    @Test func aStoreFailureIs503WithRetryAfterAndTheRetryApplies() {
        var h = Self.loaded()
        let sent = h.handle(Self.write())
        let failed = h.handle(.committed(batch: sent.commitId!, .failed(.writeFailed("disk")), duration: .zero))
        let answer = Self.answer(failed)
        #expect(answer?.status == 503)
        #expect(answer?.headers.contains("Retry-After: 1") == true)
        h.handle(.loaded(workspaceId: "w", .success(nil)))
        let retry = h.handle(Self.write())
        #expect(Self.answer(h.handle(.committed(batch: retry.commitId!, .stored, duration: .zero)))?.status == 200)
        #expect(h.core.liveWorkspace("w")?.version == 2)
    }

    @Test func aBadOpGetsItsErrorInPlace() {
        var h = Self.loaded()
        let body = Array(#"{"ops":[{"add":{"tab":{"id":"a"}}},{"remove":{"tabId":"gone"}},{"nonsense":1}]}"#.utf8)
        let sent = h.handle(Self.write(body))
        let answer = Self.answer(h.handle(.committed(batch: sent.commitId!, .stored, duration: .zero)))
        #expect(answer?.status == 200)
        let results = (try? JSONSerialization.jsonObject(with: Data(answer?.body ?? [])) as? [String: Any])?["results"] as? [[String: Any]]
        #expect(results?.count == 3)
        #expect(results?[0]["version"] as? String == "1")
        #expect((results?[1]["error"] as? [String: Any])?["code"] as? String == "TAB_GONE")
        #expect((results?[2]["error"] as? [String: Any])?["code"] as? String == "INVALID_ARGUMENT")
    }

    @Test func aBadRequestIsRefusedWhole() {
        var h = Self.loaded()
        #expect(Self.answer(h.handle(Self.write(key: nil)))?.status == 400)
        #expect(Self.answer(h.handle(Self.write(key: String(repeating: "k", count: 65))))?.status == 400)
        #expect(Self.answer(h.handle(Self.write(key: "a b")))?.status == 400)
        #expect(Self.answer(h.handle(Self.write(Array("[]".utf8))))?.status == 400)
        #expect(Self.answer(h.handle(Self.write(Array(#"{"ops":[]}"#.utf8))))?.status == 400)
        #expect(h.core.liveWorkspace("w")?.version == 0)
    }

    @Test func theSeqBaseIsAStableFingerprintBelow2To56() {
        #expect(ServerCore.seqBase(of: Self.body) == ServerCore.seqBase(of: Self.body))
        #expect(ServerCore.seqBase(of: Self.body) != ServerCore.seqBase(of: Self.body + [32]))
        #expect(ServerCore.seqBase(of: Self.body) < 1 << 56)
        #expect(ServerCore.seqBase(of: Self.body) & 0xFFFF == 0)
    }
}
