import CLibwebsockets
import SwiftProtobuf
import TabsyncCore
import TabsyncProto

/// An HTTP answer, written whole.
struct HTTPResponse {
    var status: UInt32
    var contentType: String
    var body: [UInt8]
    /// Extra header lines, each "Name: value\r\n" (the browser page's caching and CSP headers).
    var headers: String = ""

    init(status: UInt32, contentType: String = "text/plain; charset=utf-8", body: String) {
        self.status = status
        self.contentType = contentType
        self.body = Array(body.utf8)
    }

    init(status: UInt32, contentType: String, bytes: [UInt8]) {
        self.status = status
        self.contentType = contentType
        self.body = bytes
    }

    static let notFound = HTTPResponse(status: 404, body: "not found\n")
}

extension Server.Loop {
    /// The subprotocols served, as the 400 answer to a bad upgrade names them.
    static var servedSubprotocols: String {
        WireFormat.allCases.map(\.subprotocol).joined(separator: ", ")
    }

    /// protocols[0]: plain HTTP and the upgrade check. Event loop thread.
    func handleHTTP(
        _ wsi: OpaquePointer, _ reason: lws_callback_reasons, _ user: UnsafeMutableRawPointer?,
        _ input: UnsafeMutableRawPointer?, _ length: Int
    ) -> Int32 {
        switch reason {
        case LWS_CALLBACK_HTTP_CONFIRM_UPGRADE:
            return confirmUpgrade(wsi)

        case LWS_CALLBACK_HTTP:
            let uri = input.map { String(cString: $0.assumingMemoryBound(to: CChar.self)) } ?? "/"
            let path = uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? uri
            if let response = route(path, wsi: wsi, user: user) {
                return respond(wsi, response)
            }
            return 0  // answered later, from HTTP_WRITEABLE

        case LWS_CALLBACK_HTTP_WRITEABLE:
            guard let id = user?.load(as: Int.self), id != 0,
                  let pending = pendingHTTP[id], let response = pending.response else { return 0 }
            pendingHTTP[id] = nil
            return respond(wsi, response)

        case LWS_CALLBACK_CLOSED_HTTP:
            if let id = user?.load(as: Int.self), id != 0 { pendingHTTP[id] = nil }
            return 0

        default:
            return lws_callback_http_dummy(wsi, reason, user, input, length)
        }
    }

    /// Writes a whole response and ends the transaction (keep-alive). Nonzero: close the connection.
    private func respond(_ wsi: OpaquePointer, _ response: HTTPResponse) -> Int32 {
        let failed = response.body.withUnsafeBufferPointer { body in
            response.headers.isEmpty
                ? clws_http_respond(wsi, response.status, response.contentType, body.baseAddress, body.count)
                : clws_http_respond_with_headers(
                    wsi, response.status, response.contentType, response.headers, body.baseAddress, body.count)
        }
        if failed != 0 { return -1 }
        return lws_http_transaction_completed(wsi) != 0 ? -1 : 0
    }

    /// The response for a GET, or nil when it waits for a store load.
    private func route(_ path: String, wsi: OpaquePointer, user: UnsafeMutableRawPointer?) -> HTTPResponse? {
        switch path {
        case "/healthz":
            return HTTPResponse(status: 200, body: "ok\n")
        case "/metrics":
            return HTTPResponse(
                status: 200, contentType: "text/plain; version=0.0.4; charset=utf-8", body: renderMetrics())
        default:
            break
        }
        if configuration.serveWeb, let page = webResponse(path, wsi: wsi) { return page }
        let prefix = "/v1/workspaces/"
        guard path.hasPrefix(prefix) else { return .notFound }
        let id = String(path.dropFirst(prefix.count))
        if configuration.accessTokens != nil {
            return authorizeSnapshotRequest(id, wsi: wsi, user: user)
        }
        guard Validation.isValidWorkspaceId(id) else { return .notFound }
        return snapshotOrLoad(id, wsi: wsi, user: user)
    }

    /// The snapshot of a valid workspace id, or nil when it is being loaded to answer later.
    func snapshotOrLoad(_ id: String, wsi: OpaquePointer, user: UnsafeMutableRawPointer?) -> HTTPResponse? {
        if let response = snapshotResponse(id) { return response }
        // Not in memory: load it on the store thread and answer when it arrives.
        guard let user else { return .notFound }
        let requestId = makeId()
        user.storeBytes(of: requestId, as: Int.self)
        pendingHTTP[requestId] = PendingHTTP(wsi: wsi, workspaceId: id, response: nil)
        requestLoad(id)
        return nil
    }

