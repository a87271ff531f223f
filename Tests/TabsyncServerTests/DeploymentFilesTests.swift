import Foundation
import Testing
import Yams

/// These check that Dockerfile and docker-compose.yml parse and agree on the port, the data path
/// and the health check; scripts/test-containers runs them for real (Podman).
@Suite("Deployment files")
struct DeploymentFilesTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()

    /// Dockerfile instructions (continuations joined, comments dropped): keyword and arguments.
    static func dockerfile() throws -> [(String, String)] {
        let text = try String(contentsOf: root.appendingPathComponent("Dockerfile"), encoding: .utf8)
        var instructions: [(String, String)] = []
        var current = ""
        for raw in text.components(separatedBy: "\n") {
            let line = raw.trimmingCharacters(in: .whitespaces)
            if current.isEmpty && (line.isEmpty || line.hasPrefix("#")) { continue }
            if line.hasSuffix("\\") {
                current += String(line.dropLast()) + " "
                continue
            }
            current += line
            let parts = current.split(separator: " ", maxSplits: 1)
            instructions.append((parts[0].uppercased(), parts.count > 1 ? String(parts[1]) : ""))
            current = ""
        }
        #expect(current.isEmpty, "dangling continuation")
        return instructions
    }

    @Test func dockerfileAndComposeNameTheSamePortAndDataPath() throws {
        let instructions = try Self.dockerfile()
        let known: Set = ["FROM", "RUN", "WORKDIR", "COPY", "ENV", "EXPOSE", "VOLUME", "HEALTHCHECK", "USER",
                          "ENTRYPOINT", "STOPSIGNAL", "CMD", "ARG", "LABEL"]
        for (keyword, _) in instructions { #expect(known.contains(keyword), "unknown instruction \(keyword)") }
        func all(_ k: String) -> [String] { instructions.filter { $0.0 == k }.map(\.1) }
        // The default build: the toolchain image compiles, the last stage (the runtime) takes the
        // binary from it; `--target prebuilt` takes it from TABSYNC_BINARY_IMAGE instead.
        var args: [String: String] = [:]
        for arg in all("ARG") {
            let pair = arg.split(separator: "=", maxSplits: 1).map(String.init)
            if pair.count == 2 { args[pair[0]] = pair[1] }
        }
        #expect(args["SWIFT_IMAGE"]?.hasPrefix("swift:") == true)
        #expect(args["DEBIAN_IMAGE"]?.hasPrefix("debian:") == true)
        #expect(args["TABSYNC_BINARY_IMAGE"] == "build")
        let stages = all("FROM")
        #expect(stages.first == "${SWIFT_IMAGE} AS build-env")
        #expect(stages.contains("build-env AS build"))
        #expect(stages.contains("${DEBIAN_IMAGE} AS runtime"))
        #expect(stages.contains("${TABSYNC_BINARY_IMAGE} AS prebuilt-binary"))
        #expect(stages.contains("runtime AS prebuilt"))
        #expect(stages.last == "runtime")
        #expect(all("COPY").last == "--from=build /usr/local/bin/tabsync-server /usr/local/bin/tabsync-server")
        #expect(all("RUN").contains { $0.contains("libwebsockets-dev") && $0.contains("apt-get install") })
        #expect(all("RUN").contains { $0.contains("swift build -c release") })
        let user = try #require(all("USER").last)
        #expect(user != "root" && user != "0")
        #expect(all("EXPOSE") == ["7070"])
        let volume = try #require(all("VOLUME").first)
        let dataPath = "/var/lib/tabsync/data"
        #expect(volume == "[\"\(dataPath)\"]")
        let env = all("ENV").joined(separator: " ")
        #expect(env.contains("TABSYNC_PORT=7070"))
        #expect(env.contains("TABSYNC_DATA_DIR=\(dataPath)"))
        #expect(env.contains("TABSYNC_HOST=0.0.0.0"))
        #expect(all("HEALTHCHECK").first?.contains("http://127.0.0.1:7070/healthz") == true)
        #expect(all("ENTRYPOINT") == ["[\"tabsync-server\"]"])

        let yaml = try String(contentsOf: Self.root.appendingPathComponent("docker-compose.yml"), encoding: .utf8)
        let compose = try #require(try Yams.load(yaml: yaml) as? [String: Any])
        let services = try #require(compose["services"] as? [String: Any])
        let service = try #require(services["tabsync"] as? [String: Any])
        // 7070 on the host unless TABSYNC_PUBLISH says another [address:]port.
        #expect((service["ports"] as? [String]) == ["${TABSYNC_PUBLISH:-7070}:7070"])
        let environment = try #require(service["environment"] as? [String: Any])
        #expect(environment["TABSYNC_PORT"] as? String == "7070")
        #expect(environment["TABSYNC_DATA_DIR"] as? String == dataPath)
        let volumes = try #require(service["volumes"] as? [String])
        #expect(volumes == ["tabsync-data:\(dataPath)"])
        let named = try #require(compose["volumes"] as? [String: Any])
        #expect(named.keys.contains("tabsync-data"))
        let healthcheck = try #require(service["healthcheck"] as? [String: Any])
        let test = try #require(healthcheck["test"] as? [String])
        #expect(test.contains("http://127.0.0.1:7070/healthz"))
    }
}
