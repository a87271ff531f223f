import Foundation
import TabsyncTestSupport

/// A throwaway private CA and server certificates it signs, made with `openssl` in a temporary
/// directory (removed with the object). Server certificates name `127.0.0.1` and `localhost`.
final class TestCertificates {
    static let openssl = "/usr/bin/openssl"
    static var available: Bool { FileManager.default.isExecutableFile(atPath: openssl) }

    enum Failure: Error {
        case openssl(String)
    }

    private let directory: TemporaryDirectory
    var caCertificate: String { path("ca.pem") }
    /// The server's certificate and key, where the server reads them.
    var certificate: String { path("server.pem") }
    var key: String { path("server.key") }

    init() throws {
        directory = TemporaryDirectory(prefix: "tabsync-tls")
        try openssl([
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", path("ca.key"), "-out", caCertificate, "-days", "2", "-subj", "/CN=tabsync test CA",
            "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        ])
        try issue(commonName: "first")
    }

    func path(_ name: String) -> String { directory.path + "/" + name }

    /// Makes a new key and a certificate for it signed by the CA, then moves both over
    /// ``certificate`` and ``key`` (each file replaced at once, never half written).
    /// `altNames`: the subjectAltName the certificate names (default: this machine's loopback).
    func issue(commonName: String, altNames: String = "IP:127.0.0.1,DNS:localhost") throws {
        let stem = "issue-\(commonName)"
        try openssl([
            "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", path("\(stem).key"), "-out", path("\(stem).csr"), "-subj", "/CN=\(commonName)",
        ])
        try "subjectAltName=\(altNames)\nextendedKeyUsage=serverAuth\n"
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

    private func openssl(_ arguments: [String]) throws {
        let run = try ToolRun.run(Self.openssl, arguments)
        guard run.status == 0 else { throw Failure.openssl("openssl \(arguments.first ?? ""): \(run.output)") }
    }
}
