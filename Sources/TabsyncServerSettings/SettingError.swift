/// A flag or environment variable whose value the server cannot use. The message names where the
/// value came from (`--port` or `TABSYNC_PORT`), the value, and what is expected.
public struct SettingError: Error, CustomStringConvertible, Equatable {
    /// `--port` for a flag, `TABSYNC_PORT` for an environment variable.
    public let source: String
    /// The value as given (a store URL without what could be a password).
    public let value: String
    /// What would have been accepted.
    public let expected: String

    public var description: String {
        let shown = source.hasPrefix("--") ? "\(source) \"\(value)\"" : "\(source)=\"\(value)\""
        return "invalid \(shown): expected \(expected)"
    }
}
