import Foundation
import SwiftProtobuf
import TabsyncCore
import TabsyncProto

/// `POST /v1/workspaces/{id}/ops` with `Idempotency-Key` (docs/design.md, "HTTP writes").
///
/// Guarantees: the body's ops go through the same sequencer and commit pipeline as a session's
/// Submits, as one client's consecutive seqs; the answer goes out only once every op is stored (or
/// refused), in body order. The key is mapped onto the sessions' (clientId, seq) dedup, which the
/// stores keep across restarts: clientId `http:KEY`, seqs `base+1 … base+n` where `base` is a
/// fingerprint of the body (``HTTPWrite/seqBase(of:)``). So a repeat of the same key and body finds
/// its seqs consumed and gets the same answers with nothing applied again, and a different body under
/// a used key is recognised by the client's last seq (`base+n`) and refused 422 before anything is
/// sequenced. A transient refusal (draining, the store failing, the workspace reloading) is 503 with
/// `Retry-After`, and consumes nothing, so the same request may be sent again; so is a write over
/// its rate (429, ServerCore+WriteRate.swift).
extension ServerCore {
    /// One write whose ops are in the pipeline: the answers so far, by seq.
    struct HTTPWrite {
        var workspaceId: String
        var clientId: String
        var seqs: [UInt64]
        var answers: [UInt64: WriteAnswer] = [:]
    }

    /// One op's answer: applied (its version and op as stored) or refused (its wire code).
    enum WriteAnswer {
        case applied(AppliedOp)
        case refused(ErrorCode, String)
    }

    /// A write refused whole before anything is sequenced (400, 403, 422, 503).
    struct WriteRefusal: Error {
        var response: HTTPResponse
    }

    /// The most ops one write holds.
    package static let maxWriteOps = 1_000

    /// A parsed write request, before its workspace is known to be loaded.
    struct WriteStart {
        var key: String
        var ops: [Result<TabsyncCore.Operation, OpError>]
        var kinds: [Tabsync_V1_Op.OneOf_Kind?]
        var seqBase: UInt64
    }

    /// The request, as the driver read it (the key nil when the header is absent).
    mutating func writeRequested(
        _ requestId: RequestID, workspaceId id: String, key: String?, body: [UInt8], bearerToken: String?
    ) {
        guard shutdown == .running else { return emit(.respond(requestId, Self.retryLater("the server is stopping"))) }
        let start: WriteStart
        switch Self.parseWrite(key: key, body: body, maxOps: Self.maxWriteOps) {
        case .success(let s): start = s
        case .failure(let refusal): return emit(.respond(requestId, refusal.response))
        }
        if settings.accessControl {
            guard let token = bearerToken else { return emit(.respond(requestId, .unauthorized)) }
            pendingHTTP[requestId] = PendingHTTP(workspaceId: id, authorizing: true, write: start)
            emit(.verifyToken(.http(requestId), token))
            return
        }
        guard Validation.isValidWorkspaceId(id) else { return emit(.respond(requestId, .notFound)) }
        startWrite(requestId, id, start, grant: nil)
    }

    /// The token was good for this workspace: a viewer (or an editor's `setEditable`) is 403.
    mutating func startWrite(_ requestId: RequestID, _ id: String, _ start: WriteStart, grant: AccessGrant?) {
        if let grant, let kind = start.kinds.first(where: { !grant.role.permits($0) }) {
            let refusal = AuthError.notPermitted(role: grant.role, op: kind.map { Self.opName($0) } ?? "an empty op")
            return emit(.respond(requestId, Self.jsonError(403, refusal.code, refusal.description)))
        }
        guard !isBeingDeleted(id) else { return emit(.respond(requestId, .notFound)) }
        // Not in memory, or on its way (another request started the load): answered once loaded.
        guard let phase = workspaces.phase(id), phase != .loading else {
            pendingHTTP[requestId] = PendingHTTP(workspaceId: id, authorizing: false, grant: grant, write: start)
            requestLoad(id)
            return
        }
        guard case .loaded = phase, workspaces.hub(id) != nil else {
            return emit(.respond(requestId, Self.retryLater("the workspace is being read back from the store")))
        }
        sequenceWrite(requestId, id, start, author: grant?.subject)
    }

