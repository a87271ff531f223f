import Foundation
import TabsyncCore

/// What one committed batch did to one workspace, as its `pg_notify` payload carries it: the
/// version before and after, and, when they fit, the batch's ops, refusals and last seqs, so a
/// node that holds the workspace at `base` takes them without reading the store.
///
/// Payload text: `workspace:version` (the ops did not fit, or an older node sent it), or
/// `workspace:version:{json}` with the base version, ops (their stored encoding, base64),
/// refusals and last seqs. Guarantees: ``payload()`` is always under PostgreSQL's 8,000-byte
/// limit (it leaves the changes out rather than exceed it); ``parse(_:)`` gives back what
/// ``payload()`` was made from, and for any other text either a version-only notification or nil,
/// never a partial change list.
public struct CommitNotification: Sendable, Equatable {
    public var workspaceId: String
    /// The stored version the batch brought the workspace to.
    public var version: UInt64
    /// The batch's changes, or nil when only the version is announced.
    public var changes: Changes?

    public struct Changes: Sendable, Equatable {
        /// The stored version before the batch: the changes apply to a writer at exactly this version.
        public var base: UInt64
        /// The batch's ops, in version order (`base + 1` … `version`).
        public var ops: [AppliedOp]
        /// The batch's refusals, in the order made.
        public var refusals: [Sequencer.Rejection]
        /// The highest seq the batch consumed per client (ops and refusals, and records with no op).
        public var lastSeqs: [String: UInt64]

        public init(base: UInt64, ops: [AppliedOp], refusals: [Sequencer.Rejection], lastSeqs: [String: UInt64]) {
            self.base = base
            self.ops = ops
            self.refusals = refusals
            self.lastSeqs = lastSeqs
        }
    }

    /// PostgreSQL refuses a payload of 8,000 bytes or more.
    public static let maxPayloadBytes = 7_999

    public init(workspaceId: String, version: UInt64, changes: Changes? = nil) {
        self.workspaceId = workspaceId
        self.version = version
        self.changes = changes
    }

    /// The payload text: with the changes when they fit in ``maxPayloadBytes``, else without.
    public func payload() -> String {
        let head = "\(workspaceId):\(version)"
        guard let changes, let wire = Wire(changes), let body = try? Self.encoder.encode(wire),
              head.utf8.count + 1 + body.count <= Self.maxPayloadBytes
        else { return head }
        return head + ":" + String(decoding: body, as: UTF8.self)
    }

    /// The notification a payload describes; nil when it is not one.
    public static func parse(_ payload: String) -> CommitNotification? {
        let parts = payload.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count >= 2, !parts[0].isEmpty, let version = UInt64(parts[1]) else { return nil }
        var notification = CommitNotification(workspaceId: String(parts[0]), version: version)
        if parts.count == 3 {
            guard let wire = try? JSONDecoder().decode(Wire.self, from: Data(parts[2].utf8)),
                  let changes = wire.changes(upTo: version)
            else { return notification }  // unreadable changes: announce the version only
            notification.changes = changes
        }
        return notification
    }

    private static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return encoder
    }()

    /// The JSON form: short keys (the payload is bounded), op bytes in base64.
    private struct Wire: Codable {
        var b: UInt64
        var o: [Op]
        var r: [Refusal]
        var s: [String: UInt64]

        struct Op: Codable {
            var v: UInt64, c: String, s: UInt64, a: String, p: Data
        }

        struct Refusal: Codable {
            var c: String, s: UInt64, e: Int64, d: String
        }

        init?(_ changes: Changes) {
            b = changes.base
            var ops: [Op] = []
            for op in changes.ops {
                guard let bytes = try? StoreEncoding.encode(op.op) else { return nil }
                ops.append(Op(v: op.version, c: op.clientId, s: op.seq, a: op.activeTabId, p: Data(bytes)))
            }
            o = ops
            r = changes.refusals.map {
                let (code, detail) = StoreEncoding.encode($0.error)
                return Refusal(c: $0.clientId, s: $0.seq, e: code, d: detail)
            }
            s = changes.lastSeqs
        }

        /// The changes, when they are whole and consistent: ops numbered `b + 1` … `version`.
        func changes(upTo version: UInt64) -> Changes? {
            var ops: [AppliedOp] = []
            for (i, op) in o.enumerated() {
                guard op.v == b + 1 + UInt64(i),
                      let decoded = try? StoreEncoding.decodeOp([UInt8](op.p), context: "a notification's op")
                else { return nil }
                ops.append(AppliedOp(version: op.v, op: decoded, clientId: op.c, seq: op.s, activeTabId: op.a))
            }
            guard b + UInt64(o.count) == version else { return nil }
            var refusals: [Sequencer.Rejection] = []
            for refusal in r {
                guard let error = StoreEncoding.decodeError(code: refusal.e, detail: refusal.d) else { return nil }
                refusals.append(Sequencer.Rejection(clientId: refusal.c, seq: refusal.s, error: error))
            }
            return Changes(base: b, ops: ops, refusals: refusals, lastSeqs: s)
        }
    }
}
