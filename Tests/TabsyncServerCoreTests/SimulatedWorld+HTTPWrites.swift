import Foundation
import TabsyncCore
@testable import TabsyncServerCore

/// HTTP writes in the simulated world (docs/design.md, "HTTP writes"): a writer POSTs a body of
/// ops under one `Idempotency-Key` to the workspace's home node and sends the same key and body
/// again whenever it has no answer: the answer was lost (a seeded fault), the node crashed with the
/// request in it, or the answer was a 503. The oracle knows every op as sent under `http:KEY`, so
/// an op stored twice, or one never sent, fails the world as a session's would; at the end every
/// write was answered 200, each op of it stored exactly once at the version its answer names, and
/// every 200 answer of one key was the same, but for `ANSWER_GONE` in every op's place once its ops
/// left the log window (docs/design.md, "HTTP writes": consumed, nothing applied again).
struct SimWrite {
    let key: String
    let body: [UInt8]
    let clientId: String
    let seqs: [UInt64]
    /// The request in flight: its node and request id.
    var pending: (node: Int, request: RequestID)?
    /// Each op's result in the first 200 answer (a JSON object with sorted keys); nil: none yet.
    var results: [String]?
    var answered: Bool { results != nil }
    var sends = 0
}

extension SimulatedWorld {
    /// The chance a node's answer to an HTTP write is lost on its way (while faults are on).
    static let writeAnswerLoss = 0.3

    /// A new write (sometimes), or the same key and body sent again by a writer with no answer yet
    /// (or, now and then, by one that has it: its repeat must be answered the same).
    mutating func httpWriteStep() {
        if httpWrites.count < 8 && (httpWrites.isEmpty || rng.chance(0.3)) {
            let k = httpWrites.count
            let count = rng.int(1...3)
            let ops = (0..<count).map { i in #"{"add":{"tab":{"id":"h\#(k)-\#(i)","title":"write \#(k)"}}}"# }
            let body = Array(#"{"ops":[\#(ops.joined(separator: ","))]}"#.utf8)
            let key = "sim-\(seed)-\(k)"
            guard case .success(let start) = ServerCore.parseWrite(key: key, body: body, maxOps: ServerCore.maxWriteOps) else {
                return fail("the simulation's write \(key) does not parse")
            }
            let seqs = (1...UInt64(start.ops.count)).map { start.seqBase + $0 }
            for (seq, op) in zip(seqs, start.ops) {
                if let problem = oracle.sent(client: "http:" + key, seq: seq, baseVersion: 0, op: try? op.get()) { fail(problem) }
            }
            httpWrites.append(SimWrite(key: key, body: body, clientId: "http:" + key, seqs: seqs))
        }
        let waiting = httpWrites.indices.filter { httpWrites[$0].pending == nil && (!httpWrites[$0].answered || rng.chance(0.1)) }
        guard !waiting.isEmpty else { return }
        sendWrite(rng.pick(waiting))
    }

    /// Sends write `w` (again) to the home node.
    mutating func sendWrite(_ w: Int) {
        let request = nextId
        nextId += 1
        httpWrites[w].pending = (home, request)
        httpWrites[w].sends += 1
        stats.httpSends += 1
        let (key, body, node) = (httpWrites[w].key, httpWrites[w].body, home)
        note("write \(key) sent to node \(node) as request \(request)")
        handle(node, .writeRequested(request, workspaceId: workspace, key: key, body: body, bearerToken: nil))
    }

    /// A node answered request `request`: true when it was a write's.
    mutating func writeAnswered(_ n: Int, _ request: RequestID, _ response: HTTPResponse) -> Bool {
        guard let w = httpWrites.firstIndex(where: { $0.pending?.node == n && $0.pending?.request == request }) else { return false }
        httpWrites[w].pending = nil
        if store.faults && rng.chance(Self.writeAnswerLoss) {
            stats.httpAnswersLost += 1
            let key = httpWrites[w].key
            note("the answer to write \(key) is lost")
            return true
        }
        switch response.status {
        case 200:
            let key = httpWrites[w].key
            guard let results = Self.results(response.body), results.count == httpWrites[w].seqs.count else {
                fail("write \(key) answered 200 \(String(decoding: response.body, as: UTF8.self))")
                return true
            }
            if results.contains(where: Self.isAnswerGone) { stats.httpAnswersGone += 1 }
            if let first = httpWrites[w].results {
                for (i, (before, now)) in zip(first, results).enumerated() where now != before && !Self.isAnswerGone(now) {
                    fail("write \(key) op \(i) answered \(now) after \(before)")
                }
            } else {
                httpWrites[w].results = results
            }
        case 503:
            stats.httpRetryLater += 1
        default:
            fail("write \(httpWrites[w].key) answered \(response.status): \(String(decoding: response.body, as: UTF8.self))")
        }
        return true
    }

    /// A node crashed: the writes in it are never answered, and will be sent again.
    mutating func writesLost(at n: Int) {
        for w in httpWrites.indices where httpWrites[w].pending?.node == n { httpWrites[w].pending = nil }
    }

    /// Settling: every write without an answer and not in flight is sent again. True when one was.
    mutating func resendUnansweredWrites() -> Bool {
        var sent = false
        for w in httpWrites.indices where !httpWrites[w].answered && httpWrites[w].pending == nil {
            sendWrite(w)
            sent = true
        }
        return sent
    }

    var writesSettled: Bool { httpWrites.allSatisfy { $0.answered && $0.pending == nil } }

    /// Each result of a write's 200 body as JSON with sorted keys.
    static func results(_ body: [UInt8]) -> [String]? {
        guard let list = (try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any])?["results"] as? [[String: Any]] else {
            return nil
        }
        return list.map { String(decoding: (try? JSONSerialization.data(withJSONObject: $0, options: [.sortedKeys])) ?? Data(), as: UTF8.self) }
    }

    static func isAnswerGone(_ result: String) -> Bool { result.contains(#""code":"\#(ErrorCode.answerGone.wireName)""#) }

    /// The end: each op of every write stored once (the oracle refuses a seq consumed twice) at the
    /// version its first 200 answer names; one answered `ANSWER_GONE` was consumed.
    mutating func checkWrites() {
        for write in httpWrites {
            guard let results = write.results else { return fail("write \(write.key) was never answered 200") }
            for (seq, result) in zip(write.seqs, results) {
                let stored = oracle.appliedAt[RuleOracle.ClientSeq(client: write.clientId, seq: seq)]
                let version = (try? JSONSerialization.jsonObject(with: Data(result.utf8)) as? [String: Any])?["version"] as? String
                if Self.isAnswerGone(result) {
                    if (oracle.lastConsumed[write.clientId] ?? 0) < seq { fail("write \(write.key) seq \(seq) answered ANSWER_GONE, never consumed") }
                } else if let version = version.flatMap(UInt64.init) {
                    if stored != version { fail("write \(write.key) seq \(seq) answered v\(version), stored at \(stored.map { "v\($0)" } ?? "no version")") }
                } else if let stored {
                    fail("write \(write.key) seq \(seq) answered \(result), yet stored at v\(stored)")
                }
            }
        }
    }
}
