#if canImport(Glibc)
import Glibc
#endif
import CSQLite
import Dispatch
import Synchronization
import TabsyncLock

/// Runs the WAL checkpoints of a ``SQLiteStore`` in the background: on its own thread and its own
/// connection to the file, never inside a commit.
///
/// Why: SQLite's default (`wal_autocheckpoint` = 1000 pages) runs a checkpoint inside the commit
/// that crosses it, on the committing connection. That checkpoint copies the WAL into the database
/// file and fsyncs both, so the commit takes tens of milliseconds and every op behind it waits
/// (BENCHMARKS.md, "The SQLite store's tail").
///
/// Guarantees:
/// - No checkpoint runs inside a commit: the writing connection's WAL hook (which replaces
///   SQLite's auto-checkpoint) only reports the WAL's size here (``committed(walFrames:)``).
/// - Each time the WAL has grown by ``Settings/startFrames`` frames, a PASSIVE checkpoint runs on
///   this thread while commits go on (SQLite lets one checkpointer work beside one writer; it copies
///   the frames committed before it started).
/// - The WAL file is bounded: when it holds more than ``Settings/limitBytes`` after a passive
///   checkpoint, a RESTART checkpoint runs with the writer paused (`pauseWriter`). It copies the
///   frames left, and the next commit writes the WAL from its start. After ``Settings/idleInterval``
///   without a commit, a TRUNCATE checkpoint empties the WAL file the same way. These pauses are
///   the only time a checkpoint delays a commit.
/// - Checkpoints keep the store's sync mode: the WAL is fsynced before pages are copied and the
///   database file after (SQLite does so in NORMAL and FULL), so a crash during one loses nothing.
/// - A checkpoint that fails (read-only or full disk, I/O error) is retried at the next wake, on a
///   reopened connection. It never fails a commit.
/// - ``stop()`` ends the thread and closes its connection; it returns once both are done.
final class WALCheckpointer: @unchecked Sendable {
    /// When checkpoints run.
    struct Settings: Sendable, Equatable {
        /// WAL growth (frames, about a page each) that starts a passive checkpoint: SQLite's own
        /// auto-checkpoint threshold.
        var startFrames: Int32 = 1000
        /// WAL file size past which the writer is paused for a RESTART checkpoint.
        var limitBytes: Int64 = 64 << 20
        /// Time without a commit after which the WAL is checkpointed and truncated.
        var idleInterval: Duration = .seconds(1)

        init(startFrames: Int32 = 1000, limitBytes: Int64 = 64 << 20, idleInterval: Duration = .seconds(1)) {
            self.startFrames = startFrames
            self.limitBytes = limitBytes
            self.idleInterval = idleInterval
        }
    }

    /// What the store thread reports and the checkpointer reads.
    private struct Shared {
        var walFrames: Int32 = 0
        /// `walFrames` when the thread was last woken.
        var wokenAt: Int32 = 0
        var commits: UInt64 = 0
        var stopping = false
        /// Checkpoints run, by mode, for tests and the trace.
        var passiveRuns = 0
        var restartRuns = 0
        var truncateRuns = 0
    }

