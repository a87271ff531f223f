/// Which addresses a webhook delivery may connect to (docs/design.md, "Webhooks"; docs/security.md):
/// a hook's URL is an admin's, but the name in it resolves anew at every delivery, so the address is
/// judged where the connection is made, after resolution, and a name that turns into a private
/// address later (DNS rebinding) is refused then.
///
/// Guarantees: ``refusal(_:)`` names a reason for every loopback, private, link-local, unspecified,
/// shared (CGNAT), benchmarking, multicast and reserved address, IPv4 or IPv6, including an IPv4
/// address carried in IPv6 (mapped `::ffff:a.b.c.d`, NAT64 `64:ff9b::a.b.c.d`, compatible
/// `::a.b.c.d`), and nil for any other unicast address. With `allowPrivate` (the server's
/// `--webhook-allow-private`) nothing is refused.
package enum WebhookTargetPolicy {
    /// Why a delivery may not connect to `address` (4 or 16 bytes, network order), or nil when it may.
    package static func refusal(_ address: [UInt8], allowPrivate: Bool = false) -> String? {
        if allowPrivate { return nil }
        switch address.count {
        case 4: return refusalV4(address[0], address[1], address[2], address[3])
        case 16: return refusalV6(address)
        default: return "not an IP address"
        }
    }

    private static func refusalV4(_ a: UInt8, _ b: UInt8, _ c: UInt8, _ d: UInt8) -> String? {
        switch (a, b, c) {
        case (0, _, _): "unspecified (0.0.0.0/8)"
        case (10, _, _): "private (10.0.0.0/8)"
        case (100, 64...127, _): "shared address space (100.64.0.0/10)"
        case (127, _, _): "loopback (127.0.0.0/8)"
        case (169, 254, _): "link-local (169.254.0.0/16)"
        case (172, 16...31, _): "private (172.16.0.0/12)"
        case (192, 0, 0): "IETF protocol assignments (192.0.0.0/24)"
        case (192, 168, _): "private (192.168.0.0/16)"
        case (198, 18...19, _): "benchmarking (198.18.0.0/15)"
        case (224...239, _, _): "multicast (224.0.0.0/4)"
        case (240...255, _, _): "reserved (240.0.0.0/4)"
        default: nil
        }
    }

    private static func refusalV6(_ bytes: [UInt8]) -> String? {
        let words = (0..<8).map { UInt16(bytes[2 * $0]) << 8 | UInt16(bytes[2 * $0 + 1]) }
        let v4 = Array(bytes[12..<16])
        if words[0..<6].allSatisfy({ $0 == 0 }) {
            if words[6] == 0 && words[7] == 0 { return "unspecified (::)" }
            if words[6] == 0 && words[7] == 1 { return "loopback (::1)" }
            return "IPv4-compatible (::/96)"
        }
        if words[0..<5].allSatisfy({ $0 == 0 }) && words[5] == 0xFFFF {
            return refusalV4(v4[0], v4[1], v4[2], v4[3]).map { "IPv4-mapped " + $0 }
        }
        if words[0] == 0x0064 && words[1] == 0xFF9B && words[2..<6].allSatisfy({ $0 == 0 }) {
            return refusalV4(v4[0], v4[1], v4[2], v4[3]).map { "NAT64 " + $0 }
        }
        switch words[0] {
        case 0xFC00...0xFDFF: return "unique local (fc00::/7)"
        case 0xFE80...0xFEBF: return "link-local (fe80::/10)"
        case 0xFEC0...0xFEFF: return "site-local (fec0::/10)"
        case 0xFF00...0xFFFF: return "multicast (ff00::/8)"
        default: return nil
        }
    }
}
