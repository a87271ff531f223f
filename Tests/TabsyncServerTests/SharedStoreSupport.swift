import Foundation
import TabsyncCore
import TabsyncProto
import TabsyncServer
import TabsyncTestServer
import TabsyncTestSupport
import Testing
@testable import TabsyncStore

/// A PostgreSQL schema of the test's own on the shared cluster (dropped at the end), and the
/// server nodes on it: each node an in-process ``TestServer`` with its own ``PostgresStore``
/// connection, as separate processes would have.
final class SharedStoreNodes: @unchecked Sendable {
    let url: String
    let schema = "t_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
    private(set) var stores: [PostgresStore] = []
    private(set) var servers: [TestServer] = []

    /// How one node hears of the others' commits.
    struct Hearing {
        var listener = true
        var pollInterval: Duration = .zero
        static let notifications = Hearing()
        static let pollOnly = Hearing(listener: false, pollInterval: .milliseconds(200))
        /// Neither: the node learns of other nodes' commits only when its own batch is behind.
        static let deaf = Hearing(listener: false, pollInterval: .zero)
    }

    init(url: String? = nil, _ hearings: [Hearing], configure: (inout Server.Configuration) -> Void = { _ in }) throws {
        self.url = try url ?? PostgresTestCluster.requireURL()
        for hearing in hearings { try addNode(hearing, configure: configure) }
    }

    var storeOptions: PostgresStore.Options {
        PostgresStore.Options(connectTimeoutSeconds: 2, schema: schema, applicationName: "tabsync-node-test")
    }

    /// Starts a node; `wrap` puts a wrapper of the test's (a ``FaultyStore``) between it and its store.
    @discardableResult
    func addNode(
        _ hearing: Hearing, wrap: (PostgresStore) -> any WorkspaceStore = { $0 },
        configure: (inout Server.Configuration) -> Void = { _ in }
    ) throws -> TestServer {
        let store = try PostgresStore(url: url, options: storeOptions)
        stores.append(store)
        let feed: (any CommitFeed)? = hearing.listener
            ? PostgresCommitFeed(
                url: url, store: storeOptions, options: .init(keepaliveSeconds: 1, keepaliveTimeoutSeconds: 2, maxBackoffSeconds: 0.5),
                ownBackend: { store.backendPID })
            : nil
        let server = try TestServer(store: wrap(store)) { configuration in
            configuration.sharedStore = .init(pollInterval: hearing.pollInterval, feed: feed, holders: store)
            // These tests split workspaces on purpose; the one about moves turns them back on.
            configuration.sharedStore?.movesSplitWorkspaces = false
            configuration.limits.maxOpsPerSecond = 10_000
            configure(&configuration)
        }
        servers.append(server)
        return server
    }

    subscript(_ node: Int) -> TestServer { servers[node] }

    /// A store connection of the test's own on the schema (for reading the log).
    func reader() throws -> PostgresStore {
        let store = try PostgresStore(url: url, options: storeOptions)
        stores.append(store)
        return store
    }

    deinit {
        for server in servers { server.stop() }
        for store in stores { store.close() }
        if let db = try? PGConnection(url: url) {
            _ = try? db.execute("DROP SCHEMA IF EXISTS " + PGConnection.quoteIdentifier(schema) + " CASCADE")
            db.close()
        }
    }
}

/// A server's `/metrics` value of one unlabelled sample.
func metric(_ server: TestServer, _ name: String) throws -> Double? {
    let (status, body) = try httpGet(port: server.port, path: "/metrics")
    guard status == 200 else { return nil }
    for line in body.split(separator: "\n") where line.hasPrefix(name + " ") {
        return Double(line.split(separator: " ").last ?? "")
    }
    return nil
}

/// The state the stored op log gives when replayed from an empty workspace.
func replayedLog(_ store: PostgresStore, workspace: String) throws -> Workspace {
    var state = Workspace(id: workspace, epoch: store.epoch)
    for op in try store.ops(workspaceId: workspace, after: 0, limit: .max) ?? [] { try state.apply(applied: op) }
    return state
}

extension TestClient {
    /// Reads until `count` of this client's seqs are answered (Applied with its clientId, or
    /// Rejected), keeping every Applied seen on the way (its own and others'), in order.
    func collect(answers count: Int, clientId: String, into applied: inout [AppliedOp], timeout: Double = 30) throws -> [UInt64: Tabsync_V1_Rejected] {
        var answered = 0
        var rejected: [UInt64: Tabsync_V1_Rejected] = [:]
        let deadline = Date().addingTimeInterval(timeout)
        while answered < count {
            let message = try receive(timeout: max(0.01, deadline.timeIntervalSinceNow))
            switch message {
            case .applied(let a):
                let op = try AppliedOp(a)
                applied.append(op)
                if op.clientId == clientId { answered += 1 }
            case .rejected(let r):
                rejected[r.seq] = r
                answered += 1
            default:
                break
            }
        }
        return rejected
    }

    /// Reads Applied messages until one at `version` or later has come, appending them.
    func collect(through version: UInt64, into applied: inout [AppliedOp], timeout: Double = 30) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while (applied.last?.version ?? 0) < version {
            let message = try receive(timeout: max(0.01, deadline.timeIntervalSinceNow))
            if case .applied(let a) = message { applied.append(try AppliedOp(a)) }
        }
    }
}