    /// The snapshot answer for a loaded workspace (404 when it has no applied op), nil when not loaded.
    func snapshotResponse(_ id: String) -> HTTPResponse? {
        guard let hub = workspaces[id]?.hub else { return nil }
        let workspace = hub.durable
        guard workspace.version > 0 else { return .notFound }
        do {
            let json: [UInt8] = try Tabsync_V1_Snapshot(workspace).jsonUTF8Bytes()
            return HTTPResponse(status: 200, contentType: "application/json", bytes: json + [0x0A])
        } catch {
            return HTTPResponse(status: 500, body: "cannot encode snapshot\n")
        }
    }

    /// Answers the HTTP requests that waited for `id` to load.
    func answerPendingHTTP(for id: String, failed: Bool) {
        for (requestId, pending) in pendingHTTP
        where pending.workspaceId == id && pending.response == nil && !pending.authorizing {
            let response = failed
                ? HTTPResponse(status: 503, body: "store unavailable\n")
                : (snapshotResponse(id) ?? .notFound)
            pendingHTTP[requestId]?.response = response
            lws_callback_on_writable(pending.wsi)
        }
    }

    private func renderMetrics() -> String {
        var queued = 0
        for session in sessions.values { queued += session.queue.bytes }
        return metrics.render(Metrics.Gauges(
            connections: sessions.count, socketsOpen: openConnections, workspacesLoaded: workspaces.count, sendQueueBytes: queued))
    }

    /// `LWS_CALLBACK_HTTP_CONFIRM_UPGRADE`: only `/` upgrades, only to a served subprotocol, and
    /// only from an allowed browser origin (403 otherwise, see ``OriginPolicy``).
    /// Refusals are answered here (404 for another path, 400 naming the served subprotocols);
    /// returning 1 tells lws the response was written.
    private func confirmUpgrade(_ wsi: OpaquePointer) -> Int32 {
        if let refusal = originRefusal(wsi) { return refuseUpgrade(wsi, refusal) }
        var buffer = [CChar](repeating: 0, count: 1024)
        let uriLength = clws_request_uri(wsi, &buffer, Int32(buffer.count))
        let uri = uriLength >= 0 ? String(nulTerminated: buffer) : ""
        let path = uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? uri
        if path != "/" {
            logger.info("upgrade refused: path", metadata: ["path": "\(path.prefix(128))"])
            return refuseUpgrade(wsi, .notFound)
        }
        let listLength = clws_request_subprotocols(wsi, &buffer, Int32(buffer.count))
        let offered = listLength > 0
            ? String(nulTerminated: buffer).split(separator: ",").map { $0.trimmingCharacters(in: " \t") }
            : []
        // lws binds the first offered name it knows; it must be one of ours (not protocols[0]).
        var known = Set(["http"] + WireFormat.allCases.map(\.subprotocol))
        if configuration.diagnosticsEcho { known.insert(Self.echoSubprotocol) }
        let picked = offered.first(where: { known.contains($0) })
        guard let picked, WireFormat(subprotocol: picked) != nil || picked == Self.echoSubprotocol else {
            logger.info("upgrade refused: subprotocol", metadata: ["offered": "\(offered.joined(separator: ",").prefix(128))"])
            return refuseUpgrade(wsi, HTTPResponse(
                status: 400,
                body: "unsupported or missing WebSocket subprotocol; this server speaks: \(Self.servedSubprotocols)\n"))
        }
        return 0
    }

    /// Answers a refused upgrade in HTTP/1.1 (lws' helpers would say HTTP/1.0 here, which Python's
    /// `websockets` and other strict clients cannot read) and closes the connection after it.
    private func refuseUpgrade(_ wsi: OpaquePointer, _ response: HTTPResponse) -> Int32 {
        let failed = response.body.withUnsafeBufferPointer { body in
            clws_http_refuse_upgrade(wsi, response.status, response.contentType, body.baseAddress, body.count)
        }
        return failed != 0 ? -1 : 1
    }
}

extension String {
    /// The text of a NUL-terminated C buffer (invalid UTF-8 repaired).
    init(nulTerminated buffer: [CChar]) {
        let bytes = buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
        self = String(decoding: bytes, as: UTF8.self)
    }
}

extension Substring {
    /// The substring without leading and trailing characters in `set`.
    func trimmingCharacters(in set: String) -> String {
        var s = self
        while let c = s.first, set.contains(c) { s.removeFirst() }
        while let c = s.last, set.contains(c) { s.removeLast() }
        return String(s)
    }
}
