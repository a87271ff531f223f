import TabsyncBench
import Testing

/// The `tabsync bench` flags, through ``BenchOptions`` (swift-argument-parser), the way
/// `tabsync bench` parses them.
@Suite("tabsync bench flags")
struct BenchConfigurationTests {
    @Test("every flag is read, in both --flag value and --flag=value forms")
    func parsesEveryFlag() throws {
        let configuration = try BenchConfiguration.parse([
            "--server", "ws://127.0.0.1:9000/", "--workspaces=100", "--clients", "10", "--rate", "5000",
            "--duration", "20", "--warmup", "3", "--mix", "add=30,remove=10", "--ramp", "500",
            "--subprotocol", "json", "--max", "--p99-bound", "25", "--server-pid", "42", "--json", "r.json",
            "--hgrm", "r.hgrm", "--plot", "r.svg", "--seed", "9", "--workspace-prefix", "x", "--event-loop", "poll",
            "--drain-timeout=12.5",
        ])
        #expect(configuration.drainTimeout == 12.5)
        #expect(configuration.eventLoop == .poll)
        #expect(try BenchConfiguration.parse([]).eventLoop == .epoll)
        #expect(configuration.host == "127.0.0.1" && configuration.port == 9000)
        #expect(configuration.workspaces == 100 && configuration.clientsPerWorkspace == 10)
        #expect(configuration.connections == 1000)
        #expect(configuration.rate == 5000 && configuration.duration == 20 && configuration.warmup == 3)
        #expect(configuration.mix == Mix(add: 30, move: 20, activate: 20, update: 20, remove: 10))
        #expect(configuration.ramp == 500 && configuration.mode == .json && configuration.searchMax)
        #expect(configuration.p99Bound == 25 && configuration.serverPids == [42])
        #expect(configuration.jsonPath == "r.json" && configuration.hgrmPath == "r.hgrm" && configuration.plotPath == "r.svg")
        #expect(configuration.seed == 9 && configuration.workspacePrefix == "x")
    }

    @Test("bad arguments get a message naming the flag and exit status 2", arguments: [
        (["--rate", "fast"], "--rate"),
        (["--clients", "0"], "--clients"),
        (["--workspaces"], "Missing value for '--workspaces"),
        (["--server", "http://x:1"], "--server"),
        (["--mix", "add=1,jump=3"], "unknown op kind 'jump'"),
        (["--mix", "add=0"], "add must be above 0"),
        (["--subprotocol", "xml"], "json, proto or mirror"),
        (["--subprotocol", "mirror", "--workspaces", "4"], "at most 3"),
        (["--frobnicate"], "Unknown option '--frobnicate'"),
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

    @Test("defaults are the documented ones")
    func defaults() throws {
        let configuration = try BenchConfiguration.parse([])
        #expect(configuration.host == "127.0.0.1" && configuration.port == 7070)
        #expect(configuration.mode == .proto && configuration.eventLoop == .epoll)
        #expect(configuration.workspaces == 1 && configuration.clientsPerWorkspace == 10)
        #expect(configuration.rate == 100 && configuration.duration == 10 && configuration.warmup == 2)
        #expect(configuration.mix == .default && configuration.ramp == 1000 && configuration.messageBytes == 160)
        #expect(!configuration.searchMax && configuration.p99Bound == 50)
        #expect(configuration.serverPids.isEmpty && configuration.timeLimit == nil && configuration.drainTimeout == 5)
        #expect(configuration.jsonPath == nil && configuration.hgrmPath == nil && configuration.plotPath == nil)
    }

    @Test("out-of-range values name the flag, the range and the value", arguments: [
        (["--warmup", "-1"], "--warmup must be a number in 0.0...86400.0, not '-1.0'"),
        (["--duration", "0"], "--duration must be a number in 0.1...86400.0"),
        (["--rate", "inf"], "--rate must be a number"),
        (["--message-bytes", "8"], "--message-bytes must be a whole number in 32...65536, not '8'"),
        (["--server-pid", "0"], "--server-pid must be a whole number in 1...2147483647"),
        (["--time-limit", "0.5"], "--time-limit must be a number in 1.0...604800.0"),
        (["--drain-timeout", "0"], "--drain-timeout must be a number in 0.1...3600.0, not '0.0'"),
        (["--p99-bound", "0"], "--p99-bound must be a number in 0.01...600000.0"),
        (["--seed", "0"], "--seed must be a positive whole number"),
        (["--workspace-prefix", "a/b"], "--workspace-prefix must be 1-40 chars"),
        (["--workspaces", "1000", "--clients", "61"], "at most 60000"),
        (["--max=1"], "'--max' does not take any value"),
    ])
    func refusesOutOfRange(arguments: [String], expected: String) {
        #expect {
            _ = try BenchConfiguration.parse(arguments)
        } throws: { error in
            guard let error = error as? BenchError, case .invalidArgument(let message) = error else { return false }
            return error.exitCode == 2 && message.contains(expected)
        }
    }

    @Test("the argument lists scripts/loadtest passes are accepted", arguments: [
        ["--server", "127.0.0.1:7070", "--server-pid", "42", "--json", "r.json", "--time-limit", "90",
         "--workspaces", "1000", "--clients", "1", "--rate", "0", "--duration", "5", "--warmup", "0", "--ramp", "2000"],
        ["--server", "127.0.0.1:7070", "--server-pid", "42", "--json", "r.json", "--time-limit", "120",
         "--subprotocol", "mirror", "--workspaces", "1", "--clients", "1000", "--rate", "100",
         "--duration", "3", "--warmup", "1", "--message-bytes", "41"],
        ["--server", "127.0.0.1:7070", "--server-pid", "42", "--json", "r.json", "--time-limit", "300",
         "--workspaces", "100", "--clients", "10", "--rate", "1000", "--max", "--p99-bound", "50",
         "--duration", "3", "--warmup", "1"],
    ])
    func acceptsTheLoadtestFlags(arguments: [String]) throws {
        let configuration = try BenchConfiguration.parse(arguments)
        #expect(configuration.port == 7070 && configuration.serverPids == [42] && configuration.jsonPath == "r.json")
        #expect(configuration.timeLimit != nil)
    }

    @Test("the subprotocol's full names are accepted too")
    func subprotocolNames() throws {
        #expect(try BenchConfiguration.parse(["--subprotocol", "tabsync.v1.json"]).mode == .json)
        #expect(try BenchConfiguration.parse(["--subprotocol=tabsync.v1.proto"]).mode == .proto)
        #expect(try BenchConfiguration.parse(["--subprotocol", "lws-mirror-protocol"]).mode == .mirror)
        #expect(try BenchConfiguration.parse(["--server", "[::1]:7070"]).host == "::1")
    }

    @Test("--help lists every flag with its help")
    func helpListsEveryFlag() {
        let help = BenchOptions.helpMessage(columns: 400)
        for flag in ["--server", "--workspaces", "--clients", "--rate", "--duration", "--warmup", "--mix", "--ramp",
                     "--subprotocol", "--message-bytes", "--event-loop", "--max", "--p99-bound", "--server-pid",
                     "--json", "--hgrm", "--plot", "--time-limit", "--seed", "--workspace-prefix"] {
            #expect(help.contains(flag + " "), "\(flag) is missing from --help")
        }
        #expect(help.contains("open loop; 0 = idle connections"))
    }
}
