import TabsyncLock

/// Why ``withTimeout(_:_:)`` gave up.
package enum TimeoutError: Error, Equatable, CustomStringConvertible {
    /// The operation had not finished when its time was up.
    case timedOut(after: Duration)

    package var description: String {
        switch self {
        case .timedOut(let after): "timed out after \(after)"
        }
    }
}

/// Runs `operation` and returns its result, or throws ``TimeoutError/timedOut(after:)`` once
/// `timeout` (stretched by ``testTimeScale``) has passed, whichever comes first: a test awaiting something that may never finish
/// fails in bounded time instead of hanging the suite.
///
/// Guarantees the caller resumes within about `timeout` even if `operation` ignores cancellation:
/// on timeout the operation is cancelled and left to finish on its own (its result is dropped).
/// Cancelling the caller cancels the operation.
package func withTimeout<T: Sendable>(
    _ timeout: Duration, _ operation: @escaping @Sendable () async throws -> T
) async throws -> T {
    let race = Race<T>()
    return try await withTaskCancellationHandler {
        try await withCheckedThrowingContinuation { continuation in
            race.arm(continuation)
            let work = Task {
                do { race.finish(.success(try await operation())) } catch { race.finish(.failure(error)) }
            }
            let timer = Task {
                try? await Task.sleep(for: scaled(timeout))
                if !Task.isCancelled { race.finish(.failure(TimeoutError.timedOut(after: scaled(timeout)))) }
            }
            race.hold(work: work, timer: timer)
        }
    } onCancel: {
        race.cancel()
    }
}

/// The one continuation of a ``withTimeout(_:_:)`` call, resumed by whichever of the operation and
/// the timer finishes first; the other is cancelled. Thread-safe (a `Lock`).
private final class Race<T: Sendable>: Sendable {
    private struct State {
        var continuation: CheckedContinuation<T, any Error>?
        var work: Task<Void, Never>?
        var timer: Task<Void, Never>?
        var finished = false
    }

    private let state = Lock(State())

    func arm(_ continuation: CheckedContinuation<T, any Error>) {
        state.withLock { $0.continuation = continuation }
    }

    func hold(work: Task<Void, Never>, timer: Task<Void, Never>) {
        let finished = state.withLock { state -> Bool in
            state.work = work
            state.timer = timer
            return state.finished
        }
        if finished {
            work.cancel()
            timer.cancel()
        }
    }

    func finish(_ result: Result<T, any Error>) {
        let taken = state.withLock { state -> (CheckedContinuation<T, any Error>, Task<Void, Never>?, Task<Void, Never>?)? in
            guard !state.finished, let continuation = state.continuation else { return nil }
            state.finished = true
            state.continuation = nil
            return (continuation, state.work, state.timer)
        }
        guard let (continuation, work, timer) = taken else { return }
        work?.cancel()
        timer?.cancel()
        continuation.resume(with: result)
    }

    func cancel() {
        finish(.failure(CancellationError()))
    }
}
