import Foundation
import TabsyncTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Whether the cluster tests run: `scripts/test` sets `TABSYNC_TEST_CLUSTER=1` and runs them on their
/// own (they start PostgreSQL, three `tabsync-server` nodes and HAProxy, and load both cores).
enum ClusterTestEnvironment {
    static let isEnabled = ProcessInfo.processInfo.environment["TABSYNC_TEST_CLUSTER"] == "1"
    static let skipReason: Comment =
        "TABSYNC_TEST_CLUSTER is unset: the 3-node tests (real tabsync-server nodes on PostgreSQL behind HAProxy) are skipped; scripts/test runs them alone with TABSYNC_TEST_CLUSTER=1"

    /// The checkout's root (scripts/cluster, deploy/haproxy.cfg).
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// The directory of the `tabsync-server` the nodes run: `TABSYNC_CLUSTER_BIN` when set (another
    /// build), else the one built with the tests, next to the test bundle.
    static var binDirectory: String {
        if let bin = ProcessInfo.processInfo.environment["TABSYNC_CLUSTER_BIN"], !bin.isEmpty { return bin }
        return URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().path
    }
}

/// A local cluster made by `scripts/cluster start` (the script people use): PostgreSQL in a temp
/// dir, three `tabsync-server` nodes with `--store postgres://…` and HAProxy with
/// `deploy/haproxy.cfg`, all on loopback. Destroyed (every process ended, the directory removed)
/// when released, whatever the test did.
final class LocalCluster: @unchecked Sendable {
    struct Failure: Error, CustomStringConvertible { var description: String }

    let directory: String
    /// HAProxy's port: the one address in front.
    let frontPort: Int
    /// Each node's port (node 1 first).
    let nodePorts: [Int]
    /// The PostgreSQL URL the nodes use.
    let store: String

    /// Flags every node gets: the load is the point (no rate limit), and a resume window and log
    /// that cover a whole test, so every resume is `recovered` and the whole log stays readable.
    static let nodeArguments = "--max-ops-per-second 1000000 --max-resume-ops 100000 --log-retention 100000 --log-level warning"

    init() throws {
        directory = NSTemporaryDirectory() + "tabsync-cluster-test-" + UUID().uuidString.prefix(8)
        let output = try Self.script(["start", directory], environment: [
            "BIN": ClusterTestEnvironment.binDirectory, "TABSYNC_CLUSTER_NODE_ARGS": Self.nodeArguments,
        ])
        var values: [String: String] = [:]
        for line in output.split(separator: "\n") where line.hasPrefix("export ") {
            let pair = line.dropFirst("export ".count).split(separator: "=", maxSplits: 1)
            if pair.count == 2 { values[String(pair[0])] = String(pair[1]) }
        }
        func port(_ url: Substring) -> Int? { url.split(separator: ":").last.flatMap { Int($0) } }
        guard let front = values["TABSYNC_CLUSTER_URL"].flatMap({ port(Substring($0)) }),
              let nodes = values["TABSYNC_CLUSTER_NODES"]?.split(separator: ",").compactMap(port), nodes.count == 3,
              let store = values["TABSYNC_CLUSTER_STORE"]
        else {
            _ = try? Self.script(["destroy", directory])
            throw Failure(description: "scripts/cluster start printed no addresses: \(output)")
        }
        frontPort = front
        nodePorts = nodes
        self.store = store
    }

    deinit {
        if ProcessInfo.processInfo.environment["TABSYNC_KEEP"] == "1" {
            _ = try? Self.script(["stop", directory])
            print("LocalCluster: kept \(directory)")
        } else {
            _ = try? Self.script(["destroy", directory])
        }
    }