    let path: String
    let vfs: String?
    let synchronous: String
    let settings: Settings
    private let trace: StoreTrace?
    /// Runs its argument while no commit runs (the store holds its writer lock around it). Set
    /// by ``start(pausingWriter:)`` before the thread starts.
    private var pauseWriter: (@Sendable (() -> Void) -> Void)?
    private let shared = Lock(Shared())
    private let wake = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)
    private let started = Atomic<Bool>(false)
    private let stopped = Atomic<Bool>(false)
    /// The thread's `pthread_self()` once it runs.
    private let threadID = Atomic<UInt>(0)
    /// The thread's own connection (thread only); nil until first used or after a failure.
    private var connection: SQLiteConnection?
    private var frameBytes: Int64 = 4096 + 24

    init(path: String, vfs: String? = nil, synchronous: String, settings: Settings, trace: StoreTrace?) {
        self.path = path
        self.vfs = vfs
        self.synchronous = synchronous
        self.settings = settings
        self.trace = trace
    }

    /// Starts the thread (once). `pausingWriter` runs its argument while no commit runs.
    func start(pausingWriter: @escaping @Sendable (() -> Void) -> Void) {
        guard !started.exchange(true, ordering: .acquiringAndReleasing) else { return }
        pauseWriter = pausingWriter
        // A plain pthread, not Foundation's Thread or a dispatch queue: the store is also opened in
        // a child forked from a threaded test process, where those may take runtime locks.
        let context = Unmanaged.passRetained(self).toOpaque()
        var thread = pthread_t()
        let rc = pthread_create(&thread, nil, { context in
            let checkpointer = Unmanaged<WALCheckpointer>.fromOpaque(context!).takeRetainedValue()
            checkpointer.run()
            return nil
        }, context)
        if rc == 0 {
            pthread_detach(thread)
        } else {
            Unmanaged<WALCheckpointer>.fromOpaque(context).release()
            finished.signal()
        }
    }

    /// Ends the thread and closes its connection; returns once they are (at once when called on
    /// the thread itself: a store released there). Idempotent.
    func stop() {
        guard started.load(ordering: .acquiring), !stopped.exchange(true, ordering: .acquiringAndReleasing) else { return }
        shared.withLock { $0.stopping = true }
        wake.signal()
        if threadID.load(ordering: .acquiring) != UInt(pthread_self()) { finished.wait() }
    }

    /// From the writing connection's WAL hook after each commit (on the store thread, inside the
    /// commit): records the WAL's size and wakes the thread when it grew by ``Settings/startFrames``.
    func committed(walFrames: Int32) {
        let wakeUp = shared.withLock { shared -> Bool in
            shared.commits &+= 1
            shared.walFrames = walFrames
            if walFrames < shared.wokenAt { shared.wokenAt = 0 }  // the WAL restarted
            guard walFrames - shared.wokenAt >= settings.startFrames else { return false }
            shared.wokenAt = walFrames
            return true
        }
        if wakeUp { wake.signal() }
    }

    /// Checkpoints run so far: (passive, restart, truncate).
    var runs: (passive: Int, restart: Int, truncate: Int) {
        shared.withLock { ($0.passiveRuns, $0.restartRuns, $0.truncateRuns) }
    }

    // MARK: - the thread

    private func run() {
        threadID.store(UInt(pthread_self()), ordering: .releasing)
        var seenCommits: UInt64 = 0
        var walEmpty = true
        let idle = settings.idleInterval.components
        let idleNanoseconds = Int(idle.seconds) * 1_000_000_000 + Int(idle.attoseconds / 1_000_000_000)
        while true {
            let woken = wake.wait(timeout: .now() + .nanoseconds(max(idleNanoseconds, 1_000_000))) == .success
            let (stopping, commits) = shared.withLock { ($0.stopping, $0.commits) }
            if stopping { break }
            let committedMeanwhile = commits != seenCommits
            seenCommits = commits
            if committedMeanwhile { walEmpty = false }
            if woken {
                let passive = checkpoint(SQLITE_CHECKPOINT_PASSIVE, pausing: false)
                if passive.code == SQLITE_OK, Int64(passive.walFrames) * frameBytes > settings.limitBytes {
                    _ = checkpoint(SQLITE_CHECKPOINT_RESTART, pausing: true)
                }
            } else if !committedMeanwhile, !walEmpty {
                walEmpty = checkpoint(SQLITE_CHECKPOINT_TRUNCATE, pausing: true).code == SQLITE_OK
            }
        }
        // Closed without a checkpoint of its own: the writer's close truncates the WAL.
        connection?.closeWithoutCheckpoint()
        connection = nil
        finished.signal()
    }

    /// One checkpoint of `mode` on the thread's connection, with the writer paused when `pausing`.
    @discardableResult
    private func checkpoint(_ mode: Int32, pausing: Bool) -> SQLiteConnection.CheckpointResult {
        guard let db = openedConnection() else {
            return SQLiteConnection.CheckpointResult(code: SQLITE_CANTOPEN, walFrames: -1, checkpointedFrames: -1)
        }
        let asked = ContinuousClock.now
        var began = asked
        var result = SQLiteConnection.CheckpointResult(code: SQLITE_MISUSE, walFrames: -1, checkpointedFrames: -1)
        if pausing, let pauseWriter {
            pauseWriter {
                began = ContinuousClock.now
                result = db.checkpoint(mode)
            }
        } else {
            result = db.checkpoint(mode)
        }
        let ended = ContinuousClock.now
        shared.withLock {
            switch mode {
            case SQLITE_CHECKPOINT_PASSIVE: $0.passiveRuns += 1
            case SQLITE_CHECKPOINT_RESTART: $0.restartRuns += 1
            default: $0.truncateRuns += 1
            }
        }
        if let trace {
            let name = mode == SQLITE_CHECKPOINT_PASSIVE ? "passive" : mode == SQLITE_CHECKPOINT_RESTART ? "restart" : "truncate"
            trace.record(
                "checkpoint mode=\(name) ms=\(StoreTrace.format(StoreTrace.milliseconds(ended - began))) "
                    + "waited_ms=\(StoreTrace.format(StoreTrace.milliseconds(began - asked))) "
                    + "wal_frames=\(result.walFrames) done_frames=\(result.checkpointedFrames) rc=\(result.code)")
        }
        if result.code != SQLITE_OK && result.code & 0xff != SQLITE_BUSY {
            // Reopened at the next checkpoint: the disk may be writable again by then.
            connection?.closeWithoutCheckpoint()
            connection = nil
        }
        return result
    }

    /// The thread's connection, opened when missing; nil when it cannot be opened now.
    private func openedConnection() -> SQLiteConnection? {
        if let connection { return connection }
        // No busy wait: a checkpoint that finds the file locked tries again at the next wake.
        guard let db = try? SQLiteConnection(path: path, create: false, busyTimeoutMilliseconds: 0, vfs: vfs) else { return nil }
        // Keep the -wal file if this connection closes last (as the writer does, see persistWAL).
        db.persistWAL()
        guard (try? db.execute("PRAGMA synchronous = \(synchronous)")) != nil,
              let pageSize = try? db.scalar("PRAGMA page_size"), !db.isReadOnly
        else {
            db.closeWithoutCheckpoint()
            return nil
        }
        frameBytes = pageSize + 24
        connection = db
        return db
    }
}
