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
/// It sleeps while there is nothing to do: it looks at the store when woken (``committed(_:)``
/// for a workspace an enabled hook matches, ``hooksChanged()``), when a pending retry comes due,
/// and, on a store other nodes share, every ``Tuning/rescanInterval`` (a hook added or enabled on
/// another node is seen then). With no hook on a store of its own, its thread makes no call at all.
///
/// Not yet (docs/design.md): the compaction floor, parallel workspaces (one slow receiver delays
/// the others).
final class WebhookDeliverer: Sendable {
    private let store: any WebhookStore
    private let executor: DispatchQueue
    private let poster: WebhookPoster
    private let logger: Logger
    private let tuning: Tuning
    private let wakeups = Lock<Wakeups>(Wakeups())
    private let wake = DispatchSemaphore(value: 0)
    /// What it did, for `/metrics` and tests.
    private let counters = Lock<WebhookMetrics>(WebhookMetrics())

    /// The most ops read and sent for one workspace in one pass.
    static let batch = 100
    static let firstBackoff = Duration.seconds(1)
    static let maxBackoff = Duration.seconds(600)

    /// How the deliverer paces itself.
    struct Tuning: Sendable {
        /// On a store other nodes share: the longest the deliverer sleeps without looking at every
        /// hook (a hook added on another node is seen within it); nil: a store of its own, where
        /// every change comes through this server and wakes it.
        var rescanInterval: Duration? = nil
        /// A hook whose oldest pending delivery has failed for this long is disabled
        /// (`--webhook-give-up-after`).
        var giveUpAfter: Duration = .seconds(24 * 3600)
        /// This node's name in the cursors' leases.
        var node = "local"
        /// How long a lease on a cursor lasts; it is renewed before each batch is sent, so a
        /// killed node's cursors are taken over about this long after it stopped renewing.
        var lease: Duration = .seconds(30)
    }

    /// What woke the deliverer, taken whole by its thread (other threads only add to it).
    private struct Wakeups {
        var stopping = false
        /// Look at every hook and workspace (the start, a hook added, enabled or removed).
        var rescan = true
        /// Workspaces committed to since the thread last looked that an enabled hook matches.
        var committed: Set<String> = []
        /// The globs of the enabled hooks as last read: a commit of a workspace none matches wakes
        /// nothing.
        var patterns: [WorkspacePattern] = []
    }

    init(
        store: any WebhookStore, executor: DispatchQueue, allowPrivate: Bool, trust: WebhookTrust? = nil, tuning: Tuning = Tuning(),
        logger: Logger
    ) {
        self.store = store
        self.executor = executor
        poster = WebhookPoster(allowPrivate: allowPrivate, trust: trust)
        self.tuning = tuning
        self.logger = logger
    }

    func start() {
        let thread = Thread { [self] in run() }
        thread.name = "tabsync-webhooks"
        thread.start()
    }

    /// Ends the worker after the request in flight, if any (it does not wait for it).
    func stop() {
        wakeups.withLock { $0.stopping = true }
        wake.signal()
    }

    /// Workspaces a commit stored: wakes the deliverer when an enabled hook matches one of them.
    /// Cheap when none does (a lock and a glob match per hook): called on the store executor after
    /// every stored commit.
    /// True when it woke the deliverer.
    @discardableResult
    func committed(_ workspaces: some Sequence<String>) -> Bool {
        let woken = wakeups.withLock { state -> Bool in
            guard !state.patterns.isEmpty else { return false }
            var any = false
            for workspace in workspaces where state.patterns.contains(where: { $0.matches(workspace) }) {
                state.committed.insert(workspace)
                any = true
            }
            return any
        }
        if woken { wake.signal() }
        return woken
    }

    /// A hook was added, enabled or removed on this node: every hook is looked at again.
    func hooksChanged() {
        wakeups.withLock { $0.rescan = true }
        wake.signal()
    }

    /// How long a deliverer on a store other nodes share sleeps at most (``Tuning/rescanInterval``).
    static let sharedRescanInterval = Duration.seconds(10)

