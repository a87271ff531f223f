import Foundation
import InMemoryLogging
import Logging
import TabsyncLock
import TabsyncLoop
import TabsyncServer
import TabsyncStore
import TabsyncTestSupport

/// The real tabsync server in this process on 127.0.0.1 and an ephemeral port (port 0): the one
/// harness the integration tests of every target start their server with.
///
/// Guarantees:
/// - Once `init` returns, ``port`` is bound and served.
/// - The server runs until ``stop()`` or until the harness is released (`deinit` stops it), so a
///   test that fails or throws before its own `defer` never leaves a server running.
/// - ``stop()`` is the server's graceful shutdown (the commit in flight is stored and acknowledged,
///   every client is closed 1001); it returns once the loop has exited and may be called again.
/// - ``restart()`` serves the same ``store`` on the same port with the same configuration: the same
///   history (memory) or the same file (SQLite).
/// - The server logs nothing, unless `TABSYNC_TEST_LOG=<level>` (trace … critical) is set, which
///   sends its log to stderr, or `capturingLog` keeps a copy in memory (``logEntries``).
///
/// Not guaranteed: that the port is still free for ``restart()`` (another process may take it; on
/// this loopback-only machine it has always been free).
package final class TestServer: Sendable {
    /// Where the workspaces are kept.
    package enum Storage: String, Sendable, CaseIterable {
        /// A fresh `MemoryStore`.
        case memory
        /// A `SQLiteStore` on a fresh temporary directory, removed with the harness.
        case sqlite
    }

    /// What the server serves (a wrapper of another store, for tests that need a slow one).
    package var store: any WorkspaceStore { stores.store }
    /// The store with its history and admin capabilities, as the server is built with them.
    package let stores: StoreCapabilities
    /// The bound port, the same across ``restart()``.
    package let port: Int
    /// The configuration the server runs with (its `port` is ``port``).
    package let configuration: Server.Configuration
    private let logger: Logger
    private let captured: InMemoryLogHandler?
    private let running: Lock<Server>
    /// Holds the SQLite store's data directory for as long as the harness lives.
    private let directory: TemporaryDirectory?

    /// A server on `store` (default: a fresh memory store) with the test's `configure` applied to
    /// the defaults (host 127.0.0.1, port 0). `capturingLog` keeps the server's log lines at that
    /// level and above in ``logEntries``.
    package convenience init(
        store: some HistoryStore & WebhookStore = MemoryStore(), capturingLog: Logger.Level? = nil,
        configure: (inout Server.Configuration) -> Void = { _ in }
    ) throws {
        try self.init(stores: StoreCapabilities(store), directory: nil, capturingLog: capturingLog, configure: configure)
    }

    /// A server on a store that keeps only the log (a wrapper of another store: slow, faulty):
    /// history reads and admin calls are answered as by a store that keeps neither.
    package convenience init(
        store: some WorkspaceStore, capturingLog: Logger.Level? = nil, configure: (inout Server.Configuration) -> Void = { _ in }
    ) throws {
        try self.init(stores: StoreCapabilities(logOnly: store), directory: nil, capturingLog: capturingLog, configure: configure)
    }

    /// A server on a fresh store of the given kind.
    package convenience init(
        _ storage: Storage, capturingLog: Logger.Level? = nil, configure: (inout Server.Configuration) -> Void = { _ in }
    ) throws {
        switch storage {
        case .memory:
            try self.init(stores: StoreCapabilities(MemoryStore()), directory: nil, capturingLog: capturingLog, configure: configure)
        case .sqlite:
            let directory = TemporaryDirectory(prefix: "tabsync-server-test")
            let store = try SQLiteStore(dataDirectory: directory.path)
            try self.init(stores: StoreCapabilities(store), directory: directory, capturingLog: capturingLog, configure: configure)
        }
    }

    private init(
        stores: StoreCapabilities, directory: TemporaryDirectory?, capturingLog: Logger.Level?,
        configure: (inout Server.Configuration) -> Void
    ) throws {
        var configuration = Server.Configuration(host: "127.0.0.1", port: 0)
        configure(&configuration)
        let (logger, captured) = Self.makeLogger(capturing: capturingLog)
        // A server with a debug logger asks lws for its notices, process wide and for good: keep
        // them out of the whole test run's log unless TABSYNC_TEST_LOG asks for the server's log.
        if ProcessInfo.processInfo.environment["TABSYNC_TEST_LOG"] == nil { LWSLog.limit(to: LWSLog.errorsAndWarnings) }
        let server = Server(configuration: configuration, stores: stores, logger: logger)
        port = try server.start()
        configuration.port = port
        self.configuration = configuration
        self.stores = stores
        self.logger = logger
        self.captured = captured
        self.directory = directory
        running = Lock(server)
    }

    deinit {
        stop()
        (store as? SQLiteStore)?.close()
    }

    /// Graceful stop; returns once the server's loop has exited. Safe to call more than once.
    package func stop() {
        running.withLock { $0 }.shutdown()
    }

    /// Stops the server if it runs, then starts a new one on the same port, store and configuration.
    package func restart() throws {
        stop()
        let server = Server(configuration: configuration, stores: stores, logger: logger)
        _ = try server.start()
        running.withLock { $0 = server }
    }

    /// The log lines kept so far when the harness was made `capturingLog`, oldest first; else empty.
    package var logEntries: [InMemoryLogHandler.Entry] {
        captured?.entries ?? []
    }

    /// A logger that drops everything, or writes to stderr at `TABSYNC_TEST_LOG`'s level, and also
    /// keeps the lines at `capturing` and above when asked.
    private static func makeLogger(capturing: Logger.Level?) -> (Logger, InMemoryLogHandler?) {
        let streamed = ProcessInfo.processInfo.environment["TABSYNC_TEST_LOG"].flatMap(Logger.Level.init(rawValue:))
        var handlers: [any LogHandler] = []
        var captured: InMemoryLogHandler?
        if let streamed {
            var handler = StreamLogHandler.standardError(label: "test.server")
            handler.logLevel = streamed
            handlers.append(handler)
        }
        if let capturing {
            var handler = InMemoryLogHandler()
            handler.logLevel = capturing
            captured = handler
            handlers.append(handler)
        }
        // A multiplexed logger's level is the lowest of its handlers'; each keeps its own.
        let chosen = handlers
        let logger = Logger(label: "test.server") { _ in
            switch chosen.count {
            case 0: SwiftLogNoOpLogHandler()
            case 1: chosen[0]
            default: MultiplexLogHandler(chosen)
            }
        }
        return (logger, captured)
    }
}
