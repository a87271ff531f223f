/// Where a setting's value comes from: its flag when given, else its environment variable when
/// set and not empty, else its default. A value that does not parse is a ``SettingError`` naming
/// the flag or the variable, the value and ``Setting/expected``: never the default instead.
extension Setting {
    /// The value of a one-value setting; `flag` is the flag's text, nil when not given (the
    /// variable is then not read at all).
    public func resolve(flag: String?, environment: [String: String]) throws(SettingError) -> Value {
        if let flag {
            guard let value = parse(flag) else { throw SettingError(source: option, value: shown(flag), expected: expected) }
            return value
        }
        return try fromEnvironment(environment) ?? defaultValue
    }

    /// The variable's value, nil when it is unset or empty.
    func fromEnvironment(_ environment: [String: String]) throws(SettingError) -> Value? {
        guard let text = environment[variable], !text.isEmpty else { return nil }
        guard let value = parse(text) else { throw SettingError(source: variable, value: shown(text), expected: expected) }
        return value
    }
}

extension Setting where Value == Bool {
    /// A switch: on when its flag is given, else what its variable says, else off.
    public func resolve(flag: Bool, environment: [String: String]) throws(SettingError) -> Bool {
        if flag { return true }
        return try fromEnvironment(environment) ?? defaultValue
    }
}

extension Setting where Value == [String] {
    /// A repeatable flag: every value given, each checked (a bad one is named); else the
    /// variable's entries (a bad one names the whole variable); else empty.
    public func resolve(flag: [String], environment: [String: String]) throws(SettingError) -> [String] {
        guard !flag.isEmpty else { return try fromEnvironment(environment) ?? defaultValue }
        if case .list(let entry) = form, let bad = flag.first(where: { !entry($0) }) {
            throw SettingError(source: option, value: bad, expected: expected)
        }
        return flag
    }
}
