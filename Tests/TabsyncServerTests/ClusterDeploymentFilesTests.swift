import Foundation
import Testing
import Yams

/// docker-compose.yml's `cluster` profile is checked against deploy/haproxy.cfg, the file the
/// cluster tests run HAProxy with (scripts/cluster), so the two cannot drift apart unnoticed;
/// scripts/test-containers runs the profile for real (Podman).
@Suite("Deployment files: the cluster profile")
struct ClusterDeploymentFilesTests {
    static let root = DeploymentFilesTests.root

    /// `server NAME "${VAR-host:port}"` lines of deploy/haproxy.cfg: name → (variable, default).
    static func haproxyServers(_ config: String) -> [String: (variable: String, fallback: String)] {
        var servers: [String: (String, String)] = [:]
        for line in config.split(separator: "\n").map({ $0.trimmingCharacters(in: .whitespaces) }) where line.hasPrefix("server ") {
            let parts = line.split(separator: " ")
            guard parts.count >= 3 else { continue }
            let value = parts[2].trimmingCharacters(in: CharacterSet(charactersIn: "\"${}"))
            let pair = value.split(separator: "-", maxSplits: 1)
            guard pair.count == 2 else { continue }
            servers[String(parts[1])] = (String(pair[0]), String(pair[1]))
        }
        return servers
    }

    @Test func theComposeClusterIsTheTestedHAProxyConfigInFrontOfThreeNodesOnOnePostgres() throws {
        let config = try String(contentsOf: Self.root.appendingPathComponent("deploy/haproxy.cfg"), encoding: .utf8)
        let yaml = try String(contentsOf: Self.root.appendingPathComponent("docker-compose.yml"), encoding: .utf8)
        let compose = try #require(try Yams.load(yaml: yaml) as? [String: Any])
        let services = try #require(compose["services"] as? [String: Any])
        func service(_ name: String) throws -> [String: Any] { try #require(services[name] as? [String: Any], "no service \(name)") }
        func environment(_ s: [String: Any]) -> [String: String] {
            (s["environment"] as? [String: Any] ?? [:]).mapValues { "\($0)" }
        }

        // The single-node service stays outside the profile; everything of the cluster is in it.
        #expect(try service("tabsync")["profiles"] == nil)
        for name in ["postgres", "migrate", "node1", "node2", "node3", "haproxy"] {
            #expect(try service(name)["profiles"] as? [String] == ["cluster"], "\(name) is not in the cluster profile")
        }

        // HAProxy runs this very file.
        let haproxy = try service("haproxy")
        #expect((haproxy["volumes"] as? [String])?.contains("./deploy/haproxy.cfg:/usr/local/etc/haproxy/haproxy.cfg:ro") == true)
        let bind = try #require(environment(haproxy)["TABSYNC_HAPROXY_BIND"])
        let bindPort = try #require(bind.split(separator: ":").last)
        #expect((haproxy["ports"] as? [String])?.allSatisfy { $0.hasSuffix(":\(bindPort)") } == true)

        // Its three servers' defaults are the node services, on the port each node listens on.
        let servers = Self.haproxyServers(config)
        #expect(Set(servers.keys) == ["node1", "node2", "node3"])
        for (name, server) in servers {
            #expect(server.variable == "TABSYNC_\(name.uppercased())")
            let node = try service(name)
            let port = environment(node)["TABSYNC_PORT"]
            #expect(server.fallback == "\(name):\(port ?? "?")", "haproxy.cfg's default for \(name) is \(server.fallback)")
            #expect(environment(node)["TABSYNC_HOST"] == "0.0.0.0")
            // Every node on the one database service.
            let store = try #require(environment(node)["TABSYNC_STORE"])
            #expect(store.hasPrefix("postgres://") && store.contains("@postgres:5432/"))
            #expect(store == environment(try service("migrate"))["TABSYNC_STORE"])
            // Behind one address every client has HAProxy's address: no per-address limit on the nodes.
            #expect(environment(node)["TABSYNC_MAX_CONNECTIONS_PER_IP"] == "0")
            // The node's own health check and HAProxy's use the same path.
            let test = (node["healthcheck"] as? [String: Any])?["test"] as? [String] ?? []
            #expect(test.contains { $0.hasSuffix("/healthz") })
        }
        #expect(config.contains("option httpchk GET /healthz"))
        // Each workspace on its home node: the id in the path hashed onto a consistent ring, the
        // nodes placed on it by fixed ids (docs/design.md, "Several nodes and placement"), and no
        // bounded loads: HAProxy bounds connections, not workspaces, and would split workspaces.
        #expect(config.contains("balance hash path,field(4,/)"))
        #expect(config.contains("hash-type consistent sdbm avalanche"))
        let settings = config.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.hasPrefix("#") }
        #expect(!settings.contains { $0.hasPrefix("hash-balance-factor") })
        #expect(config.contains("on-marked-down shutdown-sessions"))
        for n in 1...3 { #expect(config.contains(#"server node\#(n) "${TABSYNC_NODE\#(n)-node\#(n):7070}" id \#(n)"#)) }
        #expect(config.contains("timeout tunnel"))
        #expect(config.contains("option redispatch"))
    }
}
