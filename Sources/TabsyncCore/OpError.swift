/// Why an operation was refused. Every case maps to exactly one wire ``ErrorCode``;
/// the message is for people and names the offending field or tab.
///
/// `apply` throws the first refusal in the precedence order of docs/design.md, 'Refusals and their
/// precedence' (`INVALID_ARGUMENT`, `TAB_GONE`, `NOT_EDITABLE`, `LOCKED`, `TAB_EXISTS`, `LIMIT_EXCEEDED`),
/// and a refused op leaves the workspace exactly as it was.
public enum OpError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A malformed id, text, key, place or index, a missing field, or a client-submitted rekey.
    case invalidArgument(String)
    /// The tab the op names does not exist (or was removed by an earlier op).
    case tabGone(String)
    /// The workspace is not editable and the op would change the list.
    case notEditable
    /// The op would move, remove or drop a locked tab.
    case locked(String)
    /// A tab with that id already exists.
    case tabExists(String)
    /// The op would take the workspace over a limit.
    case limitExceeded(String)
    /// The connection submitted ops faster than its limit (decided by the server, not by `apply`).
    case rateLimited(String)

    /// The wire code this refusal is sent as.
    public var code: ErrorCode {
        switch self {
        case .invalidArgument: .invalidArgument
        case .tabGone: .tabGone
        case .notEditable: .notEditable
        case .locked: .locked
        case .tabExists: .tabExists
        case .limitExceeded: .limitExceeded
        case .rateLimited: .rateLimited
        }
    }

    /// A one-line explanation for people.
    public var message: String {
        switch self {
        case .invalidArgument(let why): why
        case .tabGone(let id): "tab \(id) does not exist"
        case .notEditable: "the workspace is not editable"
        case .locked(let id): "tab \(id) is locked"
        case .tabExists(let id): "tab \(id) already exists"
        case .limitExceeded(let why): why
        case .rateLimited(let why): why
        }
    }

    public var description: String { "\(code.wireName): \(message)" }
}
