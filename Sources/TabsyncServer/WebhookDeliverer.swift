import Foundation
import Logging
import SwiftProtobuf
import TabsyncCore
import TabsyncLock
import TabsyncProto
import TabsyncServerCore
import TabsyncStore

/// Sends every version committed to a workspace a hook follows (docs/design.md, "Webhooks"), on a
/// thread of its own: the event loop never waits for it, and its store calls go through the
/// server's store executor like every other store call.
///
/// Guarantees: per hook and workspace, version V+1 is sent only after V was answered 2xx, and the
/// cursor is stored only after a 2xx, so every version is delivered at least once and in order
/// (after a crash between the 2xx and the cursor's store, V is sent again with the same
/// `webhook-id`). A failed attempt (a refused address, no answer, a status outside 2xx) is retried
/// after a back-off that doubles from 1 s to 10 minutes with full jitter, the attempt's count and
/// next time kept in the cursor. The secret is used to sign and is never logged.
///
/// Not yet (docs/design.md): the 24 h disable, the compaction floor, parallel workspaces (one slow
/// receiver delays the others), the lease and takeover on several nodes.
final class WebhookDeliverer: Sendable {
    private let store: any WebhookStore
    private let executor: DispatchQueue
    private let poster: WebhookPoster
    private let logger: Logger
    private let interval: Duration
    private let stopping = Lock<Bool>(false)
    private let wake = DispatchSemaphore(value: 0)

    /// The most ops read and sent for one workspace in one pass.
    static let batch = 100
    static let firstBackoff = Duration.seconds(1)
    static let maxBackoff = Duration.seconds(600)

    init(store: any WebhookStore, executor: DispatchQueue, allowPrivate: Bool, interval: Duration = .milliseconds(250), logger: Logger) {
        self.store = store
        self.executor = executor
        poster = WebhookPoster(allowPrivate: allowPrivate)
        self.interval = interval
        self.logger = logger
    }

    func start() {
        let thread = Thread { [self] in
            while !stopping.withLock({ $0 }) {
                pass()
                _ = wake.wait(timeout: .now() + .milliseconds(Int(interval.components.seconds * 1000 + interval.components.attoseconds / 1_000_000_000_000_000)))
            }
        }
        thread.name = "tabsync-webhooks"
        thread.start()
    }

    /// Ends the worker after the request in flight, if any (it does not wait for it).
    func stop() {
        stopping.withLock { $0 = true }
        wake.signal()
    }

    /// A store call on the store executor.
    private func onStore<T: Sendable>(_ body: @Sendable (any WebhookStore) throws(StoreError) -> T) -> T? {
        let store = self.store
        return executor.sync { () -> T? in
            do throws(StoreError) { return try body(store) } catch {
                logger.warning("webhooks: store call failed", metadata: ["error": "\(error)"])
                return nil
            }
        }
    }

    /// One look at every enabled hook: what each matching workspace has past its cursor is sent.
    private func pass() {
        guard let hooks = onStore({ store throws(StoreError) in try store.webhooks() }) else { return }
        for hook in hooks where hook.isEnabled {
            guard !stopping.withLock({ $0 }), let pattern = WorkspacePattern(hook.workspaces) else { continue }
            let id = hook.id
            guard let cursors = onStore({ store throws(StoreError) in try store.webhookCursors(hookId: id) }),
                  let versions = onStore({ store throws(StoreError) in try Self.versions(store, matching: pattern) }) else { continue }
            let byWorkspace = Dictionary(cursors.map { ($0.workspace, $0) }, uniquingKeysWith: { $1 })
            for (workspace, version) in versions.sorted(by: { $0.key < $1.key }) {
                let cursor = byWorkspace[workspace] ?? WebhookCursor(hookId: id, workspace: workspace, delivered: 0)
                guard version > cursor.delivered, (cursor.nextAttempt ?? .distantPast) <= Date() else { continue }
                deliver(hook, from: cursor)
            }
        }
    }

    /// The stored version of every workspace `pattern` matches.
    private static func versions(_ store: any WebhookStore, matching pattern: WorkspacePattern) throws(StoreError) -> [String: UInt64] {
        var versions: [String: UInt64] = [:]
        var after: String?
        while true {
            let page = try store.workspaceIds(after: after, limit: 500)
            guard let last = page.last else { return versions }
            versions.merge(try store.storedVersions(workspaceIds: page.filter(pattern.matches))) { $1 }
            after = last
        }
    }

