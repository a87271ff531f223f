import Foundation
import Testing
import TabsyncTestSupport
@testable import TabsyncServerCore

#if canImport(Glibc)
import Glibc
#endif

/// The pure parts of a webhook delivery (docs/design.md, "Webhooks"): which addresses a delivery
/// may connect to. (The signature's tests are in TabsyncServerTests, beside `WebhookSignature`.)
@Suite struct WebhookDeliveryRuleTests {
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
