import CLibwebsockets
import TabsyncLock

/// The one way into an ``EventLoop``'s thread from other threads: a `Lock`-guarded queue of
/// tasks plus `lws_cancel_service`, lws' one thread-safe call, which makes the loop raise
/// `LWS_CALLBACK_EVENT_WAIT_CANCELLED` (for every protocol); the owner drains the queue there with
/// ``take(into:)``.
///
/// Guarantees: tasks are taken in the order they were posted; a post that returns true is taken by
/// the loop unless it is ``close()``d first; the loop is woken once per batch (when a post finds
/// the queue empty), and tasks posted before ``attach(_:)`` wake it at attach. After ``close()``
/// (or once ``postFinal(_:)`` was accepted) posts are refused and nothing calls lws.
///
/// Thread rule: ``post(_:)``, ``postFinal(_:)`` from any thread; ``attach(_:)``, ``take(into:)``
/// and ``close()`` on the loop's thread.
public final class LoopInbox<Task: Sendable>: Sendable {
    @usableFromInline
    struct State: Sendable {
        @usableFromInline var tasks: [Task] = []
        @usableFromInline var context: ContextHandle?
        /// Posts are refused (the final task was posted, or the loop closed the inbox).
        @usableFromInline var sealed = false
        @usableFromInline var closed = false
    }

    /// An lws context pointer handed to other threads only for `lws_cancel_service`.
    ///
    /// `@unchecked Sendable`: the pointer is only passed to lws' documented thread-safe call, under
    /// the inbox lock, between ``attach(_:)`` and ``close()``; the loop closes the inbox before it
    /// destroys the context.
    @usableFromInline
    struct ContextHandle: @unchecked Sendable {
        @usableFromInline let pointer: OpaquePointer
        @usableFromInline init(pointer: OpaquePointer) { self.pointer = pointer }
    }

    @usableFromInline let state = Lock(State())

    public init() {}

    /// Queues a task and wakes the loop; false (nothing queued) once the inbox is sealed or closed.
    @inlinable
    @discardableResult
    public func post(_ task: Task) -> Bool {
        state.withLock { state in
            guard !state.sealed else { return false }
            let wasEmpty = state.tasks.isEmpty
            state.tasks.append(task)
            if wasEmpty, let context = state.context { lws_cancel_service(context.pointer) }
            return true
        }
    }

    /// Queues a last task (a stop request): later posts are refused. False when sealed already.
    @discardableResult
    public func postFinal(_ task: Task) -> Bool {
        state.withLock { state in
            guard !state.sealed else { return false }
            state.sealed = true
            let wasEmpty = state.tasks.isEmpty
            state.tasks.append(task)
            if wasEmpty, let context = state.context { lws_cancel_service(context.pointer) }
            return true
        }
    }

    /// Starts waking `loop`; wakes it now when tasks are waiting. Loop thread.
    public func attach(_ loop: EventLoop) {
        state.withLock { state in
            guard !state.closed else { return }
            state.context = ContextHandle(pointer: loop.context)
            if !state.tasks.isEmpty { lws_cancel_service(loop.context) }
        }
    }

    /// Moves every queued task, oldest first, into `buffer` (which should be empty), by swapping
    /// storage: with the caller's buffer kept and emptied with `removeAll(keepingCapacity: true)`,
    /// the steady state allocates nothing. Loop thread.
    @inlinable
    public func take(into buffer: inout [Task]) {
        state.withLock { state in
            if buffer.isEmpty {
                swap(&state.tasks, &buffer)
            } else {
                buffer.append(contentsOf: state.tasks)
                state.tasks.removeAll(keepingCapacity: true)
            }
        }
    }

    /// Refuses posts and stops waking the loop, for good; tasks still queued are dropped. Call it
    /// before destroying the context. Loop thread.
    public func close() {
        state.withLock { state in
            state.sealed = true
            state.closed = true
            state.context = nil
            state.tasks.removeAll()
        }
    }
}
