import TabsyncCore

/// The rate limits of HTTP writes (docs/design.md, "HTTP writes", "Rate"): a write has no session
/// whose op bucket it could drain, so it gets buckets of its own.
///
/// Guarantees: the new ops of a write are charged, before any is sequenced, against one bucket per
/// (workspace, token `sub`) refilled at `--max-ops-per-second` (the per-session rate: every script
/// of one sub writing to one workspace together writes at most as fast as one session could), and
/// against the sub's own bucket when `--max-ops-per-second-per-sub` is set (shared with the sub's
/// sessions). Without access control every writer of a workspace shares its bucket (sub ""). A
/// write is let through when a bucket holds as many tokens as it has ops, or is full (so a write
/// larger than the rate can go, leaving the bucket in debt); else it is refused whole with 429, a
/// `Retry-After` of the seconds until it would pass, and a body naming the limit. A refused write
/// consumes nothing and charges nothing; a repeat of an answered key is never charged (its seqs
/// are consumed: it applies nothing).
extension ServerCore {
    /// One bucket: tokens refilled at a rate up to that rate; below zero is debt.
    struct OpBucket {
        var tokens: Double
        var at: Instant

        /// Refilled to `now` at `rate` per second, capped at `rate`.
        func refilled(rate: Int, now: Instant) -> OpBucket {
            let elapsed = Double((now - at).microseconds) / 1_000_000
            return OpBucket(tokens: min(Double(rate), tokens + elapsed * Double(rate)), at: now)
        }

        /// Seconds until it can pay for `ops` (0: it can now).
        func wait(for ops: Int, rate: Int) -> Int {
            let need = min(Double(ops), Double(rate)) - tokens
            return need <= 0 ? 0 : max(1, Int((need / Double(rate)).rounded(.up)))
        }
    }

    /// Buckets kept before idle full ones are dropped (a full bucket is the same as none).
    static let maxIdleWriteBuckets = 10_000

    /// Charges `ops` new ops of a write to `workspace` by `subject`; the 429 when a limit refuses it.
    mutating func chargeWrite(workspace: String, subject: String?, ops: Int) -> HTTPResponse? {
        let rate = settings.limits.maxOpsPerSecond
        let key = workspace + "\u{0}" + (subject ?? "")
        let bucket = (quotas.writeBuckets[key] ?? OpBucket(tokens: Double(rate), at: now)).refilled(rate: rate, now: now)
        var perSub: (rate: Int, bucket: OpBucket)?
        if let subRate = settings.quotas.maxOpsPerSecondPerSubject, let subject {
            let old = quotas.buckets[subject].map { OpBucket(tokens: $0.tokens, at: $0.at) }
            perSub = (subRate, (old ?? OpBucket(tokens: Double(subRate), at: now)).refilled(rate: subRate, now: now))
        }
        let who = subject.map { "\($0) writing to \(workspace)" } ?? "HTTP writes to \(workspace)"
        if case let wait = bucket.wait(for: ops, rate: rate), wait > 0 {
            return Self.tooManyOps("\(who) are over \(rate) ops per second (--max-ops-per-second); retry in \(wait) s", wait)
        }
        if let (subRate, subBucket) = perSub, case let wait = subBucket.wait(for: ops, rate: subRate), wait > 0 {
            metrics.quotaRefusals += 1
            return Self.tooManyOps(
                "\(subject!) is over \(subRate) ops per second across its sessions and writes (--max-ops-per-second-per-sub); retry in \(wait) s",
                wait)
        }
        if quotas.writeBuckets.count >= Self.maxIdleWriteBuckets { dropFullWriteBuckets(rate: rate) }
        quotas.writeBuckets[key] = OpBucket(tokens: bucket.tokens - Double(ops), at: now)
        if let (_, subBucket) = perSub { quotas.buckets[subject!] = (tokens: subBucket.tokens - Double(ops), at: now) }
        return nil
    }

    private mutating func dropFullWriteBuckets(rate: Int) {
        let now = now
        quotas.writeBuckets = quotas.writeBuckets.filter { $0.value.refilled(rate: rate, now: now).tokens < Double(rate) }
    }

    /// 429 `RATE_LIMITED` with `Retry-After`: nothing was consumed; the same request may be sent
    /// again after the wait.
    static func tooManyOps(_ why: String, _ seconds: Int) -> HTTPResponse {
        var response = jsonError(429, .rateLimited, why)
        response.headers = "Retry-After: \(seconds)\r\n"
        return response
    }
}
