import Foundation
import TabsyncServerCore

/// What this node's webhook deliverer counts, as `/metrics` shows it (docs/operating.md,
/// "Metrics"). Guarantees: hooks are counted, never named: no id, URL or secret reaches the text.
struct WebhookMetrics: Sendable {
    /// How an attempt ended, as `tabsync_webhook_deliveries_total{result}` labels it.
    enum Result: String, CaseIterable, Sendable {
        /// Answered 2xx.
        case delivered
        /// No answer, or a status outside 2xx.
        case failed
        /// Every address the target resolved to was refused (``WebhookTargetPolicy``).
        case refused
    }

    /// A delivery that failed and waits for its next attempt.
    struct Pending: Sendable {
        var attempts: Int
        var since: Date
    }

    /// Looks at every hook and workspace.
    var scans: UInt64 = 0
    /// Looks at workspaces a commit woke the deliverer for.
    var wakeups: UInt64 = 0
    var attempts: [Result: UInt64] = [:]
    /// Hooks this node disabled after failing for `--webhook-give-up-after`.
    var disabled: UInt64 = 0
    /// The hooks as last read: enabled and disabled.
    var hooks = (enabled: 0, disabled: 0)
    /// Failing deliveries by hook and workspace (a key of both).
    var pending: [String: Pending] = [:]

    /// The text of a server without a deliverer (a store that keeps no webhooks): every count 0.
    static var zeros: String { WebhookMetrics().render(now: Date()) }

    static func key(_ hook: String, _ workspace: String) -> String { hook + " " + workspace }

    func render(now: Date) -> String {
        var out = ""
        func header(_ name: String, _ type: String, _ help: String) {
            out += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n"
        }
        header("tabsync_webhooks", "gauge", "Registered webhooks by state, as this node's deliverer last read them.")
        out += "tabsync_webhooks{state=\"enabled\"} \(hooks.enabled)\n"
        out += "tabsync_webhooks{state=\"disabled\"} \(hooks.disabled)\n"
        header("tabsync_webhook_deliveries_total", "counter", "Webhook delivery attempts of this node, by result.")
        for result in Result.allCases { out += "tabsync_webhook_deliveries_total{result=\"\(result.rawValue)\"} \(attempts[result, default: 0])\n" }
        header("tabsync_webhooks_disabled_total", "counter", "Webhooks this node disabled after their deliveries failed for --webhook-give-up-after.")
        out += "tabsync_webhooks_disabled_total \(disabled)\n"
        header("tabsync_webhook_pending_attempts", "gauge", "Failed attempts so far of the most tried delivery waiting for a retry (0: none).")
        out += "tabsync_webhook_pending_attempts \(pending.values.map(\.attempts).max() ?? 0)\n"
        header("tabsync_webhook_oldest_pending_seconds", "gauge",
               "Seconds since the oldest delivery waiting for a retry first failed (0: none); a hook is disabled when it reaches --webhook-give-up-after.")
        let oldest = pending.values.map(\.since).min().map { max(now.timeIntervalSince($0), 0) } ?? 0
        out += "tabsync_webhook_oldest_pending_seconds \(Metrics.format(oldest.rounded()))\n"
        header("tabsync_webhook_looks_total", "counter", "Times the deliverer looked at the store: every hook (scan) or the workspaces a commit woke it for (wakeup).")
        out += "tabsync_webhook_looks_total{kind=\"scan\"} \(scans)\n"
        out += "tabsync_webhook_looks_total{kind=\"wakeup\"} \(wakeups)\n"
        return out
    }
}
