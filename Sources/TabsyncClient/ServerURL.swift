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

    /// The URL a session of `workspace` connects to (docs/design.md, "The protocol in brief"):
    /// `/v1/workspaces/{workspace}/ws` under this URL's path (its trailing `/` dropped, its query
    /// kept), so that a proxy in front of several nodes can route by workspace. A path that
    /// already names a session socket (it ends in `/ws`) is kept as it is. The id is written as it
    /// is when it follows the workspace id rule (it then needs no escaping), percent-encoded
    /// otherwise (the server refuses it: 400).
    public func session(for workspace: String) -> ServerURL {
        let parts = path.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        var base = String(parts[0])
        if base.hasSuffix("/ws") { return self }
        while base.hasSuffix("/") { base.removeLast() }
        let query = parts.count > 1 ? "?" + parts[1] : ""
        var copy = self
        copy.path = "\(base)/v1/workspaces/\(Self.escaped(workspace))/ws\(query)"
        return copy
    }

    /// `text` with every byte outside `A–Z a–z 0–9 - . _ ~` percent-encoded.
    static func escaped(_ text: String) -> String {
        var out = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                 UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                out += "%" + String(byte, radix: 16, uppercase: true).leftPadded(to: 2)
            }
        }
        return out
    }

    /// The URL written back, IPv6 hosts bracketed, the port always present.
    public var description: String {
        let shownHost = host.contains(":") ? "[\(host)]" : host
        return "\(usesTLS ? "wss" : "ws")://\(shownHost):\(port)\(path)"
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}