    /// The pid of node `n` (1-based), from its pid file.
    func nodePid(_ n: Int) -> pid_t? {
        (try? String(contentsOfFile: "\(directory)/node\(n).pid", encoding: .utf8))
            .flatMap { pid_t($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
    }

    /// SIGKILL to node `n`; returns once it is gone.
    func killNode(_ n: Int) throws {
        guard let pid = nodePid(n) else { throw Failure(description: "no pid for node \(n)") }
        kill(pid, SIGKILL)
        let gone = waitUntil(deadline: .seconds(10)) { !Self.isRunning(pid) }
        guard gone else { throw Failure(description: "node \(n) (pid \(pid)) still runs after SIGKILL") }
    }

    /// True while `pid` runs (a zombie, dead but not yet reaped by whoever adopted it, does not).
    static func isRunning(_ pid: pid_t) -> Bool {
        guard kill(pid, 0) == 0 else { return false }
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return false }
        return !stat[stat.index(after: close)...].hasPrefix(" Z")
    }

    /// Starts node `n` again on its port (`scripts/cluster restart-node`).
    func restartNode(_ n: Int) throws {
        _ = try Self.script(["restart-node", directory, "\(n)"], environment: [
            "TABSYNC_CLUSTER_NODE_ARGS": Self.nodeArguments,
        ])
    }

    /// Stops PostgreSQL (fast shutdown: sessions are ended, the data stays).
    func stopDatabase() throws { _ = try Self.postgres(["stop", directory + "/pg"]) }

    /// Starts PostgreSQL again on the same port.
    func startDatabase() throws { _ = try Self.postgres(["start", directory + "/pg"]) }

    /// The text of `GET path` on `port` (curl), or nil when it fails.
    func get(port: Int, _ path: String) -> String? {
        let out = directory + "/get-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: out) }
        let status = system("curl -fsS --max-time 5 -o '\(out)' 'http://127.0.0.1:\(port)\(path)' 2>/dev/null")
        guard status == 0 else { return nil }
        return try? String(contentsOfFile: out, encoding: .utf8)
    }

    /// The value of an unlabelled metric of node `n` (1-based), from its /metrics.
    func metric(_ name: String, ofNode n: Int) -> Int? {
        get(port: nodePorts[n - 1], "/metrics")?.split(separator: "\n")
            .first { $0.hasPrefix(name + " ") }
            .flatMap { $0.split(separator: " ").last }
            .flatMap { Double($0) }.map { Int($0) }
    }

    /// `tabsync_connections` of node `n` (1-based).
    func connections(ofNode n: Int) -> Int? { metric("tabsync_connections", ofNode: n) }

    /// A log of the cluster's processes, for a failure message.
    func logTail(lines: Int = 15) -> String {
        ["node1.log", "node2.log", "node3.log", "haproxy.log", "pg/server.log"].map { name in
            let text = (try? String(contentsOfFile: "\(directory)/\(name)", encoding: .utf8)) ?? ""
            return "--- \(name)\n" + text.split(separator: "\n").suffix(lines).joined(separator: "\n")
        }.joined(separator: "\n")
    }

    // MARK: running the scripts

    /// Runs scripts/cluster; its stdout. Not Foundation's `Process`: its `waitUntilExit` was seen
    /// hanging once a script had started daemons (see PostgresStoreRestartTests).
    @discardableResult
    static func script(_ arguments: [String], environment: [String: String] = [:]) throws -> String {
        try run(ClusterTestEnvironment.root.appendingPathComponent("scripts/cluster").path, arguments, environment)
    }

    @discardableResult
    static func postgres(_ arguments: [String]) throws -> String {
        try run(ClusterTestEnvironment.root.appendingPathComponent("scripts/postgres").path, arguments, [:])
    }

    private static func run(_ path: String, _ arguments: [String], _ environment: [String: String]) throws -> String {
        let outputPath = NSTemporaryDirectory() + "tabsync-cluster-output-" + UUID().uuidString
        let errorPath = outputPath + ".err"
        defer {
            try? FileManager.default.removeItem(atPath: outputPath)
            try? FileManager.default.removeItem(atPath: errorPath)
        }
        let quote = { (text: String) in "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'" }
        let assignments = environment.sorted { $0.key < $1.key }.map { "\($0.key)=\(quote($0.value))" }
        let command = (["env"] + assignments + [path] + arguments.map(quote)).joined(separator: " ")
            + " >" + quote(outputPath) + " 2>" + quote(errorPath) + " </dev/null"
        let status = system(command)
        guard status == 0 else {
            let stderr = (try? String(contentsOfFile: errorPath, encoding: .utf8)) ?? ""
            throw Failure(description: "\(path) \(arguments.joined(separator: " ")) exited with status \(status): \(stderr)")
        }
        return (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
    }
}
