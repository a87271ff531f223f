import Foundation
import TabsyncStore

/// The tokens operators revoked, kept in memory from the admin log (``AdminStore``) and checked
/// at every token check and every Submit's.
///
/// Guarantee: once a revocation is added, ``revokes(_:)`` is true for every grant it names, for
/// as long as the process runs (revocations are never taken back; a new token is issued instead).
package struct RevocationList: Sendable, Equatable {
    /// Revoked `jti`s and when each was revoked.
    private(set) var tokens: [String: AdminEntry] = [:]
    /// Per `sub`: tokens issued before this time are revoked (the latest revocation wins).
    private(set) var subjects: [String: AdminEntry] = [:]

    package init() {}

    /// Takes a revocation in (other commands change nothing).
    package mutating func add(_ entry: AdminEntry) {
        switch entry.command {
        case .revokeToken(let jti):
            if tokens[jti] == nil { tokens[jti] = entry }
        case .revokeSubject(let sub, let before):
            if case .revokeSubject(_, let known)? = subjects[sub]?.command, known >= before { return }
            subjects[sub] = entry
        default:
            break
        }
    }

    /// True when a revocation names this grant: its `jti`, or its `sub` with an `iat` before the
    /// subject's cut-off (a token without `iat` counts as issued before any cut-off).
    package func revokes(_ grant: AccessGrant) -> Bool {
        if let jti = grant.tokenId, tokens[jti] != nil { return true }
        if case .revokeSubject(_, let before)? = subjects[grant.subject]?.command {
            guard let issued = grant.issuedAt else { return true }
            return issued < before
        }
        return false
    }

    /// Every revocation in force, in the order the log took them.
    package var entries: [AdminEntry] {
        (Array(tokens.values) + Array(subjects.values)).sorted { $0.number < $1.number }
    }

    package var isEmpty: Bool { tokens.isEmpty && subjects.isEmpty }
}

/// The core's part of the admin API: the revocations in force, where this node is in the admin
/// log, the admin calls waiting for the store, and the deletes waiting for their workspace to
/// drain (ServerCore+Admin.swift).
struct AdminState {
    var revocations = RevocationList()
    /// The last admin-log entry this node acted on.
    var cursor: Int64 = 0
    /// A read of the log is at the store (at most one at a time).
    var reading = false
    /// When to read the log next (several nodes only).
    var nextRead: ServerCore.Instant?
    /// Entries this node appended and acted on already: skipped when its read brings them back,
    /// and forgotten then (kept with a shared store only: a single node never reads its log back).
    var actedOn: Set<Int64> = []
    /// Workspaces being deleted, with the requests waiting to be answered: their sessions were
    /// closed; the store delete goes once nothing of them is left in the commit pipeline.
    var deleting: [String: ServerCore.DeleteState] = [:]
    /// Admin requests waiting for their token check.
    var authorizing: [RequestID: AdminRequest] = [:]
    /// List requests waiting for the store, with the pattern of the token that asked.
    var listing: [RequestID: WorkspacePattern] = [:]
    /// Kick requests waiting for their log entry, with the workspaces the asking token grants:
    /// nothing is closed until the entry is durable.
    var kicking: [RequestID: WorkspacePattern] = [:]
}

/// Per-subject and per-workspace counts for the quotas (``ServerCore/Settings/quotas``).
struct QuotaState {
    /// Sessions past their token check, per `sub`.
    var connectionsBySubject: [String: Int] = [:]
    /// Sessions past their Hello, per workspace.
    var connectionsByWorkspace: [String: Int] = [:]
    /// Per `sub`: op tokens (refilled at the subject's rate) and when last refilled.
    var buckets: [String: (tokens: Double, at: ServerCore.Instant)] = [:]
    /// HTTP writes' op buckets, per workspace and `sub` (ServerCore+WriteRate.swift).
    var writeBuckets: [String: ServerCore.OpBucket] = [:]
}

extension ServerCore {
    /// Operators' limits (docs/design.md, "Quotas"); nil: no limit.
    package struct Quotas: Sendable, Equatable {
        package var maxConnectionsPerSubject: Int?
        package var maxOpsPerSecondPerSubject: Int?
        package var maxConnectionsPerWorkspace: Int?

        package init(maxConnectionsPerSubject: Int? = nil, maxOpsPerSecondPerSubject: Int? = nil, maxConnectionsPerWorkspace: Int? = nil) {
            self.maxConnectionsPerSubject = maxConnectionsPerSubject
            self.maxOpsPerSecondPerSubject = maxOpsPerSecondPerSubject
            self.maxConnectionsPerWorkspace = maxConnectionsPerWorkspace
        }

        /// True when a quota is kept per sub: its sessions are counted, and what it holds (an op
        /// bucket) goes with its last session.
        var countsSubjects: Bool { maxConnectionsPerSubject != nil || maxOpsPerSecondPerSubject != nil }
    }
}
