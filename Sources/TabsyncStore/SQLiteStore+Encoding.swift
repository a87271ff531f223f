import SwiftProtobuf
import TabsyncCore
import TabsyncProto

/// How the SQLite store encodes rows: ops and snapshots as their protobuf wire form (one format on
/// the wire and on disk), refusals as their wire code and the text that identifies them.
enum StoreEncoding {
    /// An op as `tabsync.v1.Op` bytes.
    static func encode(_ op: Operation) throws(StoreError) -> [UInt8] {
        do {
            return try Tabsync_V1_Op(op).serializedBytes()
        } catch {
            throw .writeFailed("cannot encode op \(op): \(error)")
        }
    }

    /// An op from `tabsync.v1.Op` bytes.
    static func decodeOp(_ bytes: [UInt8], context: @autoclosure () -> String) throws(StoreError) -> Operation {
        let message: Tabsync_V1_Op
        do {
            message = try Tabsync_V1_Op(serializedBytes: bytes)
        } catch {
            throw .readFailed("\(context()): undecodable op: \(error)")
        }
        do {
            return try Operation(message)
        } catch {
            throw .readFailed("\(context()): \(error)")
        }
    }

    /// A workspace as `tabsync.v1.Snapshot` bytes.
    static func encode(_ workspace: Workspace) throws(StoreError) -> [UInt8] {
        do {
            return try Tabsync_V1_Snapshot(workspace).serializedBytes()
        } catch {
            throw .writeFailed("cannot encode snapshot of \(workspace.id): \(error)")
        }
    }

    /// A workspace from `tabsync.v1.Snapshot` bytes.
    static func decodeSnapshot(_ bytes: [UInt8], context: @autoclosure () -> String) throws(StoreError) -> Workspace {
        do {
            return Workspace(try Tabsync_V1_Snapshot(serializedBytes: bytes))
        } catch {
            throw .readFailed("\(context()): undecodable snapshot: \(error)")
        }
    }

    /// Position keys as one text: `\n`-separated (a valid key is base 62 digits only).
    static func encodeKeys(_ keys: [String]) -> String { keys.joined(separator: "\n") }

    /// The keys ``encodeKeys(_:)`` stored.
    static func decodeKeys(_ text: String) -> [String] {
        text.isEmpty ? [] : text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
    }

    /// A refusal as (wire code, the case's text: a tab id or a reason; "" for `notEditable`).
    static func encode(_ error: OpError) -> (code: Int64, detail: String) {
        switch error {
        case .invalidArgument(let why): (Int64(ErrorCode.invalidArgument.rawValue), why)
        case .tabGone(let id): (Int64(ErrorCode.tabGone.rawValue), id)
        case .notEditable: (Int64(ErrorCode.notEditable.rawValue), "")
        case .locked(let id): (Int64(ErrorCode.locked.rawValue), id)
        case .tabExists(let id): (Int64(ErrorCode.tabExists.rawValue), id)
        case .limitExceeded(let why): (Int64(ErrorCode.limitExceeded.rawValue), why)
        case .rateLimited(let why): (Int64(ErrorCode.rateLimited.rawValue), why)
        }
    }

    /// The refusal ``encode(_:)-(OpError)`` stored; nil for a code no refusal has.
    static func decodeError(code: Int64, detail: String) -> OpError? {
        switch ErrorCode(rawValue: Int(code)) {
        case .invalidArgument: .invalidArgument(detail)
        case .tabGone: .tabGone(detail)
        case .notEditable: .notEditable
        case .locked: .locked(detail)
        case .tabExists: .tabExists(detail)
        case .limitExceeded: .limitExceeded(detail)
        case .rateLimited: .rateLimited(detail)
        default: nil
        }
    }
}
