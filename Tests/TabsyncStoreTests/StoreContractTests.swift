import Testing
import TabsyncCore
@testable import TabsyncStore
import TabsyncTestSupport

/// The stores under the contract: every test here runs against each.
enum StoreKind: String, CaseIterable, CustomTestStringConvertible {
    case memory, sqlite, postgres
    var testDescription: String { rawValue }

    /// PostgreSQL only when a test cluster is configured or required (see ``PostgresTestCluster``).
    static var allCases: [StoreKind] { PostgresTestCluster.isEnabled ? [.memory, .sqlite, .postgres] : [.memory, .sqlite] }
}

/// One store and how to "restart" it: SQLite closes and reopens the file; the memory store is the
/// same instance (what a server restarted on it sees).
final class StoreHarness {
    let kind: StoreKind
    let directory = TemporaryDirectory()
    /// The PostgreSQL store's own schema (nil for the others).
    let schema: PostgresSchema?
    private(set) var store: any WorkspaceStore

    init(_ kind: StoreKind, options: SQLiteStore.Options = .init()) throws {
        self.kind = kind
        switch kind {
        case .memory:
            schema = nil
            store = MemoryStore()
        case .sqlite:
            schema = nil
            store = try SQLiteStore(dataDirectory: directory.path, options: options)
        case .postgres:
            let schema = try PostgresSchema()
            self.schema = schema
            var postgres = schema.options(snapshotInterval: options.snapshotInterval)
            postgres.loadWindow = options.loadWindow
            store = try PostgresStore(url: schema.url, options: postgres)
        }
    }

    func restart() throws {
        if let postgres = store as? PostgresStore {
            postgres.close()
            store = try PostgresStore(url: schema!.url, options: postgres.options)
        }
        guard let sqlite = store as? SQLiteStore else { return }
        sqlite.close()
        store = try SQLiteStore(dataDirectory: directory.path, options: sqlite.options)
    }

    /// Another writer on the same stored data (a second server node): the same memory store, a
    /// second SQLite connection to the file, a second PostgreSQL store on the schema.
    func secondWriter() throws -> any WorkspaceStore {
        switch store {
        case let sqlite as SQLiteStore: try SQLiteStore(path: sqlite.path, options: sqlite.options)
        case let postgres as PostgresStore: try PostgresStore(url: schema!.url, options: postgres.options)
        default: store
        }
    }
}

/// The store contract (WorkspaceStore's doc comment), run on the memory, the SQLite and the PostgreSQL store.
@Suite("Store contract")
struct StoreContractTests {
    @Test(arguments: StoreKind.allCases)
    func unknownWorkspaceLoadsNil(kind: StoreKind) throws {
        let harness = try StoreHarness(kind)
        #expect(try harness.store.load(workspaceId: "nothing") == nil)
        let sequencer = try harness.store.loadSequencer(workspaceId: "nothing", limits: Limits())
        #expect(sequencer.workspace == Workspace(id: "nothing", epoch: harness.store.epoch))
    }

    @Test(arguments: StoreKind.allCases)
    func committedBatchComesBackAfterRestart(kind: StoreKind) throws {
        let harness = try StoreHarness(kind)
        let epoch = harness.store.epoch
        var driver = Driver(epoch: epoch)
        driver.mixedOps("team", count: 60, seed: 1)
        driver.mixedOps("solo", count: 25, seed: 2)
        try harness.store.commit(driver.takeBatch())
        driver.mixedOps("team", count: 40, seed: 3)
        try harness.store.commit(driver.takeBatch())

        try harness.restart()
        #expect(harness.store.epoch == epoch)
        for id in ["team", "solo"] {
            let expected = driver.sequencer(id)
            #expect(expected.workspace.version > 10 && expected.lastSeqs.values.reduce(0, +) > expected.workspace.version)
            let stored = try #require(try harness.store.load(workspaceId: id))
            #expect(stored.workspace == expected.workspace)  // version, tabs with keys, active, editable, epoch
            #expect(stored.workspace.invariantViolations(limits: Limits()).isEmpty)
            #expect(stored.lastSeqs == expected.lastSeqs)
            #expect(stored.log == expected.log)
        }
    }

