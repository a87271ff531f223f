import Foundation
import Testing
import TabsyncTestSupport
@testable import TabsyncServerCore

#if canImport(Glibc)
import Glibc
#endif

/// The pure parts of a webhook delivery (docs/design.md, "Webhooks"): the Standard Webhooks
/// signature, checked against the standard's published example and against Python's `hmac` (an
/// implementation that shares nothing with ours), and which addresses a delivery may connect to.
@Suite struct WebhookDeliveryRuleTests {
    /// The example of the Standard Webhooks specification (and its reference libraries' tests).
    @Test func theSignatureIsTheStandardsExample() {
        let signature = WebhookSignature.sign(
            secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", id: "msg_p5jXN8AQM9LWM0D4loKWxJek", timestamp: 1_614_265_330,
            body: Array(#"{"test": 2432232314}"#.utf8))
        #expect(signature == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
        #expect(WebhookSignature.sign(secret: "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", id: "x", timestamp: 1, body: []) == nil)
        #expect(WebhookSignature.id(workspace: "team-a", version: 7) == "team-a:7")
    }

    @Test func pythonsHmacAgreesOnRandomSecretsAndBodies() throws {
        var cases: [[String: Any]] = []
        var generator = SystemRandomNumberGenerator()
        for n in 0..<20 {
            let key = (0..<(24 + n * 2)).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
            let body = (0..<(n * 37)).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
            let secret = "whsec_" + Data(key).base64EncodedString()
            let id = WebhookSignature.id(workspace: "w\(n)", version: UInt64(n) * 1_000_003)
            let timestamp = Int64(1_795_000_000 + n)
            let ours = try #require(WebhookSignature.sign(secret: secret, id: id, timestamp: timestamp, body: body))
            cases.append(["secret": secret, "id": id, "timestamp": timestamp, "body": Data(body).base64EncodedString(), "ours": ours])
        }
        let script = """
            import base64, hashlib, hmac, json, sys
            bad = 0
            for c in json.load(sys.stdin):
                key = base64.b64decode(c["secret"][len("whsec_"):])
                message = f'{c["id"]}.{c["timestamp"]}.'.encode() + base64.b64decode(c["body"])
                theirs = "v1," + base64.b64encode(hmac.new(key, message, hashlib.sha256).digest()).decode()
                bad += theirs != c["ours"]
            print(f"{bad} differ")
            """
        let python = Process()
        python.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        python.arguments = ["python3", "-c", script]
        let input = Pipe(), output = Pipe()
        python.standardInput = input
        python.standardOutput = output
        try python.run()
        input.fileHandleForWriting.write(try JSONSerialization.data(withJSONObject: cases))
        try input.fileHandleForWriting.close()
        let answer = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        python.waitUntilExit()
        #expect(python.terminationStatus == 0)
        #expect(answer == "0 differ\n")
    }

    static func bytes(_ text: String) -> [UInt8] {
        if text.contains(":") {
            var address = in6_addr()
            precondition(inet_pton(AF_INET6, text, &address) == 1, text)
            return withUnsafeBytes(of: &address) { Array($0) }
        }
        var address = in_addr()
        precondition(inet_pton(AF_INET, text, &address) == 1, text)
        return withUnsafeBytes(of: &address) { Array($0) }
    }

    @Test(arguments: [
        "0.0.0.0", "10.1.2.3", "100.64.0.1", "100.127.255.255", "127.0.0.1", "127.255.0.9", "169.254.169.254",
        "172.16.0.1", "172.31.255.255", "192.0.0.8", "192.168.1.1", "198.18.0.1", "224.0.0.1", "239.255.255.250",
        "255.255.255.255", "::", "::1", "::127.0.0.1", "::ffff:127.0.0.1", "::ffff:10.0.0.1", "::ffff:169.254.169.254",
        "64:ff9b::a00:1", "fc00::1", "fd12:3456::1", "fe80::1", "febf::1", "fec0::1", "ff02::1",
    ])
    func privateLoopbackAndLinkLocalAddressesAreRefused(address: String) {
        #expect(WebhookTargetPolicy.refusal(Self.bytes(address)) != nil, "\(address)")
        #expect(WebhookTargetPolicy.refusal(Self.bytes(address), allowPrivate: true) == nil)
    }

    @Test(arguments: [
        "1.1.1.1", "8.8.8.8", "9.255.255.255", "11.0.0.1", "100.63.255.255", "100.128.0.1", "126.255.255.255",
        "128.0.0.1", "169.253.1.1", "172.15.255.255", "172.32.0.1", "192.0.2.1", "192.167.1.1", "192.169.0.1",
        "198.17.255.255", "198.20.0.1", "223.255.255.255", "2001:db8::1", "2606:4700::1111", "::ffff:8.8.8.8",
        "64:ff9b::808:808", "fbff::1", "fe00::1",
    ])
    func publicAddressesMayBeReached(address: String) {
        #expect(WebhookTargetPolicy.refusal(Self.bytes(address)) == nil, "\(address)")
    }
}
