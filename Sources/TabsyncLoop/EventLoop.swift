import CLibwebsockets

/// One libwebsockets context and the loop that services it: libev on epoll as lws' foreign loop
/// (``Backend/epoll``), or lws' own poll() loop (``Backend/poll``), run one iteration at a time by
/// its owner.
///
/// Guarantees: ``backend`` is the loop really in use (`.epoll` asked with `fallbackToPoll` may end
/// on `.poll`, never the reverse); after ``destroy()`` the context and the libev loop are gone and
/// nothing here calls lws again. Callbacks find their owner with ``owner(of:as:)``, set before the
/// context exists (`init`'s `owner`) or later (``setOwner(_:)``); until it is set they get nil.
///
/// Thread rule: one thread at a time, the one that services it (it may be created on another
/// thread and handed over once, before the first ``runOnce()``). Other threads reach the loop only
/// through a ``LoopInbox``. Not `Sendable`.
public final class EventLoop {
    /// Which loop lws runs on.
    public enum Backend: Sendable, Equatable {
        /// libev on epoll, as lws' foreign loop: a wakeup costs the ready fds, not all of them.
        /// Needs lws' libev plugin (Debian: `libwebsockets-evlib-ev`).
        case epoll
        /// lws' own poll() loop: every wakeup scans every fd.
        case poll
    }

    /// Why the context could not be made.
    public enum Error: Swift.Error, Sendable, Equatable, CustomStringConvertible {
        /// libev could not make an epoll loop (and no fallback to poll() was allowed).
        case epollUnavailable
        /// `lws_create_context` returned NULL (bad options, a port in use, a missing plugin).
        case contextFailed

        public var description: String {
            switch self {
            case .epollUnavailable: "could not create a libev (epoll) loop"
            case .contextFailed: "lws_create_context failed"
            }
        }
    }

    /// The lws context. Valid until ``destroy()``.
    public let context: OpaquePointer
    /// The loop in use.
    public let backend: Backend
    /// The libev loop when ``backend`` is `.epoll`.
    private var evLoop: UnsafeMutableRawPointer?
    /// What `lws_context_user` returns: a slot holding the owner (unretained), nil until set.
    private let ownerSlot: UnsafeMutablePointer<UnsafeMutableRawPointer?>
    public private(set) var isDestroyed = false

    /// Creates the context from `info` on `backend`.
    ///
    /// `info.user` and `info.foreign_loops` are this type's (overwritten); everything else
    /// (protocols, port, options) is the caller's and must stay valid as lws documents. With
    /// `fallbackToPoll`, an epoll loop that libev or lws cannot make (most likely: the libev plugin
    /// is missing) gives a poll() context instead; see ``backend``. `owner` is kept unretained: it
    /// must outlive the context.
    public init(
        _ info: lws_context_creation_info, backend: Backend, fallbackToPoll: Bool, owner: AnyObject? = nil
    ) throws(EventLoop.Error) {
        ownerSlot = .allocate(capacity: 1)
        ownerSlot.initialize(to: owner.map { Unmanaged.passUnretained($0).toOpaque() })
        var info = info
        info.user = UnsafeMutableRawPointer(ownerSlot)
        info.foreign_loops = nil
        var created: OpaquePointer?
        var used = Backend.poll
        if backend == .epoll {
            if let loop = clws_ev_loop_create() {
                // lws reads info.foreign_loops while creating the context: the slot outlives that call.
                let loopSlot = UnsafeMutablePointer<UnsafeMutableRawPointer?>.allocate(capacity: 1)
                defer { loopSlot.deallocate() }
                var epollInfo = info
                clws_ev_use_loop(&epollInfo, loopSlot, loop)
                created = lws_create_context(&epollInfo)
                if created != nil {
                    evLoop = loop
                    used = .epoll
                } else {
                    clws_ev_loop_destroy(loop)
                    if !fallbackToPoll {
                        ownerSlot.deallocate()
                        throw .contextFailed
                    }
                }
            } else if !fallbackToPoll {
                ownerSlot.deallocate()
                throw .epollUnavailable
            }
        }
        if created == nil { created = lws_create_context(&info) }
        guard let created else {
            ownerSlot.deallocate()
            throw .contextFailed
        }
        context = created
        self.backend = used
    }

    /// A context still alive here is destroyed without its owner (callbacks find none): an owner
    /// that keeps the loop is being released too.
    deinit {
        ownerSlot.pointee = nil
        destroy()
        ownerSlot.deallocate()
    }

    /// Sets the object ``owner(of:as:)`` returns (unretained: it must outlive the context).
    public func setOwner(_ owner: AnyObject) {
        ownerSlot.pointee = Unmanaged.passUnretained(owner).toOpaque()
    }

    /// The owner of the context `wsi` belongs to, as set on its ``EventLoop``; nil while unset.
    /// For the C callback of the owner's protocols (the cast is unchecked: one owner type per context).
    @inlinable
    public static func owner<Owner: AnyObject>(of wsi: OpaquePointer, as type: Owner.Type) -> Owner? {
        guard let context = lws_get_context(wsi), let slot = lws_context_user(context),
              let raw = slot.assumingMemoryBound(to: UnsafeMutableRawPointer?.self).pointee
        else { return nil }
        return Unmanaged<Owner>.fromOpaque(raw).takeUnretainedValue()
    }

    /// One iteration: waits for at least one event or timer deadline, then runs the callbacks that
    /// are ready. False when lws reports the context unusable (`lws_service` < 0, poll() loop only).
    /// Must not be called after ``destroy()``.
    ///
    /// Timers on the poll() loop: lws 4.1.6 runs the timers that are due at the start of an
    /// iteration, before it waits; a deadline only ends the wait. So a timer comes due in one
    /// iteration and its action runs at the start of the next, which then waits again. A timer
    /// action that changes what the owner checks between iterations calls ``wake()``. (On libev a
    /// timer's action runs inside the iteration that its deadline ends.)
    @discardableResult
    public func runOnce() -> Bool {
        if let evLoop {
            clws_ev_run_once(evLoop)
            return true
        }
        return lws_service(context, 0) >= 0
    }

    /// Makes the current or next wait return at once (`lws_cancel_service`; lws raises
    /// `LWS_CALLBACK_EVENT_WAIT_CANCELLED`): for a callback or timer action that set something the
    /// owner checks between iterations (a stop flag). Loop thread; other threads use a ``LoopInbox``.
    public func wake() {
        guard !isDestroyed else { return }
        lws_cancel_service(context)
    }

    /// Destroys the context (lws closes every connection, with callbacks into the owner, which must
    /// still be alive), then the libev loop. Idempotent; `deinit` calls it too (without the owner).
    public func destroy() {
        guard !isDestroyed else { return }
        isDestroyed = true
        lws_context_destroy(context)
        if let evLoop { clws_ev_loop_destroy(evLoop) }
        evLoop = nil
        ownerSlot.pointee = nil
    }
}
