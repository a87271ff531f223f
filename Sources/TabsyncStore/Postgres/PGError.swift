/// Why a PostgreSQL call failed, as ``PGConnection`` reports it.
public enum PGError: Error, Sendable, Equatable, CustomStringConvertible {
    /// No connection could be made, or the one in use broke (server down or restarting, network
    /// gone, keepalive unanswered). A new connection may work later.
    case connection(String)
    /// The server refused a statement; `sqlState` is its SQLSTATE code (e.g. `23505`: unique violation).
    case statement(sqlState: String, message: String, context: String)
    /// A result did not have the shape the caller expected (column type, row count).
    case unexpectedResult(String)
    /// A store rule failed inside a transaction's body (a batch is behind, a stored row does not
    /// decode): the ``StoreError`` itself, carried out of the `PGError`-typed closure unchanged.
    case store(StoreError)

    /// True for errors after which the connection is unusable: it must be reopened.
    public var isConnectionLost: Bool {
        if case .connection = self { return true }
        return false
    }

    public var description: String {
        switch self {
        case .connection(let why): "PostgreSQL connection: \(why)"
        case .statement(let state, let message, let context): "PostgreSQL \(state) in \(context): \(message)"
        case .unexpectedResult(let why): "PostgreSQL result: \(why)"
        case .store(let error): error.description
        }
    }
}
