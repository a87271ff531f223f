import Foundation
import Logging
import TabsyncServer
import TabsyncStore
import TabsyncTestServer
import TabsyncTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

private let tlsToolsAvailable =
    TestCertificates.available && FileManager.default.isExecutableFile(atPath: "/usr/bin/curl")

/// True when the `python3` on PATH has the `websockets` package (PyPI, or Debian's python3-websockets).
private let pythonWebsocketsAvailable =
    (try? ToolRun.run("/usr/bin/env", ["python3", "-c", "import websockets"]).status) == 0

/// A tabsync session over `wss://` from Python's `websockets` (a third-party client) with an SSL
/// context trusting only `argv[2]`: Hello, one op, its Applied; prints the negotiated TLS version.
private let pythonSession = #"""
import asyncio, json, ssl, sys
from websockets import connect

async def main(url, ca):
    context = ssl.create_default_context(cafile=ca) if ca else ssl.create_default_context()
    async with connect(url, subprotocols=["tabsync.v1.json"], ssl=context) as ws:
        print("tls", ws.transport.get_extra_info("ssl_object").version())
        await ws.send(json.dumps({"hello": {"workspace": "py", "clientId": "py1"}}))
        print(await ws.recv())
        await ws.send(json.dumps({"submit": {"seq": "1", "op": {"add": {"tab": {"id": "t1", "title": "over tls"}}}}}))
        while True:
            message = await ws.recv()
            if "applied" in message or "rejected" in message:
                print(message)
                break

try:
    asyncio.run(main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None))
except Exception as error:
    print("failed", type(error).__name__, error)
    sys.exit(1)
