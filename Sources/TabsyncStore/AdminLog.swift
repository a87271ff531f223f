import Foundation
import TabsyncCore

/// One operator's command, as the admin log keeps it (docs/operating.md, "The admin API").
///
/// Revocations stay in force for as long as the log keeps them; kicks and deletes are acted on
/// once by each node, when it reads them.
public enum AdminCommand: Sendable, Equatable, Codable {
    /// Every token whose `jti` is this id is refused, and its sessions closed 4401.
    case revokeToken(jti: String)
    /// Every token of `sub` issued before `issuedBefore` (its `iat`; a token without `iat` counts
    /// as issued before) is refused, and its sessions closed 4401.
    case revokeSubject(sub: String, issuedBefore: Date)
    /// The session with this id (``AdminSessionID``) is closed 4408; it may reconnect.
    case kickSession(id: String)
    /// Every session of `sub` opened before the command, within `workspaces`, is closed 4408.
    case kickSubject(sub: String, workspaces: String)
    /// The workspace was deleted: its sessions are closed 4410 on every node and it leaves memory.
    case deleteWorkspace(id: String)

    /// True for the two revocations (kept in force; the rest are acted on once).
    public var isRevocation: Bool {
        switch self {
        case .revokeToken, .revokeSubject: true
        default: false
        }
    }
}

/// One entry of the admin log: its number (ascending in the order the store took them), when
/// the store took it, and the command.
public struct AdminEntry: Sendable, Equatable {
    public var number: Int64
    public var at: Date
    public var command: AdminCommand

    public init(number: Int64, at: Date, command: AdminCommand) {
        self.number = number
        self.at = at
        self.command = command
    }

    /// The command as the log stores it (JSON), and back.
    static func encode(_ command: AdminCommand) throws(StoreError) -> String {
        do {
            return String(decoding: try JSONEncoder.admin.encode(command), as: UTF8.self)
        } catch {
            throw .writeFailed("cannot encode an admin command: \(error)")
        }
    }

    static func decode(_ text: String, number: Int64, atMillis: Int64) throws(StoreError) -> AdminEntry {
        do {
            let command = try JSONDecoder.admin.decode(AdminCommand.self, from: Data(text.utf8))
            return AdminEntry(number: number, at: Date(timeIntervalSince1970: Double(atMillis) / 1000), command: command)
        } catch {
            throw .readFailed("admin log entry \(number) does not decode: \(error)")
        }
    }
}

extension JSONEncoder {
    static var admin: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .millisecondsSince1970
        encoder.outputFormatting = .sortedKeys
        return encoder
    }
}

extension JSONDecoder {
    static var admin: JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .millisecondsSince1970
        return decoder
    }
}

/// What the admin API's workspace list shows of one stored workspace.
public struct WorkspaceSummary: Sendable, Equatable {
    public var id: String
    public var version: UInt64
    public var tabs: Int
    public var epoch: String
    /// The nodes registered as holding it (a store without a holder registry: none).
    public var holders: [String]

    public init(id: String, version: UInt64, tabs: Int, epoch: String, holders: [String] = []) {
        self.id = id
        self.version = version
        self.tabs = tabs
        self.epoch = epoch
        self.holders = holders
    }
}

/// What a store keeps for operators: the admin log every node reads (revocations, kicks,
/// deletes), and the workspace list and delete of the admin API.
///
/// Guarantees asked of a conformer:
/// - ``appendAdminCommand(_:)`` is durable when it returns, and numbers entries in the order it
///   took them; ``adminEntries(after:)`` returns every entry after a number, in that order.
/// - ``deleteWorkspace(_:)`` leaves the workspace at version 0 under a new epoch (a tombstone of
///   one snapshot row, no op, no seq): a load then makes an empty workspace whose epoch differs
///   from the deleted one, so a client that held the deleted one takes a snapshot instead of
///   splicing two histories (docs/design.md, "Epochs"). Called on the store executor, after every
///   batch the server sent before it.
public protocol AdminStore: WorkspaceStore {
    /// Workspace ids with at least one applied op, ascending, after `after` (nil: from the first),
    /// at most `limit`.
    func workspaceIds(after: String?, limit: Int) throws(StoreError) -> [String]
    /// Deletes a workspace (see the guarantees); false when it had no applied op.
    func deleteWorkspace(_ id: String) throws(StoreError) -> Bool
    /// Appends a command to the admin log and returns its entry.
    func appendAdminCommand(_ command: AdminCommand) throws(StoreError) -> AdminEntry
    /// The entries after `number`, oldest first.
    func adminEntries(after number: Int64) throws(StoreError) -> [AdminEntry]
    /// The nodes holding each of these workspaces (default: none known).
    func holders(of workspaceIds: [String]) throws(StoreError) -> [String: [String]]
}

extension AdminStore {
    public func holders(of workspaceIds: [String]) throws(StoreError) -> [String: [String]] { [:] }

    /// Summaries of the workspaces after `after`, at most `limit`: each one read back to count
    /// its tabs (an admin call, not a hot path).
    public func workspaceSummaries(after: String?, limit: Int) throws(StoreError) -> [WorkspaceSummary] {
        let ids = try workspaceIds(after: after, limit: limit)
        let holders = try holders(of: ids)
        var summaries: [WorkspaceSummary] = []
        for id in ids {
            guard let stored = try load(workspaceId: id), stored.workspace.version > 0 else { continue }
            summaries.append(WorkspaceSummary(
                id: id, version: stored.workspace.version, tabs: stored.workspace.tabs.count,
                epoch: stored.workspace.epoch, holders: holders[id] ?? []))
        }
        return summaries
    }
}
