import Foundation
import TabsyncProto
import TabsyncTestSupport
import Testing
@testable import TabsyncStore

/// `tabsync-server --store postgres://…` and `tabsync-server migrate` as child processes: a URL's
/// password is never printed, bad values exit 2, a node serves on a fresh database.
@Suite("tabsync-server with a PostgreSQL store", .serialized)
struct SharedStoreExecutableTests {
    typealias Child = ServerExecutableTests.Child

    static func output(_ child: Child) -> String {
        String(decoding: child.stdout.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            + String(decoding: child.stderr.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    }

    @Test(arguments: [
        (["migrate", "--store", "mysql://u:secret@db/x"], [String: String]()),
        (["migrate"], ["TABSYNC_STORE": "http://u:secret@db/x"]),
        (["--memory", "--store", "postgres://u:secret@db/x"], [:]),
        (["--data-dir", "/nonexistent"], ["TABSYNC_STORE": "user=u password=secret host=db"]),
        (["--store-poll-interval", "soon", "--memory"], [:]),
    ])
    func aBadStoreSettingExits2NamingItWithoutThePassword(arguments: [String], environment: [String: String]) throws {
        let child = try Child(arguments: arguments, environment: environment)
        let status = child.waitForExit(timeout: 10)
        child.kill()
        let log = Self.output(child)
        #expect(status == 2, "\(arguments) \(environment): \(log)")
        #expect(!log.contains("secret"), "the password was printed: \(log)")
        let named = environment.isEmpty ? arguments.first { $0.hasPrefix("--") && $0 != "--memory" && $0 != "--data-dir" }! : "TABSYNC_STORE"
        #expect(log.contains(named) || (arguments == ["migrate"] && log.contains("TABSYNC_STORE")), "\(named) not named: \(log)")
    }

    @Test func helpShowsTheStoreFlagsAndTheMigrateCommand() throws {
        let child = try Child(arguments: ["--help"])
        #expect(child.waitForExit(timeout: 10) == 0)
        let help = Self.output(child).split(whereSeparator: \.isWhitespace).joined(separator: " ")
        for expected in ["--store", "TABSYNC_STORE", "--store-poll-interval", "TABSYNC_STORE_POLL_INTERVAL", "(default: 1.5s)", "tabsync-server migrate"] {
            #expect(help.contains(expected), "help lacks \(expected)")
        }
    }

    @Test func migrateWithoutAStoreExits2() throws {
        let child = try Child(arguments: ["migrate"], environment: ["TABSYNC_STORE": ""])
        #expect(child.waitForExit(timeout: 10) == 2)
        #expect(Self.output(child).contains("--store"))
    }

    @Test func anUnreachableStoreEndsTheStartWithoutPrintingThePassword() throws {
        let child = try Child(arguments: ["--port", "0", "--store", "postgres://u:secret@127.0.0.1:1/x?connect_timeout=2"])
        let status = child.waitForExit(timeout: 15)
        child.kill()
        let log = Self.output(child)
        #expect(status == 1, "\(log)")
        #expect(log.contains("PostgreSQL"))
        #expect(!log.contains("secret"))
    }

    /// A database of the test's own on the shared cluster (dropped at the end).
    final class Database {
        let name = "tabsync_exe_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "").prefix(16)
        let clusterURL: String
        /// The cluster's URL with this database in place of its last path component.
        var url: String { String(clusterURL[...clusterURL.lastIndex(of: "/")!]) + name }

        init() throws {
            clusterURL = try PostgresTestCluster.requireURL()
            let db = try PGConnection(url: clusterURL)
            defer { db.close() }
            try db.execute("CREATE DATABASE " + PGConnection.quoteIdentifier(name))
        }

        func tables() throws -> [String] {
            let db = try PGConnection(url: url)
            defer { db.close() }
            let rows = try db.execute("SELECT tablename FROM pg_tables WHERE tablename LIKE 'tabsync%' ORDER BY 1")
            return (0..<rows.rowCount).map { rows.text($0, 0) }
        }

        deinit {
            if let db = try? PGConnection(url: clusterURL) {
                _ = try? db.execute("DROP DATABASE IF EXISTS " + PGConnection.quoteIdentifier(name) + " WITH (FORCE)")
                db.close()
            }
        }
    }

    @Test(.enabled(if: PostgresTestCluster.isEnabled, PostgresTestCluster.skipReason))
    func migrateCreatesTheSchemaAndRunsAgainAsANoOp() throws {
        let database = try Database()
        #expect(try database.tables().isEmpty)
        for _ in 1...2 {
            let child = try Child(arguments: ["migrate", "--store", database.url])
            let status = child.waitForExit(timeout: 30)
            child.kill()
            let log = Self.output(child)
            #expect(status == 0, "\(log)")
            #expect(log.contains("migrated postgres://postgres@127.0.0.1:"))
        }
        #expect(try database.tables().contains("tabsync_ops"))
        #expect(try database.tables().contains("tabsync_workspaces"))
    }

    @Test(.enabled(if: PostgresTestCluster.isEnabled, PostgresTestCluster.skipReason))
    func aNodeServesOnAPostgreSQLStoreGivenByTheEnvironmentAndStopsOnSIGTERM() throws {
        let database = try Database()
        let child = try Child(
            arguments: ["--port", "0"], environment: ["TABSYNC_STORE": database.url, "TABSYNC_STORE_POLL_INTERVAL": "500ms"])
        defer { child.kill() }
        let line = try child.waitForListening(timeout: 30)
        #expect(line.hasPrefix("listening on ws://127.0.0.1:"), "\(line)")
        #expect(try httpGet(port: child.port, path: "/healthz").status == 200)
        let (client, _) = try TestClient.joined(port: child.port, workspace: "exe", clientId: "c")
        try client.submit(.add(tab: .named("t1"), place: .end, activate: true))
        #expect(try client.nextApplied().version == 1)
        #expect(waitUntil(deadline: .seconds(10)) {
            ((try? httpGet(port: child.port, path: "/metrics").body) ?? "").contains("tabsync_store_listening 1")
        })
        child.process.terminate()
        #expect(child.waitForExit(timeout: 10) == 0)
        let log = String(decoding: child.stderr.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(log.contains("store: postgresql"))
        let store = try PostgresStore(url: database.url)
        defer { store.close() }
        #expect(try store.load(workspaceId: "exe")?.workspace.version == 1)
    }
}