"""#

/// TLS on the server's one port (`wss://` and `https://`): certificates made by `openssl` at test
/// time, third-party clients (Python `websockets`, `openssl s_client`, `curl`), the `tabsync` tool
/// with `--ca-file`, and a certificate reloaded on SIGHUP.
@Suite("TLS transport", .serialized, .enabled(if: tlsToolsAvailable, "needs openssl and curl"))
struct ServerTLSTests {
    static func tlsServer(_ certificates: TestCertificates) throws -> TestServer {
        try TestServer { configuration in
            configuration.tlsCertificateFile = certificates.certificate
            configuration.tlsKeyFile = certificates.key
        }
    }

    @Test(.enabled(if: pythonWebsocketsAvailable, "needs Python's websockets"))
    func aThirdPartyClientTrustingTheCARoundTripsOverWSS() throws {
        let certificates = try TestCertificates()
        let server = try Self.tlsServer(certificates)
        defer { server.stop() }
        let script = certificates.path("session.py")
        try pythonSession.write(toFile: script, atomically: true, encoding: .utf8)

        let run = try ToolRun.run("/usr/bin/env", ["python3", script, "wss://127.0.0.1:\(server.port)/", certificates.caCertificate])
        #expect(run.status == 0, "\(run.output)")
        #expect(run.output.contains("tls TLSv1.3") || run.output.contains("tls TLSv1.2"), "\(run.output)")
        #expect(run.output.contains("\"welcome\""), "\(run.output)")
        #expect(run.output.contains("\"applied\"") && run.output.contains("over tls"), "\(run.output)")

        // Without the test CA the same client refuses the server's certificate.
        let untrusting = try ToolRun.run("/usr/bin/env", ["python3", script, "wss://127.0.0.1:\(server.port)/"])
        #expect(untrusting.status != 0)
        #expect(untrusting.output.contains("CERTIFICATE_VERIFY_FAILED"), "\(untrusting.output)")
    }

    @Test func theServerSpeaksTLS12AndNewerOnlyAndHTTPSOnTheSamePort() throws {
        let certificates = try TestCertificates()
        let server = try Self.tlsServer(certificates)
        defer { server.stop() }
        let address = "127.0.0.1:\(server.port)"

        let modern = try ToolRun.run(TestCertificates.openssl, [
            "s_client", "-connect", address, "-brief", "-CAfile", certificates.caCertificate, "-verify_return_error",
        ])
        #expect(modern.status == 0, "\(modern.output)")
        #expect(modern.output.contains("Protocol version: TLSv1.3"), "\(modern.output)")
        #expect(modern.output.contains("Verification: OK"), "\(modern.output)")
        let tls12 = try ToolRun.run(TestCertificates.openssl, ["s_client", "-connect", address, "-brief", "-tls1_2"])
        #expect(tls12.output.contains("Protocol version: TLSv1.2"), "\(tls12.output)")
        // TLS 1.1 offered by a client that would accept it (security level 0): the server refuses.
        for old in ["-tls1_1", "-tls1"] {
            let refused = try ToolRun.run(TestCertificates.openssl, [
                "s_client", "-connect", address, "-brief", old, "-cipher", "DEFAULT:@SECLEVEL=0",
            ])
            #expect(refused.status != 0, "\(old): \(refused.output)")
            #expect(refused.output.contains("alert protocol version"), "the server says no: \(old): \(refused.output)")
        }

        let https = try ToolRun.run("/usr/bin/curl", [
            "-sS", "--cacert", certificates.caCertificate, "https://127.0.0.1:\(server.port)/healthz",
        ])
        #expect(https.status == 0 && https.output == "ok\n", "\(https.output)")
        // Plain HTTP on the TLS port gets no answer.
        #expect(throws: (any Error).self) { try httpGet(port: server.port, path: "/healthz", timeout: 2) }
    }

    @Test func theTabsyncToolVerifiesTheServerAgainstItsCAFile() throws {
        let certificates = try TestCertificates()
        let server = try Self.tlsServer(certificates)
        defer { server.stop() }
        let url = "wss://127.0.0.1:\(server.port)"
        let common = ["--server", url, "--workspace", "cli", "--client-id", "cli-tls", "--timeout", "10"]

        let added = try ToolRun.run(Self.tabsync, ["add", "--title", "Secure"] + common + ["--ca-file", certificates.caCertificate])
        #expect(added.status == 0, "\(added.output)")
        let listed = try ToolRun.run(Self.tabsync, ["ls", "--json"] + common + ["--ca-file", certificates.caCertificate])
        #expect(listed.status == 0 && listed.output.contains("Secure"), "\(listed.output)")

        // The system's trust store does not know the test CA: refused, exit 1, nothing written.
        let untrusted = try ToolRun.run(Self.tabsync, ["add", "--title", "Nope"] + common)
        #expect(untrusted.status == 1, "\(untrusted.output)")
        #expect(untrusted.output.contains("cannot reach the server"), "\(untrusted.output)")
        let after = try ToolRun.run(Self.tabsync, ["ls", "--json"] + common + ["--ca-file", certificates.caCertificate])
        #expect(after.output.contains("Secure") && !after.output.contains("Nope"), "\(after.output)")

        let skipped = try ToolRun.run(Self.tabsync, ["ls"] + common + ["--insecure-skip-verify"])
        #expect(skipped.status == 0, "\(skipped.output)")
        #expect(skipped.output.contains("for tests only"), "the flag says what it is: \(skipped.output)")
    }

    @Test func theFeedFollowsOverHTTPSVerifyingTheServerAgainstItsCAFile() throws {
        let certificates = try TestCertificates()
        let server = try Self.tlsServer(certificates)
        defer { server.stop() }
        let url = "wss://127.0.0.1:\(server.port)"
        let ca = ["--ca-file", certificates.caCertificate]
        let common = ["--server", url, "--workspace", "feed", "--client-id", "feed-tls", "--timeout", "10"]
        let added = try ToolRun.run(Self.tabsync, ["add", "--title", "Secure one"] + common + ca)
        #expect(added.status == 0, "\(added.output)")

        let (process, out) = try CommandFeedTests.feed(["feed", "--after", "0", "--json", "--server", url] + ca)
        defer { if process.isRunning { process.terminate() } }
        let first = out.firstLine(within: .seconds(30))
        #expect(first.contains("\"version\":\"1\"") && first.contains("Secure one"), "\(first)")
        // An op made after the stream opened comes on it too.
        let more = try ToolRun.run(Self.tabsync, ["add", "--title", "Secure two"] + common + ca)
        #expect(more.status == 0, "\(more.output)")
        let second = out.firstLine(within: .seconds(30))
        #expect(second.contains("\"version\":\"2\"") && second.contains("Secure two"), "\(second)")
        kill(process.processIdentifier, SIGINT)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)

        // The system's trust store does not know the test CA: exit 1, saying why.
        let untrusted = try Self.boundedFeed(["feed", "--server", url, "--timeout", "10"])
        #expect(untrusted.status == 1, "\(untrusted.output)")
        #expect(untrusted.output.contains("certificate is not trusted"), "\(untrusted.output)")
        // Unchecked, for tests only: the stream opens (a snapshot at version 2 first).
        let (skipped, skippedOut) = try CommandFeedTests.feed(["feed", "--server", url, "--insecure-skip-verify"])
        defer { if skipped.isRunning { skipped.terminate() } }
        let snapshot = skippedOut.firstLine(within: .seconds(30))
        #expect(snapshot.hasPrefix("2\tsnapshot\t2 tabs"), "\(snapshot)")
        kill(skipped.processIdentifier, SIGINT)
        skipped.waitUntilExit()
    }

    /// `tabsync feed` run until it exits by itself, stdout and stderr together; a feed still running
    /// after 60 s (one that connected when it should have refused) is stopped, status nil.
    static func boundedFeed(_ arguments: [String]) throws -> (status: Int32?, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: tabsync)
        process.arguments = ["feed"] + arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let deadline = ContinuousClock.now + .seconds(60)
        while process.isRunning, ContinuousClock.now < deadline {
            Thread.sleep(forTimeInterval: 0.05)  // a poll of the condition, which decides
        }
        let exited = !process.isRunning
        if !exited { process.terminate() }
        process.waitUntilExit()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        return (exited ? process.terminationStatus : nil, text)
    }

    @Test func theFeedRefusesACertificateForAnotherName() throws {
        let certificates = try TestCertificates()
        // Signed by the trusted CA, but for another host than the one connected to.
        try certificates.issue(commonName: "other", altNames: "DNS:other.test")
        let server = try Self.tlsServer(certificates)
        defer { server.stop() }
        // By address (checked against the certificate's IP names) and by name (its DNS names).
        for (host, reason) in [("127.0.0.1", "IP address mismatch"), ("localhost", "hostname mismatch")] {
            let run = try Self.boundedFeed([
                "w", "--server", "wss://\(host):\(server.port)", "--ca-file", certificates.caCertificate, "--timeout", "10",
            ])
            #expect(run.status == 1, "\(run.output)")
            #expect(run.output.contains("certificate is not trusted: \(reason)"), "\(run.output)")
        }
    }

    @Test func aCertificatePairThatCannotBeServedStopsTheStartWithItsReason() throws {
        let certificates = try TestCertificates()
        try certificates.replaceKeyWithAnother()
        var configuration = Server.Configuration(host: "127.0.0.1", port: 0)
        configuration.tlsCertificateFile = certificates.certificate
        configuration.tlsKeyFile = certificates.key
        let server = Server(configuration: configuration, store: MemoryStore(), logger: Logger(label: "test"))
        do {
            _ = try server.start()
            server.shutdown()
            Issue.record("started with a key that is not the certificate's")
        } catch {
            guard case .tlsUnusable(let why) = error else { throw error }
            #expect(why.contains("private key") && why.contains("mismatch"), "\(why)")
            #expect(!why.contains("PRIVATE KEY"), "no key material in the message")
        }
    }

    /// SIGHUP to the executable: the next handshake gets the new certificate; a broken pair is
    /// refused and the previous certificate stays served.
    @Test func sighupReloadsTheCertificate() throws {
        let certificates = try TestCertificates()
        let child = try ServerExecutableTests.Child(arguments: [
            "--port", "0", "--memory", "--tls-cert", certificates.certificate, "--tls-key", certificates.key,
        ])
        defer { child.kill() }
        let line = try child.waitForListening()
        #expect(line.hasPrefix("listening on wss://127.0.0.1:"), "\(line)")
        #expect(try TestCertificates.servedSubject(port: child.port) == "CN = first")

        try certificates.issue(commonName: "second")
        kill(child.process.processIdentifier, SIGHUP)
        var served = ""
        let reloaded = try waitUntil(deadline: .seconds(10)) {
            served = try TestCertificates.servedSubject(port: child.port)
            return served == "CN = second"
        }
        #expect(reloaded, "still serving \(served)")

        try certificates.replaceKeyWithAnother()
        kill(child.process.processIdentifier, SIGHUP)
        var metrics = ""
        let counted = try waitUntil(deadline: .seconds(10)) {
            metrics = try ToolRun.run("/usr/bin/curl", [
                "-sS", "--cacert", certificates.caCertificate, "https://127.0.0.1:\(child.port)/metrics",
            ]).output
            return metrics.contains("tabsync_tls_certificate_reloads_total{result=\"failed\"} 1")
        }
        #expect(counted, "\(metrics)")
        #expect(metrics.contains("tabsync_tls_certificate_reloads_total{result=\"ok\"} 1"))
        #expect(try TestCertificates.servedSubject(port: child.port) == "CN = second", "the previous pair stays")
        #expect(child.process.isRunning)

        // No key material in the log, whatever happened to the files.
        let keyBody = try String(contentsOfFile: certificates.key, encoding: .utf8)
            .split(separator: "\n").filter { !$0.hasPrefix("-----") }
        child.kill()
        let log = String(decoding: child.stderr.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(log.contains("certificate reload failed"), "\(log)")
        #expect(!log.contains("PRIVATE KEY"))
        for line in keyBody { #expect(!log.contains(line)) }
    }

    @Test func helpShowsTheTransportSecurityFlags() throws {
        let child = try ServerExecutableTests.Child(arguments: ["--help"])
        #expect(child.waitForExit(timeout: 10) == 0)
        let help = String(decoding: child.stdout.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            .split(whereSeparator: \.isWhitespace).joined(separator: " ")
        for expected in [
            "--tls-cert", "TABSYNC_TLS_CERT", "--tls-key", "TABSYNC_TLS_KEY", "SIGHUP", "--allow-origin",
            "TABSYNC_ALLOW_ORIGIN", "--insecure-no-auth", "TABSYNC_INSECURE_NO_AUTH", "--max-connections-per-ip",
            "TABSYNC_MAX_CONNECTIONS_PER_IP", "--max-handshakes-per-second-per-ip",
            "TABSYNC_MAX_HANDSHAKES_PER_SECOND_PER_IP",
        ] {
            #expect(help.contains(expected), "help lacks \(expected)")
        }
    }

    /// The `tabsync` tool, built next to the test bundle.
    static var tabsync: String {
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("tabsync").path
    }
}
