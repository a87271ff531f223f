/// Why a bench could not run. Each case says what to fix; `exitCode` is what `tabsync bench` exits with.
public enum BenchError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A flag is unknown, missing its value, or has a value out of range (the message names it).
    case invalidArgument(String)
    /// The libwebsockets client context could not be created.
    case cannotStart(String)
    /// A report file could not be written.
    case cannotWrite(path: String, reason: String)

    public var description: String {
        switch self {
        case .invalidArgument(let message): message
        case .cannotStart(let message): "cannot start the load generator: \(message)"
        case .cannotWrite(let path, let reason): "cannot write \(path): \(reason)"
        }
    }

    /// 2 for bad arguments (as a usage error), 1 otherwise.
    public var exitCode: Int32 {
        switch self {
        case .invalidArgument: 2
        case .cannotStart, .cannotWrite: 1
        }
    }
}
