#if canImport(Glibc)
import Glibc
import Foundation
import Testing
import TabsyncCore
@testable import TabsyncStore
import TabsyncTestSupport

/// `kill -9` during commits: every commit that returned is on disk, and what is there is a whole
/// number of batches (the state equals the replay of the first N batches).
///
/// Opt-in (`TABSYNC_FORK_KILL_TEST=1`, run alone with `--filter`; `scripts/test` runs it so, after the
/// rest): it forks the test process, and a child forked from a process whose other threads (parallel
/// tests, lws loops) hold runtime or malloc locks can hang before it commits anything. The crash
/// test of TabsyncServerTests kills the real `tabsync-server` executable instead.
@Suite("SQLite store under SIGKILL", .serialized, .enabled(if: ProcessInfo.processInfo.environment["TABSYNC_FORK_KILL_TEST"] == "1"))
struct SQLiteStoreKillTests {
    /// The same deterministic batches in the child that commits and in the parent that checks.
    static func batches(epoch: String) -> AnyIterator<(CommitBatch, Workspace)> {
        var driver = Driver(epoch: epoch, limits: Limits(logRetention: 50))
        var round: UInt64 = 0
        return AnyIterator {
            round += 1
            driver.mixedOps("w", count: 13, seed: round)
            driver.mixedOps("v", count: 5, seed: round &+ 1_000)
            let batch = driver.takeBatch()
            return (batch, driver.sequencer("w").workspace)
        }
    }

    @Test(arguments: [SQLiteStore.Options.Sync.normal, .full])
    func acknowledgedCommitsSurviveAKilledProcess(sync: SQLiteStore.Options.Sync) throws {
        let directory = TemporaryDirectory()
        let options = SQLiteStore.Options(sync: sync, snapshotInterval: 16)
        let epoch = try { () throws -> String in
            let store = try SQLiteStore(dataDirectory: directory.path, options: options)
            defer { store.close() }
            return store.epoch
        }()
        // Warm the code paths the child runs (a forked child of a threaded process should take no
        // runtime lock for the first time), then fork.
        _ = Self.batches(epoch: epoch).next()
        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)
        let pid = fork()
        if pid == 0 {
            // Child: commit batches forever, reporting each committed version after commit returns.
            close(fds[0])
            guard let store = try? SQLiteStore(dataDirectory: directory.path, options: options) else { _exit(2) }
            for (batch, workspace) in Self.batches(epoch: epoch) {
                do { try store.commit(batch) } catch { _exit(3) }
                var version = workspace.version
                guard write(fds[1], &version, 8) == 8 else { _exit(4) }
            }
            _exit(0)
        }
        close(fds[1])
        #expect(pid > 0)
        // Parent: let it commit a random number of batches, then kill it mid-flight.
        let target = Int.random(in: 20...120)
        var acknowledged: UInt64 = 0
        for _ in 0..<target {
            // Time-boxed: a child that stops reporting is killed, never waited on forever.
            var ready = pollfd(fd: fds[0], events: Int16(POLLIN), revents: 0)
            guard poll(&ready, 1, 20_000) == 1 else {
                Issue.record("the committing child made no progress for 20 s")
                break
            }
            var version: UInt64 = 0
            guard read(fds[0], &version, 8) == 8 else { break }
            acknowledged = version
        }
        kill(pid, SIGKILL)
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        close(fds[0])
        #expect(acknowledged > 0)

        let store = try SQLiteStore(dataDirectory: directory.path, options: options)
        defer { store.close() }
        let stored = try #require(try store.load(workspaceId: "w"))
        #expect(stored.workspace.version >= acknowledged, "an acknowledged commit was lost (kill after \(target) acks)")
        // The stored state is exactly the replay of a whole number of batches.
        var matched = false
        for (_, workspace) in Self.batches(epoch: epoch) {
            if workspace.version == stored.workspace.version {
                matched = workspace == stored.workspace
                break
            }
            if workspace.version > stored.workspace.version { break }
        }
        #expect(matched, "stored version \(stored.workspace.version) is not the end of a whole batch")
        #expect(zip(stored.log, stored.log.dropFirst()).allSatisfy { $0.version + 1 == $1.version })
    }
}
#endif
