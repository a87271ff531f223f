import Foundation
import Testing
import TabsyncCore
@testable import TabsyncServerCore

/// HTTP writes' rate in the core (docs/design.md, "HTTP writes", rate; ServerCore+WriteRate.swift),
/// on the harness's clock: a write past the bucket is 429 with the seconds to wait, a repeat of an
/// answered key is not charged, the bucket refills at the rate, and a write larger than the rate
/// passes on a full bucket and leaves debt.
@Suite struct WriteRateTests {
    /// A body of `count` adds of tabs `prefix0…`.
    static func body(_ prefix: String, _ count: Int) -> [UInt8] {
        Array(("{\"ops\":[" + (0..<count).map { "{\"add\":{\"tab\":{\"id\":\"\(prefix)\($0)\"}}}" }.joined(separator: ",") + "]}").utf8)
    }

    /// The answer to write `id` of `body` under `key`, committing what it sequenced.
    static func write(_ h: inout CoreHarness, _ id: RequestID, _ key: String, _ body: [UInt8]) -> HTTPResponse? {
        var actions = h.handle(.writeRequested(id, workspaceId: "w", key: key, body: body, bearerToken: nil))
        while true {
            for case .respond(let r, let response) in actions where r == id { return response }
            guard let batch = actions.commitId else { return nil }
            actions = h.handle(.committed(batch: batch, .stored, duration: .zero))
        }
    }

    static func loaded(rate: Int) -> CoreHarness {
        var h = CoreHarness { $0.limits.maxOpsPerSecond = rate }
        h.hello(1, client: "c1")
        h.handle(.loaded(workspaceId: "w", .success(nil)))
        return h
    }

    @Test func aWritePastTheRateIs429AndARepeatIsNotCharged() {
        var h = Self.loaded(rate: 10)
        let first = Self.write(&h, 701, "ten", Self.body("a", 10))
        #expect(first?.status == 200)
        let over = Self.write(&h, 702, "one", Self.body("b", 1))
        #expect(over?.status == 429 && over?.headers == "Retry-After: 1\r\n")
        let text = String(decoding: over?.body ?? [], as: UTF8.self)
        #expect(text.contains("RATE_LIMITED") && text.contains("--max-ops-per-second"))
        #expect(Self.write(&h, 703, "ten", Self.body("a", 10)) == first, "a repeat is answered while the bucket is empty")
        h.advance(.milliseconds(50))
        #expect(Self.write(&h, 704, "one", Self.body("b", 1))?.status == 429, "half a token")
        h.advance(.milliseconds(50))
        // Charged, the repeat would have left 10 tokens of debt: still refused here.
        #expect(Self.write(&h, 705, "one", Self.body("b", 1))?.status == 200)
        #expect(h.core.liveWorkspace("w")?.version == 11)
    }

    @Test func aWriteLargerThanTheRatePassesOnAFullBucketAndLeavesDebt() {
        var h = Self.loaded(rate: 10)
        #expect(Self.write(&h, 701, "big", Self.body("a", 25))?.status == 200)
        // 15 tokens of debt: a 1-op write waits (1 + 15) / 10 s, rounded up.
        #expect(Self.write(&h, 702, "one", Self.body("b", 1))?.headers == "Retry-After: 2\r\n")
        h.advance(.milliseconds(1_600))
        #expect(Self.write(&h, 703, "one", Self.body("b", 1))?.status == 200)
    }
}
