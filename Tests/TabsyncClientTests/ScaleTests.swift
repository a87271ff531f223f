import Foundation
import Testing
import TabsyncClient
import TabsyncCore
import TabsyncTestSupport

private let scaleCount = ProcessInfo.processInfo.environment["TABSYNC_CLIENT_SCALE"].flatMap { Int($0) }

/// Resident memory of this process, in bytes.
private func residentBytes() -> Int {
    guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8),
          let pages = text.split(separator: " ").dropFirst().first.flatMap({ Int($0) })
    else { return 0 }
    return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
}

/// Many connections on one client loop against a `tabsync-server` child process. Run by hand:
/// `TABSYNC_CLIENT_SCALE=5000 swift test --filter ScaleTests` (needs the built server).
@Suite(.enabled(if: scaleCount != nil, "set TABSYNC_CLIENT_SCALE=N to run"))
struct ScaleTests {
    @Test func manyConnectionsOnOneLoop() async throws {
        let count = scaleCount ?? 0
        let binary = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent(".build/debug/tabsync-server")
        let server = Process()
        server.executableURL = binary
        server.arguments = ["--port", "0", "--memory", "--log-level", "error", "--max-connections", "\(count + 100)"]
        let output = Pipe()
        server.standardOutput = output
        try server.run()
        defer {
            kill(server.processIdentifier, SIGKILL)
            var status: Int32 = 0
            _ = waitpid(server.processIdentifier, &status, 0)
        }
        let text = output.firstLine()
        let address = try #require(text.split(separator: " ").last.map { $0.trimmingCharacters(in: .whitespacesAndNewlines) })
        let url = try ServerURL(parsing: address)

        let before = residentBytes()
        let clock = ContinuousClock()
        let start = clock.now
        let loop = try ClientLoop()
        var clients: [TabsyncClient] = []
        clients.reserveCapacity(count)
        for index in 0..<count {
            let client = try TabsyncClient(
                .init(url: url, workspace: "w\(index % 100)", clientId: "c\(index)",
                      backoff: Backoff(initial: .milliseconds(200), maximum: .seconds(2))),
                loop: loop)
            client.start()
            clients.append(client)
        }
        var lastReport = clock.now
        while true {
            var byState: [String: Int] = [:]
            for client in clients {
                let state = client.state.connection
                let name: String
                switch state {
                case .ready: name = "ready"
                case .connecting: name = "connecting"
                case .awaitingWelcome: name = "awaitingWelcome"
                case .waiting: name = "waiting"
                default: name = "\(state)"
                }
                byState[name, default: 0] += 1
            }
            if byState["ready"] == count { break }
            if clock.now - lastReport > .seconds(5) {
                print("SCALE progress after \(clock.now - start): \(byState.sorted { $0.key < $1.key })")
                lastReport = clock.now
            }
            if clock.now - start > .seconds(180) { Issue.record("not all ready: \(byState)"); return }
            try await Task.sleep(for: .milliseconds(200))
        }
        let connected = clock.now - start
        let memory = residentBytes() - before
        for (index, client) in clients.enumerated() {
            client.submit(.add(tab: Tab(id: "t\(index)"), place: .end, activate: false))
        }
        for client in clients {
            try await client.waitUntil(timeout: .seconds(120)) { $0.isSettled }
        }
        let settled = clock.now - start
        print("SCALE \(count) connections: all ready after \(connected), one op each settled after \(settled), "
              + "client RSS +\(memory / 1024) KiB (\(memory / max(count, 1)) B per connection)")
        loop.shutdown()
    }
}
