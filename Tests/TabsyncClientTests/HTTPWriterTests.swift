import TabsyncClient
import TabsyncCore
import TabsyncProto
import TabsyncTestServer
import TabsyncTestSupport
import Testing

/// ``HTTPWriter`` against the real server on real sockets (the lost answer is the conformance
/// transcript `http-write-repeated`'s): a write is applied once and answered again the same,
/// also after a restart of the same SQLite store; another body under its key is 422, not retried.
@Suite struct HTTPWriterTests {
    static func add(_ id: String) throws -> Tabsync_V1_Op {
        try Tabsync_V1_Op(jsonString: #"{"add": {"tab": {"id": "\#(id)", "title": "\#(id.uppercased())"}}}"#)
    }

    @Test func aWriteIsAppliedOnceAndAnsweredTheSameAcrossARestart() async throws {
        let server = try TestServer(.sqlite)
        defer { server.stop() }
        let writer = try HTTPWriter(.init(url: server.url, deadline: .seconds(60)))
        let ops = [try Self.add("a"), try Self.add("b")]
        let first = try await writer.write(workspace: "team", ops: ops, key: "open-ab")
        guard case .applied(let version, let op)? = first.last else {
            Issue.record("not applied: \(first)")
            return
        }
        #expect(version == 2 && op.add.tab.id == "b" && !op.add.tab.key.isEmpty, "the op as stored, with its key")
        #expect(try await writer.write(workspace: "team", ops: ops, key: "open-ab") == first)
        try server.restart()
        #expect(try await writer.write(workspace: "team", ops: ops, key: "open-ab") == first, "the store keeps the key")
        await #expect(throws: HTTPWriter.Failure.refused(
            status: 422, code: "INVALID_ARGUMENT", message: "Idempotency-Key open-ab was used with another body")) {
            _ = try await writer.write(workspace: "team", ops: [try Self.add("c")], key: "open-ab")
        }
        let reader = try server.client("reader", workspace: "team")
        reader.start()
        defer { reader.close() }
        let state = try await reader.waitUntil(timeout: scaled(.seconds(20))) { $0.connection == .ready }
        #expect(state.confirmed.version == 2 && state.confirmed.tabs.map(\.id) == ["a", "b"], "applied once")
    }
}
