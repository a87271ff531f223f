import CLibwebsockets
import Foundation
import TabsyncLoop

/// A client-only lws context (no listen socket) on an ``EventLoop``, driven by the test's thread,
/// with an inbox of integers drained in `EVENT_WAIT_CANCELLED`: enough to watch wakeups and timers
/// without a server.
final class LoopProbe {
    let loop: EventLoop
    let inbox: LoopInbox<Int>
    private let protocols: UnsafeMutablePointer<lws_protocols>
    private var taken: [Int] = []
    /// Every task taken from the inbox, in order.
    private(set) var received: [Int] = []
    /// `EVENT_WAIT_CANCELLED` callbacks seen.
    private(set) var wakeups = 0

    init(backend: EventLoop.Backend, inbox: LoopInbox<Int> = LoopInbox()) throws {
        self.inbox = inbox
        protocols = .allocate(capacity: 2)
        protocols.initialize(repeating: lws_protocols(), count: 2)
        protocols[0].name = UnsafePointer(strdup("tabsync-loop-probe"))
        protocols[0].callback = probeCallback
        var info = lws_context_creation_info()
        info.port = clws_port_no_listen()
        info.protocols = UnsafePointer(protocols)
        info.gid = -1
        info.uid = -1
        do {
            loop = try EventLoop(info, backend: backend, fallbackToPoll: false)
        } catch {
            free(UnsafeMutableRawPointer(mutating: protocols[0].name))
            protocols.deallocate()
            throw error
        }
        loop.setOwner(self)
        inbox.attach(loop)
    }

    deinit {
        inbox.close()
        loop.destroy()
        free(UnsafeMutableRawPointer(mutating: protocols[0].name))
        protocols.deallocate()
    }

    fileprivate func handle(_ reason: lws_callback_reasons) -> Int32 {
        if reason == LWS_CALLBACK_EVENT_WAIT_CANCELLED {
            wakeups += 1
            inbox.take(into: &taken)
            received += taken
            taken.removeAll(keepingCapacity: true)
        }
        return 0
    }

    /// Runs loop iterations until `done()` or until `limit` has passed; a timer ends the run at
    /// the limit, so a loop nobody wakes does not block the test. True when `done()` held.
    /// Timer actions that make `done()` true call `loop.wake()` (see `EventLoop.runOnce()`).
    func run(for limit: Duration, until done: () -> Bool) -> Bool {
        var expired = false
        let loop = self.loop
        let deadline = LoopTimer(on: loop) {
            expired = true
            loop.wake()
        }
        deadline.schedule(after: limit)
        while !done() && !expired { loop.runOnce() }
        deadline.cancel()
        return done()
    }
}

private func probeCallback(
    _ wsi: OpaquePointer?, _ reason: lws_callback_reasons, _ user: UnsafeMutableRawPointer?,
    _ input: UnsafeMutableRawPointer?, _ length: Int
) -> Int32 {
    guard let wsi, let probe = EventLoop.owner(of: wsi, as: LoopProbe.self) else { return 0 }
    return probe.handle(reason)
}
