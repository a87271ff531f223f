import CLibwebsockets
import SwiftProtobuf
import TabsyncCore
import TabsyncProto
import TabsyncServerCore

extension LoopDriver {
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
            if path.hasPrefix("/v1/admin/") || Self.writeWorkspace(path) != nil { return startAdmin(path, wsi: wsi, user: user) }
            if let response = route(path, wsi: wsi, user: user) {
                return respond(wsi, response)
            }
            return 0  // answered later, from HTTP_WRITEABLE

        case LWS_CALLBACK_HTTP_BODY:
            guard let id = user?.load(as: Int.self), id != 0, pendingHTTP[id]?.admin != nil, let input else { return 0 }
            if pendingHTTP[id]!.admin!.body.count + length > pendingHTTP[id]!.admin!.limit {
                pendingHTTP[id]!.admin!.tooLarge = true
            } else {
                let bytes = UnsafeRawBufferPointer(start: input, count: length)
                pendingHTTP[id]!.admin!.body.append(contentsOf: bytes)
            }
            return 0

        case LWS_CALLBACK_HTTP_BODY_COMPLETION:
            guard let id = user?.load(as: Int.self), id != 0, pendingHTTP[id]?.admin != nil else { return 0 }
            return finishAdmin(id, wsi: wsi)

        case LWS_CALLBACK_HTTP_WRITEABLE:
            if let id = user?.load(as: Int.self), id != 0, feedStreams[id] != nil { return writeFeed(id) }
            guard let id = user?.load(as: Int.self), id != 0,
                  let pending = pendingHTTP[id], let response = pending.response else { return 0 }
            pendingHTTP[id] = nil
            return respond(wsi, response)

