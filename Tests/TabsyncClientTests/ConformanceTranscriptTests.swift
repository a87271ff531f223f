import Foundation
import Testing
import TabsyncClient
import TabsyncCore
import TabsyncProto
import TabsyncTestSupport

#if canImport(Glibc)
import Glibc
#endif

/// The conformance transcripts (Tests/conformance/README.md) replayed to the Swift client:
/// Tests/conformance/playback.py plays the server's recorded frames over a real WebSocket, the
/// client runs unmodified (JSON frames), and this runner takes the transcript's `do` steps and
/// checks its `state` steps, telling the playback each one it saw (lock-step); an HTTP write
/// (`do` write, `result`) goes through ``HTTPWriter`` to the playback's HTTP side. The JS and
/// Python clients replay the same files in their own runners.
@Suite(.serialized) struct ConformanceTranscriptTests {
    static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("conformance")

    static var transcripts: [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.appendingPathComponent("transcripts").path)) ?? []
        return names.filter { $0.hasSuffix(".json") }.sorted()
    }

    /// The `state` step's fields, as `ClientState` shows them.
    struct Shown: Equatable, CustomStringConvertible {
        var version: UInt64?
        var epoch: String?
        var tabs: [String]?
        var active: String?
        var pending: Int?

        init(_ step: [String: Any]) {
            version = (step["version"] as? NSNumber).map { $0.uint64Value }
            epoch = step["epoch"] as? String
            tabs = step["tabs"] as? [String]
            active = step["active"] as? String ?? ""
            pending = (step["pending"] as? NSNumber).map { $0.intValue }
        }

        init(_ state: ClientState) {
            version = state.confirmed.version
            epoch = state.confirmed.epoch
            tabs = state.confirmed.tabs.map(\.id)
            active = state.confirmed.activeTabId
            pending = state.pending.count + state.held.count + state.unsequenced
        }

        /// True when `state` shows every field this step names.
        func isShown(by state: ClientState) -> Bool {
            let got = Shown(state)
            return (version == nil || version == got.version) && (epoch == nil || epoch == got.epoch)
                && (tabs == nil || tabs == got.tabs) && (active == nil || active == got.active)
                && (pending == nil || pending == got.pending)
        }

        var description: String {
            "version \(version.map(String.init) ?? "-") epoch \(epoch ?? "-") tabs \(tabs ?? []) active \(active ?? "-") pending \(pending.map(String.init) ?? "-")"
        }
    }

    /// A `result` step: the write's results, or the status of its refusal.
    enum Written: Equatable {
        case results([HTTPWriter.Result])
        case status(Int)
        case failed(String)

        init(_ writer: HTTPWriter, _ workspace: String, _ ops: [Tabsync_V1_Op], _ key: String) async {
            do throws(HTTPWriter.Failure) {
                self = .results(try await writer.write(workspace: workspace, ops: ops, key: key))
            } catch {
                if case .refused(let status, _, _) = error { self = .status(status) } else { self = .failed("\(error)") }
            }
        }

        init(_ step: [String: Any]) throws {
            if let status = step["status"] as? Int { self = .status(status); return }
            self = .results(try #require(step["results"] as? [[String: Any]]).map { item in
                if let error = item["error"] as? [String: Any] {
                    return .refused(code: error["code"] as? String ?? "", message: error["message"] as? String ?? "")
                }
                let op = try Tabsync_V1_Op(jsonUTF8Data: JSONSerialization.data(withJSONObject: try #require(item["op"])))
                return .applied(version: try #require((item["version"] as? String).flatMap(UInt64.init)), op: op)
            })
        }
    }

    @Test(arguments: transcripts) func transcript(_ name: String) async throws {
        let path = Self.directory.appendingPathComponent("transcripts").appendingPathComponent(name).path
        let transcript = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path))) as? [String: Any])
        let client = try #require(transcript["client"] as? [String: String])
        let steps = try #require(transcript["steps"] as? [[String: Any]])

        let playback = Process()
        let output = Pipe()
        let input = Pipe()
        playback.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        playback.arguments = ["python3", Self.directory.appendingPathComponent("playback.py").path, path]
        playback.standardOutput = output
        playback.standardInput = input
        try playback.run()
        defer {
            kill(playback.processIdentifier, SIGKILL)
            var status: Int32 = 0
            _ = waitpid(playback.processIdentifier, &status, 0)
        }
        // `HTTP <port>` (its HTTP side), then `PORT <port>` (its WebSocket side).
        let first = output.firstLine(within: scaled(.seconds(30)))
        let httpPort = try #require(first.hasPrefix("HTTP ") ? Int(first.dropFirst(5)) : nil, "the playback said \(first)")
        let second = output.firstLine(within: scaled(.seconds(30)))
        let port = try #require(second.hasPrefix("PORT ") ? Int(second.dropFirst(5)) : nil, "the playback said \(second)")

        // A line to the playback; false when it has ended (it failed: its verdict is in `output`).
        func tell(_ line: String) -> Bool {
            (try? input.fileHandleForWriting.write(contentsOf: Data((line + "\n").utf8))) != nil
        }

        let session = try TabsyncClient(.init(
            url: ServerURL(usesTLS: false, host: "127.0.0.1", port: port), workspace: try #require(client["workspace"]),
            clientId: try #require(client["clientId"]), clientName: "", format: .json,
            backoff: Backoff(initial: .milliseconds(20), maximum: .milliseconds(200))))
        if steps.contains(where: { $0["accept"] != nil }) { session.start() }
        defer { session.close() }
        let writer = try HTTPWriter(.init(url: ServerURL(usesTLS: false, host: "127.0.0.1", port: httpPort), deadline: .seconds(30)))
        var writes: [Task<Written, Never>] = []
        for (index, step) in steps.enumerated() {
            if let write = (step["do"] as? [String: Any])?["write"] as? [String: Any] {
                let ops = try #require(write["ops"] as? [Any]).map { try Tabsync_V1_Op(jsonUTF8Data: JSONSerialization.data(withJSONObject: $0)) }
                let key = try #require(write["key"] as? String)
                let workspace = try #require(client["workspace"])
                writes.append(Task { await Written(writer, workspace, ops, key) })
            } else if let expected = step["result"] as? [String: Any] {
                let got = await writes.removeFirst().value
                #expect(got == (try Written(expected)), "step \(index)")
            } else if let action = step["do"] as? [String: Any] {
                let json = try JSONSerialization.data(withJSONObject: try #require(action["submit"]))
                let op = try Operation(Tabsync_V1_Op(jsonUTF8Data: json))
                session.submit(op)
            } else if let expected = step["state"] as? [String: Any] {
                let want = Shown(expected)
                do {
                    _ = try await session.waitUntil(timeout: scaled(.seconds(20))) { want.isShown(by: $0) }
                } catch {
                    _ = tell("PROGRESS")
                    let said = output.firstLine(within: .seconds(5))
                    Issue.record("step \(index): want \(want), got \(Shown(session.state)); the playback: \(said)")
                    return
                }
                guard tell("STATE \(index)") else {
                    Issue.record("step \(index): the playback ended before it: \(output.firstLine(within: .seconds(5)))")
                    return
                }
            }
        }
        let verdict = output.firstLine(within: scaled(.seconds(40)))
        #expect(verdict == "OK", "the playback: \(verdict)")
    }
}