    /// Wakes `deliverer` for what a store turn did: a stored commit, a hook added or removed.
    /// Called on the store executor, right after the turn.
    static func wake(_ deliverer: WebhookDeliverer, after action: ServerCore.Action, answered event: ServerCore.Event) {
        switch (action, event) {
        case (.commit(_, let batch), .committed(_, .stored, _)):
            deliverer.committed(batch.workspaces.keys)
        case (.admin(let call), .adminAnswered(_, .success)):
            switch call.work {
            case .addWebhook, .removeWebhook, .enableWebhook: deliverer.hooksChanged()
            default: break
            }
        default: break
        }
    }

    var looks: WebhookMetrics { counters.withLock { $0 } }

    /// The deliverer's part of `/metrics`.
    func metricsText() -> String { counters.withLock { $0 }.render(now: Date()) }

    private var isStopping: Bool { wakeups.withLock { $0.stopping } }

    /// The thread: look at what woke it, then sleep until the next wakeup, the earliest pending
    /// retry or (shared store) the rescan interval, whichever comes first.
    private func run() {
        var hooks: [WebhookRegistration] = []
        var retryAt: Date?
        var again: Set<String> = []
        while true {
            let (stopping, rescan, committed) = wakeups.withLock { state in
                defer { (state.rescan, state.committed) = (false, []) }
                return (state.stopping, state.rescan, state.committed)
            }
            if stopping { return }
            let now = Date()
            if rescan || (retryAt.map { $0 <= now } ?? false) {
                if let read = onStore({ store throws(StoreError) in try store.webhooks() }) {
                    hooks = read.filter(\.isEnabled)
                    counters.withLock { $0.hooks = (hooks.count, read.count - hooks.count) }
                    let patterns = hooks.compactMap { WorkspacePattern($0.workspaces) }
                    wakeups.withLock { $0.patterns = patterns }
                }
                counters.withLock { $0.scans += 1 }
                let outcome = pass(hooks, only: nil)
                (retryAt, again) = (outcome.retryAt, outcome.again)
                if !outcome.disabled.isEmpty { hooks = remove(outcome.disabled, from: hooks) }
            } else if !committed.isEmpty || !again.isEmpty {
                counters.withLock { $0.wakeups += 1 }
                let outcome = pass(hooks, only: committed.union(again))
                retryAt = [retryAt, outcome.retryAt].compactMap { $0 }.min()
                again = outcome.again
                if !outcome.disabled.isEmpty { hooks = remove(outcome.disabled, from: hooks) }
            }
            if !again.isEmpty { continue }
            var timeout: DispatchTime = .distantFuture
            var deadline = retryAt
            if let rescan = tuning.rescanInterval {
                deadline = [deadline, Date().addingTimeInterval(rescan.seconds)].compactMap { $0 }.min()
            }
            if let deadline {
                timeout = .now() + .milliseconds(max(Int(deadline.timeIntervalSinceNow * 1000) + 1, 0))
            }
            if wake.wait(timeout: timeout) == .timedOut, tuning.rescanInterval != nil {
                wakeups.withLock { $0.rescan = true }
            }
        }
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

    /// `hooks` without the `disabled` ones, whose globs no longer wake the deliverer.
    private func remove(_ disabled: Set<String>, from hooks: [WebhookRegistration]) -> [WebhookRegistration] {
        let left = hooks.filter { !disabled.contains($0.id) }
        let patterns = left.compactMap { WorkspacePattern($0.workspaces) }
        wakeups.withLock { $0.patterns = patterns }
        counters.withLock { metrics in
            metrics.hooks = (left.count, metrics.hooks.disabled + disabled.count)
            metrics.pending = metrics.pending.filter { key, _ in !disabled.contains(String(key.prefix { $0 != " " })) }
        }
        return left
    }

    /// What one look left to do: the earliest retry it saw pending, and the workspaces with more
    /// than one batch to send (looked at again at once).
    private struct PassOutcome {
        var retryAt: Date?
        var again: Set<String> = []
        /// Hooks disabled in this look.
        var disabled: Set<String> = []
    }

    /// One look at `hooks` (enabled): what each matching workspace (of `only`, when given) has past
    /// its cursor is sent.
    private func pass(_ hooks: [WebhookRegistration], only: Set<String>?) -> PassOutcome {
        var outcome = PassOutcome()
        for hook in hooks {
            guard !isStopping, let pattern = WorkspacePattern(hook.workspaces) else { continue }
            let id = hook.id
            let wanted = only.map { $0.filter(pattern.matches) }
            if let wanted, wanted.isEmpty { continue }
            guard let cursors = onStore({ store throws(StoreError) in try store.webhookCursors(hookId: id) }),
                  let versions = onStore({ store throws(StoreError) in
                      if let wanted { return try store.storedVersions(workspaceIds: wanted.sorted()) }
                      return try Self.versions(store, matching: pattern)
                  }) else { continue }
            let byWorkspace = Dictionary(cursors.map { ($0.workspace, $0) }, uniquingKeysWith: { $1 })
            if only == nil {  // every cursor of the hook read: the failing ones are the pending gauge's
                counters.withLock { metrics in
                    metrics.pending = metrics.pending.filter { key, _ in !key.hasPrefix(id + " ") }
                    for cursor in cursors where cursor.attempts > 0 && (versions[cursor.workspace] ?? 0) > cursor.delivered {
                        metrics.pending[WebhookMetrics.key(id, cursor.workspace)] = .init(
                            attempts: cursor.attempts, since: cursor.firstFailure ?? Date())
                    }
                }
            }
            var ready: [WebhookCursor] = []
            for (workspace, version) in versions.sorted(by: { $0.key < $1.key }) {
                let cursor = byWorkspace[workspace] ?? WebhookCursor(hookId: id, workspace: workspace, delivered: 0)
                guard version > cursor.delivered else { continue }
                if let due = cursor.nextAttempt, due > Date() {
                    outcome.retryAt = [outcome.retryAt, due].compactMap { $0 }.min()
                    continue
                }
                ready.append(cursor)
            }
            // Only the cursors whose lease this node holds (several nodes: the workspace's home node,
            // or any node when none holds it); the lease lasts a batch's sending and more.
            let (node, now) = (tuning.node, Date())
            let until = now.addingTimeInterval(tuning.lease.seconds), names = ready.map(\.workspace)
            guard !ready.isEmpty, let leased = onStore({ store throws(StoreError) in
                try store.claimWebhookCursors(hookId: id, workspaces: names, node: node, until: until, now: now)
            }) else { continue }
            hook: for cursor in ready where leased.contains(cursor.workspace) {
                let workspace = cursor.workspace
                switch deliver(hook, from: cursor) {
                case .retry(let due): outcome.retryAt = [outcome.retryAt, due].compactMap { $0 }.min()
                case .more: outcome.again.insert(workspace)
                case .done: break
                case .disabled:
                    outcome.disabled.insert(id)
                    break hook
                }
            }
        }
        return outcome
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

    /// What one call of ``deliver(_:from:)`` left.
    private enum DeliverOutcome {
        /// Everything read was answered 2xx; there may be more (a whole batch was sent).
        case more
        /// Everything read was answered 2xx and it was less than a batch, or the worker stops.
        case done
        /// An attempt failed (or the store did): the next is due then.
        case retry(Date)
        /// An attempt failed and the oldest pending one had failed for ``Tuning/giveUpAfter``:
        /// the hook is disabled.
        case disabled
    }

    /// Sends what follows `cursor` (at most ``batch`` versions), in order, until one fails. The
    /// cursor is stored once for the versions answered 2xx in a row (after the last of them, before
    /// the pass returns), not after each: one store write per batch instead of one per version,
    /// which the deliverer's one thread waited for. A node killed in the middle of a batch sends
    /// those versions again, with the same `webhook-id` (delivery is at least once).
    private func deliver(_ hook: WebhookRegistration, from start: WebhookCursor) -> DeliverOutcome {
        var cursor = start
        /// Stores the 2xx'd versions not stored yet; false when the store did not take them.
        func storeProgress() -> Bool {
            guard cursor.delivered != start.delivered else { return true }  // a failure stores its own cursor
            let saved = WebhookCursor(hookId: hook.id, workspace: cursor.workspace, delivered: cursor.delivered)
            return onStore({ store throws(StoreError) in try store.saveWebhookCursor(saved) }) != nil
        }
        let workspace = cursor.workspace, after = cursor.delivered
        let storeRetry = DeliverOutcome.retry(Date().addingTimeInterval(Self.firstBackoff.seconds))
        let deliveries: [(version: UInt64, body: [UInt8])]
        guard let read = onStore({ store throws(StoreError) in try store.ops(workspaceId: workspace, after: after, limit: Self.batch) }) else {
            return storeRetry
        }
        if let ops = read {
            deliveries = ops.map { ($0.version, Self.body("op", workspace, "applied", Tabsync_V1_Applied($0))) }
        } else {
            // The log no longer holds what follows the cursor: the stored state, a marked gap.
            guard let stored = onStore({ store throws(StoreError) in try store.load(workspaceId: workspace) }) else { return storeRetry }
            guard let stored else { return .done }
            deliveries = [(stored.workspace.version, Self.body("snapshot", workspace, "snapshot", Tabsync_V1_Snapshot(stored.workspace)))]
        }
        for delivery in deliveries {
            if isStopping { return storeProgress() ? .done : storeRetry }
            let id = WebhookSignature.id(workspace: workspace, version: delivery.version)
            let timestamp = Int64(Date().timeIntervalSince1970)
            guard let signature = WebhookSignature.sign(secret: hook.secret, id: id, timestamp: timestamp, body: delivery.body) else {
                return storeProgress() ? .done : storeRetry
            }
            let outcome = poster.post(url: hook.url, headers: [
                "Content-Type": "application/json", "User-Agent": "tabsync/\(TabsyncVersion.current)",
                "webhook-id": id, "webhook-timestamp": "\(timestamp)", "webhook-signature": signature,
            ], body: delivery.body)
            let now = Date()
            let key = WebhookMetrics.key(hook.id, workspace)
            if case .answered(let status) = outcome, (200..<300).contains(status) {
                counters.withLock { metrics in
                    metrics.attempts[.delivered, default: 0] += 1
                    metrics.pending[key] = nil
                }
                cursor = WebhookCursor(hookId: hook.id, workspace: workspace, delivered: delivery.version)
                continue
            }
            cursor.attempts += 1
            let firstFailure = cursor.firstFailure ?? now
            let wait = Self.backoff(attempt: cursor.attempts)
            let due = now.addingTimeInterval(wait.seconds)
            cursor = WebhookCursor(
                hookId: hook.id, workspace: workspace, delivered: cursor.delivered, attempts: cursor.attempts,
                firstFailure: firstFailure, nextAttempt: due, lastError: "\(Self.describe(outcome)) (\(id))")
            let saved = cursor
            _ = onStore({ store throws(StoreError) in try store.saveWebhookCursor(saved) })
            let attempts = cursor.attempts
            counters.withLock { metrics in
                if case .refused = outcome { metrics.attempts[.refused, default: 0] += 1 } else { metrics.attempts[.failed, default: 0] += 1 }
                metrics.pending[key] = .init(attempts: attempts, since: firstFailure)
            }
            logger.info("webhook delivery failed", metadata: [
                "hook": "\(hook.id)", "url": "\(hook.url)", "webhook_id": "\(id)", "attempt": "\(cursor.attempts)",
                "error": "\(Self.describe(outcome))", "retry_in": "\(wait)",
            ])
            if now.timeIntervalSince(firstFailure) >= tuning.giveUpAfter.seconds {
                return disable(hook, lastError: "\(Self.describe(outcome)) (\(id), attempt \(attempts)), failing since "
                    + RFC3339.format(firstFailure.timeIntervalSince1970), at: now)
            }
            return .retry(cursor.nextAttempt ?? due)
        }
        guard storeProgress() else { return storeRetry }
        return deliveries.count >= Self.batch ? .more : .done
    }

    /// Disables `hook` (stored with `lastError` and `at`, its cursors kept): `.disabled`, or a
    /// retry soon when the store could not take it.
    private func disable(_ hook: WebhookRegistration, lastError: String, at now: Date) -> DeliverOutcome {
        let id = hook.id
        guard let changed = onStore({ store throws(StoreError) in try store.disableWebhook(id: id, reason: lastError, at: now) }) else {
            return .retry(now.addingTimeInterval(Self.firstBackoff.seconds))
        }
        if changed { counters.withLock { $0.disabled += 1 } }
        logger.warning("webhook disabled: its deliveries failed for too long", metadata: [
            "hook": "\(id)", "url": "\(hook.url)", "give_up_after": "\(tuning.giveUpAfter)", "last_error": "\(lastError)",
        ])
        return .disabled
    }

    /// An attempt's outcome in words, for the hook's last error.
    static func describe(_ outcome: WebhookPoster.Outcome) -> String {
        switch outcome {
        case .answered(let status): "HTTP \(status)"
        case .refused(let why): "refused: \(why)"
        case .failed(let why): "no answer: \(why)"
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
