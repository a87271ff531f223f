import CLibwebsockets
import TabsyncCore
import TabsyncServerCore

/// One embedded file of the browser page: its bytes, Content-Type and a strong ETag.
struct WebAsset: Sendable {
    let contentType: String
    let etag: String
    let bytes: [UInt8]

    init(contentType: String, etag: String, text: String) {
        self.contentType = contentType
        self.etag = etag
        self.bytes = Array(text.utf8)
    }
}

/// The browser page compiled into the binary (WebAssets.generated.swift, from web/ by
/// scripts/gen-web), and the headers every answer of it carries.
///
/// Guarantees: every asset is served with its own Content-Type, `Cache-Control: no-cache` (the
/// browser revalidates with the ETag, so a new server never runs an old page), `nosniff`, and a
/// Content-Security-Policy that allows only this origin's scripts, styles and WebSocket, no
/// inline code, no frames, no other network.
enum WebAssets {
    static let contentSecurityPolicy =
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        + "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

    static func headers(etag: String) -> String {
        "Cache-Control: no-cache\r\n"
            + "ETag: \(etag)\r\n"
            + "Content-Security-Policy: \(contentSecurityPolicy)\r\n"
            + "X-Content-Type-Options: nosniff\r\n"
            + "Referrer-Policy: no-referrer\r\n"
    }

    /// The asset a path names: `/` and `/w/{workspace}` are the page, `/web/NAME` its files.
    static func asset(for path: String) -> WebAsset? {
        if path == "/" || path == "/index.html" { return files["index.html"] }
        let workspacePrefix = "/w/"
        if path.hasPrefix(workspacePrefix) {
            let id = String(path.dropFirst(workspacePrefix.count))
            return Validation.isValidWorkspaceId(id) ? files["index.html"] : nil
        }
        let assetPrefix = "/web/"
        guard path.hasPrefix(assetPrefix) else { return nil }
        return files[String(path.dropFirst(assetPrefix.count))]
    }
}

extension LoopDriver {
    /// The browser page's answer for `path`, or nil when the path is not one of its own.
    /// A request whose If-None-Match holds the asset's ETag gets 304 without a body.
    func webResponse(_ path: String, wsi: OpaquePointer) -> HTTPResponse? {
        guard let asset = WebAssets.asset(for: path) else { return nil }
        var buffer = [CChar](repeating: 0, count: 512)
        let length = clws_request_if_none_match(wsi, &buffer, Int32(buffer.count))
        let headers = WebAssets.headers(etag: asset.etag)
        if length > 0, String(nulTerminated: buffer).split(separator: ",")
            .contains(where: { $0.trimmingCharacters(in: " ") == asset.etag }) {
            var notModified = HTTPResponse(status: 304, contentType: asset.contentType, bytes: [])
            notModified.headers = headers
            return notModified
        }
        var response = HTTPResponse(status: 200, contentType: asset.contentType, bytes: asset.bytes)
        response.headers = headers
        return response
    }
}
