import Foundation
import TabsyncCore
@testable import TabsyncStore
import TabsyncTestSupport

/// A copy of the store file `Fixtures/<name>` (made by an earlier release) in `directory`: its path.
func fixtureCopy(_ name: String, in directory: TemporaryDirectory) throws -> String {
    let fixture = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures/" + name).path
    let path = directory.path + "/tabsync.sqlite3"
    try FileManager.default.copyItem(atPath: fixture, toPath: path)
    return path
}

/// Drives real `Sequencer`s like the server does and collects what a group commit stores.
struct Driver {
    var limits: Limits
    let epoch: String
    var sequencers: [String: Sequencer] = [:]
    var records: [CommitRecord] = []

    init(epoch: String, limits: Limits = Limits()) {
        self.epoch = epoch
        self.limits = limits
    }

    /// Starts from what a store holds (after a restart).
    init(store: any WorkspaceStore, workspaces: [String], limits: Limits = Limits()) throws {
        self.init(epoch: store.epoch, limits: limits)
        for id in workspaces { sequencers[id] = try store.loadSequencer(workspaceId: id, limits: limits) }
    }

    func sequencer(_ id: String) -> Sequencer {
        sequencers[id] ?? Sequencer(workspace: Workspace(id: id, epoch: epoch), limits: limits)
    }

    @discardableResult
    mutating func submit(
        _ workspaceId: String, _ clientId: String, _ seq: UInt64, _ op: TabsyncCore.Operation, baseVersion: UInt64 = 0
    ) -> Sequencer.Outcome {
        if sequencers[workspaceId] == nil { sequencers[workspaceId] = sequencer(workspaceId) }
        // Mutated in place: a copy would duplicate the whole log on every submit.
        let outcome = sequencers[workspaceId]!.submit(clientId: clientId, seq: seq, baseVersion: baseVersion, op: op)
        if let record = CommitRecord(
            workspaceId: workspaceId, clientId: clientId, seq: seq, outcome: outcome, after: sequencers[workspaceId]!) {
            records.append(record)
        }
        return outcome
    }

    /// The pending records and the touched workspaces as a batch; clears the pending records.
    mutating func takeBatch() -> CommitBatch {
        var workspaces: [String: Workspace] = [:]
        for record in records { workspaces[record.workspaceId] = sequencer(record.workspaceId).workspace }
        defer { records = [] }
        return CommitBatch(records: records, workspaces: workspaces, logRetention: limits.logRetention)
    }

    /// Submits a mixed run of `count` ops (adds, moves, updates, activates, removes, editable
    /// toggles and some refusals) from two clients, seqs continuing from the sequencer's.
    mutating func mixedOps(_ workspaceId: String, count: Int, seed: UInt64) {
        var rng = SplitMix64(seed: seed)
        for _ in 0..<count {
            let clientId = rng.next() % 2 == 0 ? "alice" : "bob"
            let seq = sequencer(workspaceId).lastSeq(of: clientId) + 1
            let tabs = sequencer(workspaceId).workspace.tabs
            let pick = tabs.isEmpty ? nil : tabs[Int(rng.next() % UInt64(tabs.count))].id
            let op: TabsyncCore.Operation
            switch (rng.next() % 10, pick) {
            case (0...2, _), (_, nil):
                let n = rng.next() % 1_000
                op = .add(tab: Tab(id: "t\(n)", title: "Tab \(n)", url: "https://example.com/\(n)"),
                          place: .index(UInt32(rng.next() % 5)), activate: rng.next() % 2 == 0)
            case (3, let id?): op = .move(tabId: id, place: .index(UInt32(rng.next() % 6)))
            case (4, let id?): op = .update(TabUpdate(tabId: id, title: "renamed \(rng.next() % 100)", badge: "\(rng.next() % 9)"))
            case (5, let id?): op = .activate(.tabId(id))
            case (6, let id?): op = tabs.count > 3 ? .remove(tabId: id) : .activate(.index(0))
            case (7, _): op = .setEditable(rng.next() % 3 != 0)
            case (8, _): op = .remove(tabId: "missing")  // refused TAB_GONE: consumes the seq
            default: op = .update(TabUpdate(tabId: pick!, locked: rng.next() % 4 == 0))
            }
            submit(workspaceId, clientId, seq, op)
        }
    }
}

/// A small tmpfs mounted for one test (needs root; nil when mounting is not allowed here).
final class TmpfsMount {
    let path: String

    init?(sizeKilobytes: Int) {
        path = NSTemporaryDirectory() + "tabsync-tmpfs-" + UUID().uuidString
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        guard Self.run("/bin/mount", ["-t", "tmpfs", "-o", "size=\(sizeKilobytes)k", "tmpfs", path]) else {
            try? FileManager.default.removeItem(atPath: path)
            return nil
        }
    }

    /// Remounts read-only (fails while a file is open for writing) or read-write.
    func remount(readOnly: Bool) -> Bool {
        Self.run("/bin/mount", ["-o", readOnly ? "remount,ro" : "remount,rw", path])
    }

    deinit {
        _ = Self.run("/bin/umount", ["-l", path])  // lazy: never leaves a mount behind a failed test
        try? FileManager.default.removeItem(atPath: path)
    }

    static func run(_ tool: String, _ arguments: [String]) -> Bool {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: tool)
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        do { try process.run() } catch { return false }
        process.waitUntilExit()
        return process.terminationStatus == 0
    }
}