        case LWS_CALLBACK_CLOSED_HTTP:
            if let id = user?.load(as: Int.self), id != 0,
               pendingHTTP.removeValue(forKey: id) != nil || feedStreams.removeValue(forKey: id) != nil {
                dispatch(.requestGone(id))
            }
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
            return core.health  // 503 while draining (docs/design.md, "HTTP endpoints")
        case "/metrics":
            return HTTPResponse(
                status: 200, contentType: "text/plain; version=0.0.4; charset=utf-8", body: renderMetrics())
        default:
            break
        }
        if configuration.serveWeb, let page = webResponse(path, wsi: wsi) { return page }
        let prefix = "/v1/workspaces/"
        guard path.hasPrefix(prefix), let user else { return .notFound }
        // The core answers (at once, or once a token check or a load is done).
        let requestId = makeId()
        user.storeBytes(of: requestId, as: Int.self)
        pendingHTTP[requestId] = PendingHTTP(wsi: wsi, response: nil)
        routing = requestId
        let rest = String(path.dropFirst(prefix.count))
        let token = configuration.accessTokens != nil ? Self.bearerToken(wsi) : nil
        let query = Self.queryString(wsi)
        if rest.hasSuffix("/events") {
            guard case .from(let after) = Self.feedResume(wsi, query: query) else {
                pendingHTTP[requestId] = nil
                routing = nil
                return HTTPResponse(status: 400, body: "after (or Last-Event-ID) must be a version: a whole number\n")
            }
            dispatch(.feedRequested(
                requestId, workspaceId: String(rest.dropLast("/events".count)), after: after, bearerToken: token))
        } else if rest.hasSuffix("/history") {
            dispatch(.historyRequested(
                requestId, workspaceId: String(rest.dropLast("/history".count)), resource: .ops, query: query, bearerToken: token))
        } else if rest.hasSuffix("/closed") {
            dispatch(.historyRequested(
                requestId, workspaceId: String(rest.dropLast("/closed".count)), resource: .closed, query: query, bearerToken: token))
        } else if query.split(separator: "&").contains(where: { $0.hasPrefix("version=") || $0.hasPrefix("at=") }) {
            dispatch(.historyRequested(requestId, workspaceId: rest, resource: .state, query: query, bearerToken: token))
        } else {
            dispatch(.snapshotRequested(requestId, workspaceId: rest, bearerToken: token))
        }
        routing = nil
        guard let response = pendingHTTP[requestId]?.response else { return nil }
        pendingHTTP[requestId] = nil
        return response
    }

    /// `/v1/admin/...` (docs/operating.md, "The admin API"): a GET or DELETE is handed to the core
    /// at once; a POST once its body is in (at most ``AdminRequest/maxBodyBytes``, else 413).
    private func startAdmin(_ path: String, wsi: OpaquePointer, user: UnsafeMutableRawPointer?) -> Int32 {
        guard let user else { return respond(wsi, .notFound) }
        var uriPointer: UnsafeMutablePointer<CChar>?
        var uriLength: Int32 = 0
        let methods = ["GET", "POST", "OPTIONS", "PUT", "PATCH", "DELETE", "CONNECT", "HEAD"]
        let index = Int(lws_http_get_uri_and_method(wsi, &uriPointer, &uriLength))
        let method = methods.indices.contains(index) ? methods[index] : "UNKNOWN"
        let requestId = makeId()
        user.storeBytes(of: requestId, as: Int.self)
        var call = PendingAdmin(method: method, path: path, query: Self.queryString(wsi))
        if Self.writeWorkspace(path) != nil {
            guard method == "POST" else {
                pendingHTTP[requestId] = nil
                return respond(wsi, HTTPResponse(status: 405, body: "POST only\n"))
            }
            call.limit = configuration.limits.maxFrameBytes
        }
        pendingHTTP[requestId] = PendingHTTP(wsi: wsi, response: nil, admin: call)
        if method == "POST" { return 0 }  // the body follows (LWS_CALLBACK_HTTP_BODY)
        return finishAdmin(requestId, wsi: wsi)
    }

    /// The admin call is whole: parsed, then handed to the core (answered now or later).
    private func finishAdmin(_ requestId: Int, wsi: OpaquePointer) -> Int32 {
        guard let admin = pendingHTTP[requestId]?.admin else { return 0 }
        pendingHTTP[requestId]!.admin = nil
        if admin.tooLarge {
            pendingHTTP[requestId] = nil
            return respond(wsi, HTTPResponse(status: 413, body: "the body is over \(admin.limit) bytes\n"))
        }
        if let workspaceId = Self.writeWorkspace(admin.path) {
            routing = requestId
            dispatch(.writeRequested(
                requestId, workspaceId: workspaceId, key: Self.customHeader(wsi, "idempotency-key:", maxBytes: 4096), body: admin.body,
                bearerToken: configuration.accessTokens != nil ? Self.bearerToken(wsi) : nil))
            routing = nil
            guard let response = pendingHTTP[requestId]?.response else { return 0 }
            pendingHTTP[requestId] = nil
            return respond(wsi, response)
        }
        let request: AdminRequest
        switch AdminRequest.parse(method: admin.method, path: admin.path, query: admin.query, body: admin.body) {
        case .failure(let refusal):
            pendingHTTP[requestId] = nil
            return respond(wsi, refusal.response)
        case .success(let parsed):
            request = parsed
        }
        routing = requestId
        dispatch(.adminRequested(requestId, request, bearerToken: Self.bearerToken(wsi)))
        routing = nil
        guard let response = pendingHTTP[requestId]?.response else { return 0 }
        pendingHTTP[requestId] = nil
        return respond(wsi, response)
    }

    /// The workspace id of `POST /v1/workspaces/{id}/ops` (ServerCore+Write.swift), nil for any other path.
    static func writeWorkspace(_ path: String) -> String? {
        let prefix = "/v1/workspaces/", suffix = "/ops"
        guard path.hasPrefix(prefix), path.hasSuffix(suffix), path.count > prefix.count + suffix.count else { return nil }
        let id = path.dropFirst(prefix.count).dropLast(suffix.count)
        return id.contains("/") ? nil : String(id)
    }

    /// A header lws does not know by name (`name`: lower case, with its colon), trimmed; nil when
    /// absent or over `maxBytes`.
    static func customHeader(_ wsi: OpaquePointer, _ name: String, maxBytes: Int) -> String? {
        let length = Int(lws_hdr_custom_length(wsi, name, Int32(name.utf8.count)))
        guard length > 0, length <= maxBytes else { return nil }
        var buffer = [CChar](repeating: 0, count: length + 1)
        guard lws_hdr_custom_copy(wsi, &buffer, Int32(buffer.count), name, Int32(name.utf8.count)) >= 0 else { return nil }
        return Substring(String(nulTerminated: buffer)).trimmingCharacters(in: " \t")
    }

    /// The query string of the request (`a=1&b=2`), empty when there is none: lws keeps each
    /// `&`-separated argument as one fragment of `WSI_TOKEN_HTTP_URI_ARGS`.
    static func queryString(_ wsi: OpaquePointer) -> String {
        let length = Int(lws_hdr_total_length(wsi, WSI_TOKEN_HTTP_URI_ARGS))
        guard length > 0, length <= 4096 else { return "" }
        var buffer = [CChar](repeating: 0, count: length + 1)
        var arguments: [String] = []
        for index in 0..<64 {
            guard lws_hdr_copy_fragment(wsi, &buffer, Int32(buffer.count), WSI_TOKEN_HTTP_URI_ARGS, Int32(index)) >= 0 else { break }
            arguments.append(String(nulTerminated: buffer))
        }
        return arguments.joined(separator: "&")
    }

    /// The token of an `Authorization: Bearer TOKEN` header, nil when there is none.
    static func bearerToken(_ wsi: OpaquePointer) -> String? {
        let length = Int(lws_hdr_total_length(wsi, WSI_TOKEN_HTTP_AUTHORIZATION))
        guard length > 0, length <= 8192 else { return nil }
        var buffer = [CChar](repeating: 0, count: length + 1)
        guard lws_hdr_copy(wsi, &buffer, Int32(buffer.count), WSI_TOKEN_HTTP_AUTHORIZATION) >= 0 else { return nil }
        let value = String(nulTerminated: buffer)
        let scheme = "bearer "
        guard value.lowercased().hasPrefix(scheme) else { return nil }
        let token = value.dropFirst(scheme.count).trimmingCharacters(in: " \t")
        return token.isEmpty ? nil : token
    }

    private func renderMetrics() -> String {
        if let holders = configuration.sharedStore?.holders { metrics.notificationsSent = holders.notificationsSent }
        var queued = 0
        for connection in connections.values { queued += connection.queue.bytes }
        return core.metrics.render(Metrics.Gauges(
            connections: connections.count, socketsOpen: openConnections, workspacesLoaded: core.workspacesInMemory,
            sendQueueBytes: queued, maxConnections: configuration.maxConnections), driver: metrics)
            + (server.deliverer?.metricsText() ?? WebhookMetrics.zeros)
    }

    /// `LWS_CALLBACK_HTTP_CONFIRM_UPGRADE`: only `/` and `/v1/workspaces/{id}/ws` upgrade
    /// (``UpgradePath``), only to a served subprotocol, and only from an allowed browser origin (403
    /// otherwise, see ``OriginPolicy``). Refusals are answered here (404 for another path, 400 for
    /// an invalid workspace id in the path, 400 naming the served subprotocols); returning 1 tells
    /// lws the response was written. The path's workspace is kept for `ESTABLISHED`
    /// (``upgradeWorkspaces``).
    private func confirmUpgrade(_ wsi: OpaquePointer) -> Int32 {
        if let refusal = originRefusal(wsi) { return refuseUpgrade(wsi, refusal) }
        var buffer = [CChar](repeating: 0, count: 1024)
        let uriLength = clws_request_uri(wsi, &buffer, Int32(buffer.count))
        let uri = uriLength >= 0 ? String(nulTerminated: buffer) : ""
        let path = uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? uri
        let upgradePath: UpgradePath
        do throws(UpgradePathError) {
            upgradePath = try UpgradePath.parse(path)
        } catch {
            logger.info("upgrade refused: path", metadata: ["path": "\(path.prefix(128))", "status": "\(error.status)"])
            return refuseUpgrade(wsi, error.response)
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
        upgradeWorkspaces[wsi] = upgradePath.workspaceId
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
