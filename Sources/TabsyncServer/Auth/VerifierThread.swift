import Dispatch
import Foundation
import TabsyncLock

/// A task executor with one dedicated thread: token checks (jwt-kit's actor included, as a default
/// actor follows its task's executor preference) run there, never on the event loop thread and
/// never on Swift's shared cooperative pool, where anything blocking a pool thread (a blocking
/// test, a busy process) would delay a Hello's answer.
///
/// Jobs run one at a time in the order they are enqueued. The thread exits after ``stop()`` once
/// its queue is empty.
final class VerifierThread: TaskExecutor {
    private struct State {
        var jobs: [UnownedJob] = []
        var stopped = false
    }

    private let state = Lock(State())
    private let wake = DispatchSemaphore(value: 0)

    init(name: String = "tabsync-auth") {
        // The thread holds the executor until it exits (after `stop()`).
        let thread = Thread { [self] in
            while true {
                wake.wait()
                let next = state.withLock { state -> (UnownedJob?, Bool) in
                    (state.jobs.isEmpty ? nil : state.jobs.removeFirst(), state.stopped)
                }
                if let job = next.0 {
                    job.runSynchronously(on: self.asUnownedTaskExecutor())
                } else if next.1 {
                    return
                }
            }
        }
        thread.name = name
        thread.start()
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let unowned = UnownedJob(job)
        state.withLock { $0.jobs.append(unowned) }
        wake.signal()
    }

    /// Lets the thread exit once the jobs already queued have run.
    func stop() {
        state.withLock { $0.stopped = true }
        wake.signal()
    }
}
