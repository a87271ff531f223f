/// Which browser pages may open a WebSocket, decided from the handshake's `Origin` header.
///
/// Guarantees:
/// - a handshake without `Origin` is allowed: browsers always send it on WebSocket handshakes, so
///   such a client is a program, which the `Origin` check cannot and does not try to stop;
/// - with an allow-list, exactly the listed origins are allowed (`*` lists every one); origins
///   compare case-insensitively, with the scheme's default port and a trailing `/` ignored; a
///   browser extension's origin (`chrome-extension://ID`, `moz-extension://UUID`) can be listed;
///   `moz-extension://*` lists every Firefox extension's origin (Firefox gives each installation
///   a random UUID; a web page cannot send that scheme, so it admits extensions only);
/// - with no allow-list: any origin when clients authenticate (a page needs a token like any
///   client); only loopback pages (`localhost`, `127.0.0.0/8`, `[::1]`) when auth is off on a
///   loopback bind (an extension is not a loopback page: list it); none when auth is off on any
///   other address (`--insecure-no-auth`).
struct OriginPolicy: Sendable, Equatable {
    enum Rule: Sendable, Equatable {
        case list(Set<String>, anyFirefoxExtension: Bool)
        case any
        case loopbackOnly
        case none
    }

    let rule: Rule

    init(allowed: [String], authEnabled: Bool, loopbackBind: Bool) {
        if !allowed.isEmpty {
            let entries = Set(allowed.map(Self.normalize))
            rule = allowed.contains("*") ? .any
                : .list(entries.subtracting([Self.anyFirefoxExtension]),
                        anyFirefoxExtension: entries.contains(Self.anyFirefoxExtension))
        } else if authEnabled {
            rule = .any
        } else {
            rule = loopbackBind ? .loopbackOnly : .none
        }
    }

    /// True when a handshake carrying `origin` (nil: no header) may go on.
    func allows(_ origin: String?) -> Bool {
        guard let origin else { return true }
        switch rule {
        case .any: return true
        case .none: return false
        case .list(let allowed, let anyFirefoxExtension):
            let normal = Self.normalize(origin)
            if allowed.contains(normal) { return true }
            return anyFirefoxExtension && normal.hasPrefix("moz-extension://") && Self.isValidEntry(normal)
                && normal != Self.anyFirefoxExtension
        case .loopbackOnly: return Self.isLoopbackOrigin(Self.normalize(origin))
        }
    }

    /// The entry that lists every Firefox extension's origin.
    static let anyFirefoxExtension = "moz-extension://*"

    /// True for `*`, `null`, `scheme://host[:port]` (http or https; no path, query or user info)
    /// and a browser extension's origin: `chrome-extension://ID` (Chromium: 32 letters `a`–`p`)
    /// or `moz-extension://UUID` (Firefox: the per-install UUID, hex and dashes), or
    /// `moz-extension://*` (any Firefox extension). What `--allow-origin` accepts.
    static func isValidEntry(_ entry: String) -> Bool {
        if entry == "*" || entry == "null" { return true }
        if normalize(entry) == anyFirefoxExtension { return true }
        guard let split = entry.range(of: "://") else { return false }
        let scheme = entry[..<split.lowerBound].lowercased()
        var rest = entry[split.upperBound...]
        if rest.hasSuffix("/") { rest = rest.dropLast() }
        switch scheme {
        case "chrome-extension":
            return rest.count == 32 && rest.lowercased().allSatisfy { ("a"..."p").contains($0) }
        case "moz-extension":
            return (1...64).contains(rest.count) && rest.lowercased().allSatisfy { $0.isHexDigit || $0 == "-" }
        case "http", "https":
            return !rest.isEmpty && !rest.contains { "/?#@ ".contains($0) }
        default:
            return false
        }
    }

    /// Lower case, no trailing `/`, no default port (`:443` for https, `:80` for http).
    static func normalize(_ origin: String) -> String {
        var text = origin.lowercased()
        if text.hasSuffix("/") { text.removeLast() }
        if text.hasPrefix("https://"), text.hasSuffix(":443") { text.removeLast(4) }
        if text.hasPrefix("http://"), text.hasSuffix(":80") { text.removeLast(3) }
        return text
    }

    /// `http(s)://` on localhost, an address in 127.0.0.0/8 or [::1], any port.
    static func isLoopbackOrigin(_ origin: String) -> Bool {
        guard let split = origin.range(of: "://"),
              ["http", "https"].contains(origin[..<split.lowerBound]) else { return false }
        var host = Substring(origin[split.upperBound...])
        if host.hasPrefix("[") {
            guard let close = host.firstIndex(of: "]") else { return false }
            return host[host.index(after: host.startIndex)..<close] == "::1"
        }
        if let colon = host.lastIndex(of: ":") { host = host[..<colon] }
        if host == "localhost" { return true }
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts[0] == "127" && parts.allSatisfy { UInt8($0) != nil }
    }
}