    /// Checks the key against the client's last seq, then sequences every op (or answers 422).
    private mutating func sequenceWrite(_ requestId: RequestID, _ id: String, _ start: WriteStart, author: String?) {
        guard let hub = workspaces.hub(id) else { return emit(.respond(requestId, .storeUnavailable)) }
        let clientId = "http:" + start.key
        let seqs = (1...UInt64(start.ops.count)).map { start.seqBase + $0 }
        let last = hub.live.lastSeq(of: clientId)
        guard last == 0 || last == seqs.last! else {
            return emit(.respond(requestId, Self.jsonError(
                422, .invalidArgument, "Idempotency-Key \(start.key) was used with another body")))
        }
        // A repeat of an answered key applies nothing: it is not charged.
        if last == 0, let refusal = chargeWrite(workspace: id, subject: author, ops: start.ops.count) {
            return emit(.respond(requestId, refusal))
        }
        httpWrites[requestId] = HTTPWrite(workspaceId: id, clientId: clientId, seqs: seqs)
        for (seq, op) in zip(seqs, start.ops) {
            let request: SubmitInput.Request
            switch op {
            case .success(let op): request = .op(op)
            case .failure(let error): request = .refuse(error)
            }
            var input = SubmitInput(clientId: clientId, seq: seq, baseVersion: 0, request: request, receivedAt: now)
            input.author = author ?? clientId
            sequence(input, from: requestId, workspaceId: id)
        }
        startCommitIfIdle()
    }

    /// A workspace a write waited for finished loading (or failed to).
    mutating func writeLoaded(_ requestId: RequestID, _ id: String, _ start: WriteStart, grant: AccessGrant?, failed: Bool) {
        guard !failed, workspaces.hub(id) != nil else {
            return emit(.respond(requestId, Self.retryLater("the store failed to load the workspace")))
        }
        startWrite(requestId, id, start, grant: grant)
    }

    /// True when `id` is a write's: the answer (an `Applied` or `Rejected`) is kept for it.
    mutating func writeAnswered(_ id: ConnectionID, _ message: Tabsync_V1_ServerMessage) -> Bool {
        guard httpWrites[id] != nil else { return false }
        switch message.message {
        case .rejected(let rejected)?:
            httpWrites[id]!.answers[rejected.seq] = .refused(ErrorCode(rejected.code) ?? .protocolError, rejected.message)
        case .applied(let applied)?:
            if let op = try? AppliedOp(applied), op.clientId == httpWrites[id]!.clientId {
                httpWrites[id]!.answers[op.seq] = .applied(op)
            }
        default:
            break
        }
        finishWriteIfAnswered(id)
        return true
    }

    /// The ops of a write's seqs are stored (`release` of its `.broadcast`).
    mutating func writeApplied(_ id: ConnectionID, _ ops: [AppliedOp]) {
        guard let write = httpWrites[id] else { return }
        for op in ops where op.clientId == write.clientId { httpWrites[id]!.answers[op.seq] = .applied(op) }
        finishWriteIfAnswered(id)
    }

    /// The pipeline cannot tell whether a write's batch is stored: 503, the client sends it again.
    mutating func writeUnanswerable(_ id: ConnectionID) -> Bool {
        guard httpWrites.removeValue(forKey: id) != nil else { return false }
        emit(.respond(id, Self.retryLater("the store did not say whether the write was stored")))
        return true
    }

    private mutating func finishWriteIfAnswered(_ id: ConnectionID) {
        guard let write = httpWrites[id], write.seqs.allSatisfy({ write.answers[$0] != nil }) else { return }
        httpWrites[id] = nil
        let results = write.seqs.map { write.answers[$0]! }
        // Not stored (nothing consumed): the whole request is to be sent again.
        if results.contains(where: { if case .refused(.unavailable, _) = $0 { true } else { false } }) {
            return emit(.respond(id, Self.retryLater("the store is unavailable")))
        }
        emit(.respond(id, Self.writeResults(results)))
    }

    // MARK: the wire

