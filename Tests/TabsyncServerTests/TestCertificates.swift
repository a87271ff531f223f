import Foundation

/// A program run to completion: its exit status and everything it wrote (stdout and stderr).
struct ToolRun {
    var status: Int32
    var output: String

    /// Runs `executable` with `arguments`, `input` on its stdin; waits for it.
    static func run(_ executable: String, _ arguments: [String], input: String = "") throws -> ToolRun {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let output = Pipe()
        let stdin = Pipe()
        process.standardOutput = output
        process.standardError = output
        process.standardInput = stdin
        try process.run()
        stdin.fileHandleForWriting.write(Data(input.utf8))
        try? stdin.fileHandleForWriting.close()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return ToolRun(status: process.terminationStatus, output: String(decoding: data, as: UTF8.self))
    }
}

/// A throwaway private CA and server certificates it signs, made with `openssl` in a temporary
/// directory (removed by ``remove()``). Server certificates name `127.0.0.1` and `localhost`.
final class TestCertificates {
    static let openssl = "/usr/bin/openssl"
    static var available: Bool { FileManager.default.isExecutableFile(atPath: openssl) }

    enum Failure: Error {
        case openssl(String)
    }

    let directory: URL
    var caCertificate: String { path("ca.pem") }
    /// The server's certificate and key, where the server reads them.
    var certificate: String { path("server.pem") }
    var key: String { path("server.key") }

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("tabsync-tls-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try openssl([
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", path("ca.key"), "-out", caCertificate, "-days", "2", "-subj", "/CN=tabsync test CA",
            "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        ])
        try issue(commonName: "first")
    }

    func path(_ name: String) -> String { directory.appendingPathComponent(name).path }

    /// Makes a new key and a certificate for it signed by the CA, then moves both over
    /// ``certificate`` and ``key`` (each file replaced at once, never half written).
    func issue(commonName: String) throws {
        let stem = "issue-\(commonName)"
        try openssl([
            "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", path("\(stem).key"), "-out", path("\(stem).csr"), "-subj", "/CN=\(commonName)",
        ])
        try "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n"
            .write(toFile: path("\(stem).ext"), atomically: true, encoding: .utf8)
        try openssl([
            "x509", "-req", "-in", path("\(stem).csr"), "-CA", caCertificate, "-CAkey", path("ca.key"),
            "-CAcreateserial", "-out", path("\(stem).pem"), "-days", "2", "-extfile", path("\(stem).ext"),
        ])
        _ = rename(path("\(stem).key"), key)
        _ = rename(path("\(stem).pem"), certificate)
    }

    /// A key that is not the certificate's, written over ``key`` (a broken pair).
    func replaceKeyWithAnother() throws {
        try openssl(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-out", path("other.key")])
        _ = rename(path("other.key"), key)
    }

    /// The subject of the certificate a TLS server on `port` presents now (`openssl s_client`).
    static func servedSubject(port: Int) throws -> String {
        let run = try ToolRun.run(openssl, ["s_client", "-connect", "127.0.0.1:\(port)", "-brief"], input: "")
        let line = run.output.split(separator: "\n").first { $0.hasPrefix("Peer certificate:") }
        return line.map { String($0.dropFirst("Peer certificate:".count)).trimmingCharacters(in: .whitespaces) } ?? ""
    }

    func remove() { try? FileManager.default.removeItem(at: directory) }

    private func openssl(_ arguments: [String]) throws {
        let run = try ToolRun.run(Self.openssl, arguments)
        guard run.status == 0 else { throw Failure.openssl("openssl \(arguments.first ?? ""): \(run.output)") }
    }
}
