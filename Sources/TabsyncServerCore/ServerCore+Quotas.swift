import TabsyncCore
import TabsyncProto

/// Operators' quotas (docs/design.md, "Quotas"): sessions per sub, sessions per workspace, ops per
/// second per sub. Each is off unless set; each refusal names the limit and its option.
///
/// Guarantees: a session counts against a quota from the moment it is admitted until its
/// connection is gone (``releaseQuotas(_:)`` runs once, from `disconnected`); a refused session
/// consumes nothing; an op over the sub's rate is refused `RATE_LIMITED` like one over the
/// session's rate (the client retries it).
extension ServerCore {
    /// Sends `Error LIMIT_EXCEEDED` with `why` and closes 4429.
    mutating func overQuota(_ id: ConnectionID, _ why: String) {
        metrics.quotaRefusals += 1
        refuse(id, code: .limitExceeded, message: why, closing: .overQuota)
    }

    /// Counts the session against its workspace's quota; false (and the session refused) when the
    /// workspace has its limit of sessions already.
    mutating func admitToWorkspace(_ id: ConnectionID, _ workspace: String) -> Bool {
        guard let limit = settings.quotas.maxConnectionsPerWorkspace, sessions[id]?.quotaWorkspace == nil else { return true }
        let open = quotas.connectionsByWorkspace[workspace, default: 0]
        guard open < limit else {
            overQuota(id, "workspace \(workspace) already has \(open) sessions: the limit is \(limit) (--max-connections-per-workspace)")
            return false
        }
        quotas.connectionsByWorkspace[workspace] = open + 1
        sessions[id]!.quotaWorkspace = workspace
        return true
    }

    /// The session is gone: it no longer counts; with its sub's last session the sub's op bucket
    /// goes too (the sub's next session starts with a full one, as after an idle second).
    mutating func releaseQuotas(_ session: SessionMachine) {
        if let sub = session.quotaSubject {
            let left = quotas.connectionsBySubject[sub, default: 1] - 1
            quotas.connectionsBySubject[sub] = left > 0 ? left : nil
            if left <= 0 { quotas.buckets[sub] = nil }
        }
        if let workspace = session.quotaWorkspace {
            let left = quotas.connectionsByWorkspace[workspace, default: 1] - 1
            quotas.connectionsByWorkspace[workspace] = left > 0 ? left : nil
        }
    }

    /// The refusal of an op over its sub's rate, or nil (no quota, no sub, or a token left).
    mutating func subjectRateRefusal(_ id: ConnectionID) -> OpError? {
        guard let rate = settings.quotas.maxOpsPerSecondPerSubject, let sub = sessions[id]?.access?.subject else { return nil }
        var bucket = quotas.buckets[sub] ?? (tokens: Double(rate), at: now)
        let elapsed = Double((now - bucket.at).microseconds) / 1_000_000
        bucket.tokens = min(Double(rate), bucket.tokens + elapsed * Double(rate))
        bucket.at = now
        defer { quotas.buckets[sub] = bucket }
        guard bucket.tokens >= 1 else {
            return .rateLimited("\(sub) is over \(rate) ops per second across its sessions (--max-ops-per-second-per-sub)")
        }
        bucket.tokens -= 1
        return nil
    }
}
