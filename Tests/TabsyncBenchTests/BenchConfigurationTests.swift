import TabsyncBench
import Testing

@Suite("tabsync bench flags")
struct BenchConfigurationTests {
    @Test("every flag is read, in both --flag value and --flag=value forms")
    func parsesEveryFlag() throws {
        let configuration = try BenchConfiguration.parse([
            "--server", "ws://127.0.0.1:9000/", "--workspaces=100", "--clients", "10", "--rate", "5000",
            "--duration", "20", "--warmup", "3", "--mix", "add=30,remove=10", "--ramp", "500",
            "--subprotocol", "json", "--max", "--p99-bound", "25", "--server-pid", "42", "--json", "r.json",
            "--hgrm", "r.hgrm", "--plot", "r.svg", "--seed", "9", "--workspace-prefix", "x", "--event-loop", "poll",
        ])
        #expect(configuration.eventLoop == .poll)
        #expect(try BenchConfiguration.parse([]).eventLoop == .epoll)
        #expect(configuration.host == "127.0.0.1" && configuration.port == 9000)
        #expect(configuration.workspaces == 100 && configuration.clientsPerWorkspace == 10)
        #expect(configuration.connections == 1000)
        #expect(configuration.rate == 5000 && configuration.duration == 20 && configuration.warmup == 3)
        #expect(configuration.mix == Mix(add: 30, move: 20, activate: 20, update: 20, remove: 10))
        #expect(configuration.ramp == 500 && configuration.mode == .json && configuration.searchMax)
        #expect(configuration.p99Bound == 25 && configuration.serverPid == 42)
        #expect(configuration.jsonPath == "r.json" && configuration.hgrmPath == "r.hgrm" && configuration.plotPath == "r.svg")
        #expect(configuration.seed == 9 && configuration.workspacePrefix == "x")
    }

    @Test("bad arguments get a message naming the flag and exit status 2", arguments: [
        (["--rate", "fast"], "--rate"),
        (["--clients", "0"], "--clients"),
        (["--workspaces"], "--workspaces needs a value"),
        (["--server", "http://x:1"], "--server"),
        (["--mix", "add=1,jump=3"], "unknown op kind 'jump'"),
        (["--mix", "add=0"], "add must be above 0"),
        (["--subprotocol", "xml"], "json, proto or mirror"),
        (["--subprotocol", "mirror", "--workspaces", "4"], "at most 3"),
        (["--frobnicate"], "unknown flag '--frobnicate'"),
        (["--event-loop", "select"], "epoll or poll"),
        (["--max", "--rate", "0"], "--max needs"),
    ])
    func refusesBadArguments(arguments: [String], expected: String) {
        #expect {
            _ = try BenchConfiguration.parse(arguments)
        } throws: { error in
            guard let error = error as? BenchError, case .invalidArgument(let message) = error else { return false }
            return error.exitCode == 2 && message.contains(expected)
        }
    }

    @Test("runs get distinct workspace prefixes unless one is given")
    func uniquePrefixes() throws {
        let first = try BenchConfiguration.parse([])
        let second = try BenchConfiguration.parse([])
        #expect(first.workspacePrefix != second.workspacePrefix)
        #expect(try BenchConfiguration.parse(["--seed", "5"]).workspacePrefix == BenchConfiguration.parse(["--seed", "5"]).workspacePrefix)
    }
}