    @Test(arguments: StoreKind.allCases)
    func restoredSequencerDeduplicatesResubmissions(kind: StoreKind) throws {
        let harness = try StoreHarness(kind)
        var driver = Driver(epoch: harness.store.epoch)
        driver.submit("w", "c1", 1, .add(tab: Tab(id: "a", title: "A"), place: .end, activate: true))
        driver.submit("w", "c1", 2, .add(tab: Tab(id: "b", title: "B"), place: .end, activate: false))
        try harness.store.commit(driver.takeBatch())
        try harness.restart()

        var restored = try Driver(store: harness.store, workspaces: ["w"])
        #expect(restored.sequencer("w").workspace == driver.sequencer("w").workspace)
        #expect(restored.sequencer("w").lastSeq(of: "c1") == 2)
        // A resubmitted seq is answered again from the log, never applied twice.
        guard case .answeredAgain(.applied(let again)) = restored.submit("w", "c1", 2, .add(tab: Tab(id: "b"), place: .end, activate: false)) else {
            Issue.record("seq 2 was not answered again")
            return
        }
        #expect(again.version == 2)
        #expect(restored.sequencer("w").workspace.version == 2)
        // The next seq applies at the next version.
        guard case .applied(let ops) = restored.submit("w", "c1", 3, .remove(tabId: "a")) else {
            Issue.record("seq 3 was not applied")
            return
        }
        #expect(ops.map(\.version) == [3])
    }

    @Test(arguments: StoreKind.allCases)
    func refusedOpConsumesItsSeqWithoutCreatingTheWorkspace(kind: StoreKind) throws {
        let harness = try StoreHarness(kind)
        var driver = Driver(epoch: harness.store.epoch)
        driver.submit("w", "c1", 7, .remove(tabId: "ghost"))
        try harness.store.commit(driver.takeBatch())
        try harness.restart()
        let stored = try #require(try harness.store.load(workspaceId: "w"))
        #expect(stored.workspace.version == 0)
        #expect(stored.workspace.tabs.isEmpty)
        #expect(stored.lastSeqs == ["c1": 7])
        #expect(stored.log.isEmpty)
    }

    @Test(arguments: StoreKind.allCases)
    func logKeepsAtMostTheRetentionAndStillRestores(kind: StoreKind) throws {
        let harness = try StoreHarness(kind, options: .init(snapshotInterval: 7))
        var driver = Driver(epoch: harness.store.epoch, limits: Limits(logRetention: 20))
        for round in 0..<12 {
            driver.mixedOps("w", count: 9, seed: UInt64(round))
            try harness.store.commit(driver.takeBatch())
        }
        try harness.restart()
        let expected = driver.sequencer("w").workspace
        #expect(expected.version > 40)  // the log really was trimmed
        let stored = try #require(try harness.store.load(workspaceId: "w"))
        #expect(stored.workspace == expected)
        #expect(stored.log.count <= 20)
        #expect(stored.log.count >= 1)
        #expect(stored.log.last?.version == expected.version)
        #expect(zip(stored.log, stored.log.dropFirst()).allSatisfy { $0.version + 1 == $1.version })
    }

    @Test(arguments: StoreKind.allCases)
    func batchSpanningWorkspacesIsAllOrNothing(kind: StoreKind) throws {
        let harness = try StoreHarness(kind)
        var driver = Driver(epoch: harness.store.epoch)
        driver.submit("a", "c", 1, .add(tab: Tab(id: "x"), place: .end, activate: true))
        try harness.store.commit(driver.takeBatch())
        let before = try harness.store.load(workspaceId: "a")

        driver.submit("b", "c", 1, .add(tab: Tab(id: "y"), place: .end, activate: true))
        driver.submit("a", "c", 2, .add(tab: Tab(id: "z"), place: .end, activate: true))
        var batch = driver.takeBatch()
        switch kind {
        case .memory:
            (harness.store as! MemoryStore).failCommits(with: .writeFailed("injected"))
        case .sqlite, .postgres:
            // A record that cannot be stored after good ones: version 1 of "a" exists already.
            let duplicate = try #require(before?.log.first)
            batch.records.append(CommitRecord(workspaceId: "a", clientId: "c", seq: 3, outcome: .applied([duplicate])))
        }
        #expect(throws: StoreError.self) { try harness.store.commit(batch) }
        #expect(try harness.store.load(workspaceId: "a") == before)
        #expect(try harness.store.load(workspaceId: "b") == nil)
    }
}
