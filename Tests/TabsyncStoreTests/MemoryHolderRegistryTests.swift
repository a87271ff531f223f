import Testing
@testable import TabsyncStore

/// The holder registry in memory (``MemoryHolderTable``), on a clock the test moves: the rules of
/// PostgreSQL's registry (``PostgresHolderRegistryTests``), which the simulation relies on.
struct MemoryHolderRegistryTests {
    static func nodes(timeout: Duration = .seconds(10)) -> (MemoryHolderTable, MemoryHolderRegistry, MemoryHolderRegistry) {
        let table = MemoryHolderTable(timeout: timeout)
        return (table, table.node("a", heartbeatInterval: timeout / 4), table.node("b", heartbeatInterval: timeout / 4))
    }

    @Test func holdCountsTheOtherLiveHoldersAndReleaseOrLeaveEndsAHold() throws {
        let (table, a, b) = Self.nodes()
        #expect(try a.hold(workspaceId: "w") == 0)
        #expect(try b.hold(workspaceId: "w") == 1)  // split: A holds it too
        #expect(try a.hold(workspaceId: "w") == 1)  // holding again changes nothing
        #expect(table.liveHolders(of: "w") == ["a", "b"])
        try b.release(workspaceIds: ["w"])
        try b.release(workspaceIds: ["w"])  // releasing twice is harmless
        #expect(table.liveHolders(of: "w") == ["a"])
        #expect(try b.hold(workspaceId: "w") == 1)
        b.leave()
        #expect(table.liveHolders(of: "w") == ["a"])
        #expect(table.registrations(of: "b").isEmpty)
    }

    /// "Newer" is the later registration of a live node; holding again keeps a node's place.
    @Test func aNewerHolderIsALiveNodeThatRegisteredLater() throws {
        let (table, a, b) = Self.nodes(timeout: .seconds(1))
        _ = try a.hold(workspaceId: "w")
        #expect(try !a.hasNewerHolder(workspaceId: "w"))
        _ = try b.hold(workspaceId: "w")
        #expect(try a.hasNewerHolder(workspaceId: "w"))
        #expect(try !b.hasNewerHolder(workspaceId: "w"))
        _ = try a.hold(workspaceId: "w")  // registered again: still the older one
        #expect(try a.hasNewerHolder(workspaceId: "w"))
        // B falls silent past the timeout: it is no newer holder any more.
        table.advance(to: .milliseconds(1_001))
        try a.heartbeat()
        #expect(try !a.hasNewerHolder(workspaceId: "w"))
        // A node not registered has no newer holder.
        #expect(try !table.node("c", heartbeatInterval: .zero).hasNewerHolder(workspaceId: "w"))
    }

    /// A node that stops beating holds nothing after the timeout, and is pruned by another node's
    /// heartbeat once it has been silent three timeouts.
    @Test func aNodeWhoseHeartbeatStopsHoldsNothingAndIsPrunedLater() throws {
        let (table, a, b) = Self.nodes(timeout: .seconds(1))
        _ = try a.hold(workspaceId: "w")
        _ = try b.hold(workspaceId: "w")
        table.advance(to: .seconds(1))
        try a.heartbeat()
        #expect(table.liveHolders(of: "w") == ["a", "b"])  // exactly one timeout old: still live
        table.advance(to: .milliseconds(1_001))
        try a.heartbeat()
        #expect(table.liveHolders(of: "w") == ["a"])
        #expect(try a.hold(workspaceId: "w") == 0)  // B is not counted as a holder either
        #expect(table.isRegistered("b", for: "w"))  // ignored, not pruned yet
        table.advance(to: .milliseconds(3_001))
        try a.heartbeat()
        #expect(!table.isRegistered("b", for: "w"))
        #expect(table.isRegistered("a", for: "w"))  // a node that beats stays
        // B beats again: live, with no registration left.
        try b.heartbeat()
        #expect(table.isLive("b"))
        #expect(table.registrations(of: "b").isEmpty)
    }
}