    /// `{"results": [{"version": "N", "op": {…}} | {"error": {"code", "message"}}]}`.
    static func writeResults(_ results: [WriteAnswer]) -> HTTPResponse {
        let items = results.map { result -> String in
            switch result {
            case .applied(let applied):
                let op = (try? Tabsync_V1_Op(applied.op).jsonString()) ?? "{}"
                return "{\"version\":\"\(applied.version)\",\"op\":\(op)}"
            case .refused(let code, let message):
                return "{\"error\":" + errorObject(code, message) + "}"
            }
        }
        return HTTPResponse(
            status: 200, contentType: "application/json", body: "{\"results\":[" + items.joined(separator: ",") + "]}\n")
    }

    static func errorObject(_ code: ErrorCode, _ message: String) -> String {
        let text = (try? JSONSerialization.data(withJSONObject: ["code": code.wireName, "message": message], options: [.sortedKeys]))
            .flatMap { String(data: $0, encoding: .utf8) } ?? "{}"
        return text
    }

    static func jsonError(_ status: UInt32, _ code: ErrorCode, _ message: String) -> HTTPResponse {
        HTTPResponse(status: status, contentType: "application/json", body: "{\"error\":" + errorObject(code, message) + "}\n")
    }

    /// 503 with `Retry-After: 1`: nothing was consumed, the same request may be sent again.
    static func retryLater(_ why: String) -> HTTPResponse {
        var response = jsonError(503, .unavailable, why)
        response.headers = "Retry-After: 1\r\n"
        return response
    }

    /// The key (1–64 of `A–Z a–z 0–9 - _ . : ~`) and the body `{"ops": [op, …]}`, 1 to `maxOps` ops
    /// in the protocol's JSON form; an op that does not decode is refused in its place in the
    /// results (its seq consumed, as a session's), a body that is not of this form is 400.
    static func parseWrite(key: String?, body: [UInt8], maxOps: Int) -> Result<WriteStart, WriteRefusal> {
        guard let key else { return .failure(refusal(400, .invalidArgument, "the Idempotency-Key header is required")) }
        guard (1...64).contains(key.utf8.count), key.utf8.allSatisfy(isKeyByte) else {
            return .failure(refusal(400, .invalidArgument, "Idempotency-Key must be 1 to 64 of A-Z a-z 0-9 - _ . : ~"))
        }
        guard let object = try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any],
              let list = object["ops"] as? [Any]
        else { return .failure(refusal(400, .invalidArgument, "the body must be a JSON object {\"ops\": [op, ...]}")) }
        guard (1...maxOps).contains(list.count) else {
            return .failure(refusal(400, .invalidArgument, "a write holds 1 to \(maxOps) ops, not \(list.count)"))
        }
        var ops: [Result<TabsyncCore.Operation, OpError>] = []
        var kinds: [Tabsync_V1_Op.OneOf_Kind?] = []
        for item in list {
            guard let data = try? JSONSerialization.data(withJSONObject: item, options: [.fragmentsAllowed]),
                  let wire = try? Tabsync_V1_Op(jsonUTF8Data: data)
            else {
                ops.append(.failure(.invalidArgument("an op that is not the protocol's JSON form of an op")))
                kinds.append(nil)
                continue
            }
            kinds.append(wire.kind)
            do throws(ConversionError) {
                guard wire.kind != nil else { throw .opKindMissing }
                ops.append(.success(try TabsyncCore.Operation(wire)))
            } catch {
                ops.append(.failure(error.opError))
            }
        }
        return .success(WriteStart(key: key, ops: ops, kinds: kinds, seqBase: seqBase(of: body)))
    }

    private static func refusal(_ status: UInt32, _ code: ErrorCode, _ message: String) -> WriteRefusal {
        WriteRefusal(response: jsonError(status, code, message))
    }

    private static func isKeyByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
             UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."), UInt8(ascii: ":"), UInt8(ascii: "~"):
            true
        default:
            false
        }
    }

    /// A body's seq base: 40 bits of its FNV-1a 64 fingerprint shifted past 16 bits of op index, so
    /// seqs stay below 2^56 (a signed 64-bit integer in every store) and two bodies under one key
    /// share a base with odds of 1 in 2^40. Stable across processes (unlike `Hasher`).
    static func seqBase(of body: [UInt8]) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in body { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3 }
        return (hash >> 24) << 16
    }
}
