import Dispatch
import Foundation
import Logging
import Testing
import TabsyncStore
@testable import TabsyncServer

/// The deliverer sleeps while there is nothing to do (docs/design.md, "Webhooks", "Off the event
/// loop"): it looks at the store at its start, when a hook changes or a commit of a workspace a
/// hook matches wakes it, and on a shared store every rescan interval; never on a timer of its own
/// otherwise. The windows below wait for something not to happen; every positive wait is on a
/// condition with a deadline.
@Suite struct WebhookDelivererWakeTests {
    private func deliverer(_ store: MemoryStore, rescan: Duration? = nil) -> WebhookDeliverer {
        WebhookDeliverer(
            store: store, executor: DispatchQueue(label: "test.store"), allowPrivate: true,
            tuning: .init(rescanInterval: rescan), logger: Logger(label: "test"))
    }

    private func waitFor(_ what: String, _ condition: () -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(60)
        while !condition() {
            guard ContinuousClock.now < deadline else { Issue.record("not within 60 s: \(what)"); return }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    @Test func withNoHookItLooksOnceAndSleepsUntilAHookIsAdded() async throws {
        let store = MemoryStore()
        let deliverer = deliverer(store)
        deliverer.start()
        defer { deliverer.stop() }
        try await waitFor("the first look") { deliverer.looks.scans == 1 }
        // A window with nothing to do: the deliverer that polled every 250 ms looked 6 more times.
        try await Task.sleep(for: .milliseconds(1500))
        #expect(deliverer.looks.scans == 1)
        #expect(!deliverer.committed(["team"]), "a commit no hook matches wakes nothing")
        deliverer.hooksChanged()
        try await waitFor("the look after the hook change") { deliverer.looks.scans == 2 }
        #expect(deliverer.looks.wakeups == 0)
    }

    @Test func aCommitWakesItOnlyForAWorkspaceAnEnabledHookMatches() async throws {
        let store = MemoryStore()
        try store.addWebhook(
            WebhookRegistration(id: "wh_1", url: "http://127.0.0.1:9/", workspaces: "hook-*", secret: "whsec_x", createdAt: Date()),
            cursors: [:])
        let deliverer = deliverer(store)
        deliverer.start()
        defer { deliverer.stop() }
        try await waitFor("the first look, which reads the hooks") { deliverer.looks.scans == 1 }
        try await waitFor("the hooks' globs known") { deliverer.committed(["hook-a"]) }
        try await waitFor("the woken look") { deliverer.looks.wakeups >= 1 }
        #expect(!deliverer.committed(["other"]))
        #expect(deliverer.looks.scans == 1)
    }

    @Test func onASharedStoreItLooksAgainEveryRescanInterval() async throws {
        let deliverer = deliverer(MemoryStore(), rescan: .milliseconds(100))
        deliverer.start()
        defer { deliverer.stop() }
        try await waitFor("three looks without a wakeup") { deliverer.looks.scans >= 3 }
    }
}