    /// Sends what follows `cursor` (at most ``batch`` versions), in order, until one fails.
    private func deliver(_ hook: WebhookRegistration, from start: WebhookCursor) {
        var cursor = start
        let workspace = cursor.workspace, after = cursor.delivered
        let deliveries: [(version: UInt64, body: [UInt8])]
        if let ops = onStore({ store throws(StoreError) in try store.ops(workspaceId: workspace, after: after, limit: Self.batch) }).flatMap({ $0 }) {
            deliveries = ops.map { ($0.version, Self.body("op", workspace, "applied", Tabsync_V1_Applied($0))) }
        } else {
            // The log no longer holds what follows the cursor: the stored state, a marked gap.
            guard let stored = onStore({ store throws(StoreError) in try store.load(workspaceId: workspace) }).flatMap({ $0 }) else { return }
            deliveries = [(stored.workspace.version, Self.body("snapshot", workspace, "snapshot", Tabsync_V1_Snapshot(stored.workspace)))]
        }
        for delivery in deliveries {
            if stopping.withLock({ $0 }) { return }
            let id = WebhookSignature.id(workspace: workspace, version: delivery.version)
            let timestamp = Int64(Date().timeIntervalSince1970)
            guard let signature = WebhookSignature.sign(secret: hook.secret, id: id, timestamp: timestamp, body: delivery.body) else { return }
            let outcome = poster.post(url: hook.url, headers: [
                "Content-Type": "application/json", "User-Agent": "tabsync/\(TabsyncVersion.current)",
                "webhook-id": id, "webhook-timestamp": "\(timestamp)", "webhook-signature": signature,
            ], body: delivery.body)
            let now = Date()
            if case .answered(let status) = outcome, (200..<300).contains(status) {
                cursor = WebhookCursor(hookId: hook.id, workspace: workspace, delivered: delivery.version)
                let saved = cursor
                guard onStore({ store throws(StoreError) in try store.saveWebhookCursor(saved) }) != nil else { return }
                continue
            }
            cursor.attempts += 1
            let firstFailure = cursor.firstFailure ?? now
            let wait = Self.backoff(attempt: cursor.attempts)
            cursor = WebhookCursor(
                hookId: hook.id, workspace: workspace, delivered: cursor.delivered, attempts: cursor.attempts,
                firstFailure: firstFailure, nextAttempt: now.addingTimeInterval(Double(wait.components.seconds) + Double(wait.components.attoseconds) / 1e18))
            let saved = cursor
            _ = onStore({ store throws(StoreError) in try store.saveWebhookCursor(saved) })
            logger.info("webhook delivery failed", metadata: [
                "hook": "\(hook.id)", "url": "\(hook.url)", "webhook_id": "\(id)", "attempt": "\(cursor.attempts)",
                "outcome": "\(outcome)", "retry_in": "\(wait)",
            ])
            return
        }
    }

    /// The wait before retrying after `attempt` failures: a random time up to a step that doubles
    /// from ``firstBackoff`` to ``maxBackoff`` (full jitter).
    static func backoff(attempt: Int) -> Duration {
        let step = min(firstBackoff * (1 << min(max(attempt - 1, 0), 20)), maxBackoff)
        let millis = step.components.seconds * 1000 + step.components.attoseconds / 1_000_000_000_000_000
        return .milliseconds(Int64.random(in: 0...max(millis, 0)))
    }

    /// `{"type": T, "workspace": W, KEY: MESSAGE}` with the message as protobuf JSON.
    static func body(_ type: String, _ workspace: String, _ key: String, _ message: some SwiftProtobuf.Message) -> [UInt8] {
        let json = (try? message.jsonUTF8Bytes()) ?? Array("{}".utf8)
        // Workspace ids are [A-Za-z0-9._-]: nothing in them needs escaping.
        return Array(#"{"type":"\#(type)","workspace":"\#(workspace)","\#(key)":"#.utf8) + json + Array("}".utf8)
    }
}
