import Foundation
import Testing
@testable import TabsyncServer

/// The Standard Webhooks signature of a delivery (docs/design.md, "Webhooks"), checked against
/// the standard's published example and against Python's `hmac` (an implementation that shares
/// nothing with ours).
@Suite struct WebhookSignatureTests {
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
}
