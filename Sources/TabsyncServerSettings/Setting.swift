import Foundation

/// One server setting, declared once: its flag, its environment variable, its default, its
/// documentation, and how a value is read and what range is accepted. `--help` (and so README's
/// configuration table), the environment reading and the resolution into ``ServerSettings`` all
/// come from this one declaration (docs/architecture.md, "Where things are decided").
///
/// Guarantees: the variable is `TABSYNC_` and the flag in capitals, dashes as underscores; the help
/// text is ``doc`` then `[env: VARIABLE]` and, for a setting with a default, `(default: VALUE)`
/// printed from the very value resolution falls back to; a value is used only when ``parse``
/// accepts it (see ``resolve(flag:environment:)`` for where it is read from).
public struct Setting<Value: Sendable>: Sendable {
    /// How the setting is given.
    public enum Form: Sendable {
        /// One value: `--port 7070`, `TABSYNC_PORT=7070`.
        case value
        /// A flag without a value (`--memory`); its variable says on or off (`TABSYNC_MEMORY=1`).
        case `switch`
        /// A repeatable flag, each value checked by `entry`; its variable holds the entries
        /// comma-separated.
        case list(entry: @Sendable (String) -> Bool)
    }

    /// The long flag without its dashes: `port`.
    public let flag: String
    /// What applies when neither the flag nor the variable is given.
    public let defaultValue: Value
    /// The default as `--help` shows it; nil: no `(default: …)` (no default, or one the doc explains).
    public let shownDefault: String?
    /// What the setting does, a sentence or more ending with a period.
    public let doc: String
    /// The value's name in `--help` (`<path>`); nil: the flag's.
    public let valueName: String?
    /// What a value must be, as a refusal says it: `an integer from 0 to 65535`.
    public let expected: String
    public let form: Form
    /// The value a text gives, nil when it is not acceptable.
    let parse: @Sendable (String) -> Value?
    /// A refused value as its error shows it (a URL without its password).
    let shown: @Sendable (String) -> String

    /// A setting with a default: `show` prints it for `--help`.
    init(
        _ flag: String, default defaultValue: Value, show: (Value) -> String = { "\($0)" }, doc: String,
        valueName: String? = nil, expected: String, parse: @escaping @Sendable (String) -> Value?
    ) {
        self.init(
            flag, defaultValue: defaultValue, shownDefault: show(defaultValue), doc: doc, valueName: valueName,
            expected: expected, form: .value, parse: parse)
    }

    /// A setting without a default: nil unless given. `shownDefault` is what `--help` says instead.
    init<Wrapped>(
        _ flag: String, shownDefault: String? = nil, doc: String, valueName: String? = nil, expected: String,
        shown: @escaping @Sendable (String) -> String = { $0 }, parse: @escaping @Sendable (String) -> Wrapped?
    ) where Value == Wrapped? {
        self.init(
            flag, defaultValue: nil, shownDefault: shownDefault, doc: doc, valueName: valueName, expected: expected,
            form: .value, shown: shown, parse: { parse($0).map { .some($0) } })
    }

    private init(
        _ flag: String, defaultValue: Value, shownDefault: String?, doc: String, valueName: String?, expected: String,
        form: Form, shown: @escaping @Sendable (String) -> String = { $0 }, parse: @escaping @Sendable (String) -> Value?
    ) {
        self.flag = flag
        self.defaultValue = defaultValue
        self.shownDefault = shownDefault
        self.doc = doc
        self.valueName = valueName
        self.expected = expected
        self.form = form
        self.parse = parse
        self.shown = shown
    }

    /// `--port`.
    public var option: String { "--" + flag }

    /// `TABSYNC_PORT`.
    public var variable: String {
        "TABSYNC_" + flag.uppercased().replacingOccurrences(of: "-", with: "_")
    }

    /// The variable as `--help` names it: `TABSYNC_MEMORY=1` for a switch, with `, comma-separated`
    /// for a list.
    public var variableNote: String {
        switch form {
        case .value: variable
        case .switch: variable + "=1"
        case .list: variable + ", comma-separated"
        }
    }

    /// The whole `--help` text: the doc, the variable, the default.
    public var help: String {
        "\(doc) [env: \(variableNote)]" + (shownDefault.map { " (default: \($0))" } ?? "")
    }

    /// One row of the table, whatever the value's type.
    public var row: SettingRow {
        SettingRow(option: option, variable: variable, variableNote: variableNote, shownDefault: shownDefault, help: help)
    }
}

extension Setting where Value == Bool {
    /// A switch: off unless its flag is given or its variable says on.
    init(switch flag: String, doc: String) {
        self.init(
            flag, defaultValue: false, shownDefault: nil, doc: doc, valueName: nil,
            expected: "1, true, yes, on or 0, false, no, off", form: .switch, parse: SettingValue.switchWord)
    }
}

extension Setting where Value == Duration {
    /// A duration (`<duration>` in `--help`, its default printed as `5m` or `1.5s`) in seconds or
    /// with a unit (``SettingValue/duration(_:)``) that `valid` accepts.
    init(
        duration flag: String, default defaultValue: Duration, doc: String, expected: String,
        valid: @escaping @Sendable (Duration) -> Bool = { _ in true }
    ) {
        self.init(
            flag, default: defaultValue, show: SettingValue.durationText, doc: doc, valueName: "duration",
            expected: expected) { SettingValue.duration($0).flatMap { valid($0) ? $0 : nil } }
    }
}

extension Setting where Value == [String] {
    /// A repeatable flag: empty unless given. A variable's entries are split at commas, blanks
    /// around them dropped and empty ones skipped; at least one is needed.
    init(list flag: String, doc: String, valueName: String, expected: String, entry: @escaping @Sendable (String) -> Bool) {
        self.init(
            flag, defaultValue: [], shownDefault: nil, doc: doc, valueName: valueName, expected: expected,
            form: .list(entry: entry)
        ) { text in
            let entries = text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            return !entries.isEmpty && entries.allSatisfy(entry) ? entries : nil
        }
    }
}

/// One setting as a row of the table (README's configuration table, the tests of `--help`),
/// whatever the type of its value.
public struct SettingRow: Sendable, Equatable {
    /// `--port`.
    public let option: String
    /// `TABSYNC_PORT`.
    public let variable: String
    /// The variable as `--help` names it (`TABSYNC_MEMORY=1`).
    public let variableNote: String
    /// `7070`; nil when `--help` states none.
    public let shownDefault: String?
    /// The whole `--help` text.
    public let help: String
}
