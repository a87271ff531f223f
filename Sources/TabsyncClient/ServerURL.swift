/// A parsed `ws://` or `wss://` server address: what a libwebsockets client connection needs.
///
/// Guarantees: `host` is non-empty (IPv6 literals without their brackets), `port` is in 1...65535
/// (80 for `ws`, 443 for `wss` when absent), `path` starts with `/` and keeps the query.
/// User info (`user@`) and fragments (`#...`) are refused rather than silently dropped.
public struct ServerURL: Sendable, Hashable, CustomStringConvertible {
    /// True for `wss://`.
    public var usesTLS: Bool
    public var host: String
    public var port: Int
    public var path: String

    public init(usesTLS: Bool, host: String, port: Int, path: String = "/") {
        self.usesTLS = usesTLS
        self.host = host
        self.port = port
        self.path = path
    }

    /// Parses `ws://HOST[:PORT][/PATH][?QUERY]` or `wss://...`; the scheme is case-insensitive.
    public init(parsing text: String) throws(ClientError) {
        func fail(_ why: String) -> ClientError { .invalidURL("\(text): \(why)") }
        let lower = text.lowercased()
        let rest: Substring
        if lower.hasPrefix("ws://") {
            usesTLS = false
            rest = text.dropFirst(5)
        } else if lower.hasPrefix("wss://") {
            usesTLS = true
            rest = text.dropFirst(6)
        } else {
            throw fail("the scheme must be ws:// or wss://")
        }
        if rest.contains("#") { throw fail("fragments are not allowed") }
        let authorityEnd = rest.firstIndex(where: { $0 == "/" || $0 == "?" }) ?? rest.endIndex
        let authority = rest[..<authorityEnd]
        var pathPart = String(rest[authorityEnd...])
        if pathPart.hasPrefix("?") { pathPart = "/" + pathPart }
        path = pathPart.isEmpty ? "/" : pathPart
        if path.contains(where: { $0 == " " || $0.isNewline }) { throw fail("the path has spaces") }
        if authority.contains("@") { throw fail("user info is not allowed") }

        let hostPart: Substring
        var portPart: Substring?
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { throw fail("unclosed [ in the host") }
            hostPart = authority[authority.index(after: authority.startIndex)..<close]
            let after = authority[authority.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw fail("junk after the IPv6 address") }
                portPart = after.dropFirst()
            }
        } else if let colon = authority.lastIndex(of: ":") {
            hostPart = authority[..<colon]
            portPart = authority[authority.index(after: colon)...]
        } else {
            hostPart = authority
        }
        if hostPart.isEmpty { throw fail("no host") }
        if hostPart.contains(where: { $0 == " " || $0 == "[" || $0 == "]" || $0.isNewline }) {
            throw fail("invalid host")
        }
        host = String(hostPart)
        if let portPart {
            guard let value = Int(portPart), portPart.allSatisfy(\.isASCII), (1...65535).contains(value) else {
                throw fail("the port must be 1...65535")
            }
            port = value
        } else {
            port = usesTLS ? 443 : 80
        }
    }

    /// The URL written back, IPv6 hosts bracketed, the port always present.
    public var description: String {
        let shownHost = host.contains(":") ? "[\(host)]" : host
        return "\(usesTLS ? "wss" : "ws")://\(shownHost):\(port)\(path)"
    }
}
