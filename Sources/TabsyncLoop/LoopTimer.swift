import CLibwebsockets

/// A one-shot timer on an ``EventLoop`` (an lws sorted-usec-list entry): ``schedule(after:)`` arms
/// it, re-arming replaces the pending deadline, ``cancel()`` disarms it. It fires once per arming,
/// on the loop thread, inside ``EventLoop/runOnce()``; the action may re-arm it.
///
/// Guarantees: never fires after ``cancel()``, after its loop is destroyed, or once released
/// (`deinit` cancels). Timing is lws': never before the deadline; later when the loop is busy, and
/// on libev possibly as late as the deadline lws' own libev timer already waits for (see
/// ``schedule(after:)``). On poll() the action runs at the start of the iteration after the one
/// the deadline ended (``EventLoop/runOnce()``).
///
/// Thread rule: must be used on the loop's thread. Not `Sendable`.
public final class LoopTimer {
    private let loop: EventLoop
    /// The lws entry, at a fixed address (lws links it into its list while armed).
    private let entry: UnsafeMutablePointer<clws_timer>
    private let action: () -> Void
    /// Armed and not yet fired or cancelled.
    public private(set) var isArmed = false

    /// A disarmed timer that runs `action` when it fires. `action` usually captures its owner
    /// `unowned` (the owner keeps the timer).
    public init(on loop: EventLoop, action: @escaping () -> Void) {
        self.loop = loop
        self.action = action
        entry = .allocate(capacity: 1)
        entry.initialize(to: clws_timer())
        entry.pointee.owner = Unmanaged.passUnretained(self).toOpaque()
    }

    deinit {
        cancel()
        entry.deallocate()
    }

    /// Fires once after `delay` (rounded up to whole microseconds, at least one), replacing any
    /// pending deadline. Does nothing once the loop is destroyed.
    ///
    /// On libev, lws 4.1.6 keeps one libev timer for all its deadlines and moves it earlier only
    /// when that timer is idle: it is re-pointed after it fires, not when an earlier deadline is
    /// armed while it waits. So arming from a timer's own action (a periodic tick), or before the
    /// loop first runs, is exact; arming earlier than lws' pending deadline anywhere else fires at
    /// that deadline at the latest. Owners keep a short periodic timer (the server's 50 ms tick),
    /// which bounds the delay.
    public func schedule(after delay: Duration) {
        guard !loop.isDestroyed else { return }
        let (seconds, attoseconds) = delay.components
        let micros = max(1, seconds * 1_000_000 + (attoseconds + 999_999_999_999) / 1_000_000_000_000)
        isArmed = true
        lws_sul_schedule(loop.context, 0, sul, loopTimerFired, micros)
    }

    /// Disarms it (no-op when not armed).
    public func cancel() {
        guard isArmed else { return }
        isArmed = false
        guard !loop.isDestroyed else { return }
        lws_sul_schedule(loop.context, 0, sul, loopTimerFired, clws_timer_cancel_usec())
    }

    /// The entry's `sul` (its first member, so the same address).
    private var sul: UnsafeMutablePointer<lws_sorted_usec_list_t> {
        UnsafeMutableRawPointer(entry).assumingMemoryBound(to: lws_sorted_usec_list_t.self)
    }

    fileprivate func fire() {
        isArmed = false
        action()
    }
}

/// lws' timer callback (a C function pointer): lws unlinked the entry before calling it.
private func loopTimerFired(_ sul: UnsafeMutablePointer<lws_sorted_usec_list_t>?) {
    guard let sul, let raw = clws_timer_owner(sul) else { return }
    Unmanaged<LoopTimer>.fromOpaque(raw).takeUnretainedValue().fire()
}
