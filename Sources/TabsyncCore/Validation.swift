/// The field rules of docs/design.md, 'The model', as pure checks. Each throwing check names the
/// field in its message.
///
/// A "char" is a Unicode scalar; url is counted in UTF-8 bytes. Text must hold no control characters
/// (U+0000–U+001F, U+007F–U+009F) — which also refuses every terminal escape sequence, since they
/// start with ESC (U+001B) or CSI (U+009B).
public enum Validation {
    public static let maxIdLength = 64
    public static let maxTitleLength = 256
    public static let maxURLBytes = 4096
    public static let maxIconLength = 32
    public static let maxBadgeLength = 16
    public static let maxClientNameLength = 64

    /// A tab id or client id: 1–64 chars of `[A-Za-z0-9._:-]`.
    public static func isValidTabId(_ s: String) -> Bool {
        isValidIdentifier(s, allowColon: true)
    }

    /// A workspace id: 1–64 chars of `[A-Za-z0-9._-]`.
    public static func isValidWorkspaceId(_ s: String) -> Bool {
        isValidIdentifier(s, allowColon: false)
    }

    /// A client id follows the tab id rule.
    public static func isValidClientId(_ s: String) -> Bool {
        isValidTabId(s)
    }

    static func isValidIdentifier(_ s: String, allowColon: Bool) -> Bool {
        let bytes = s.utf8
        guard !bytes.isEmpty, bytes.count <= maxIdLength else { return false }
        return bytes.allSatisfy { c in
            switch c {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-"):
                true
            case UInt8(ascii: ":"): allowColon
            default: false
            }
        }
    }

    /// Whether `scalar` is a C0 or C1 control character or DEL.
    public static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value <= 0x1F || (0x7F...0x9F).contains(scalar.value)
    }

    /// Whether `s` holds no control characters.
    public static func isCleanText(_ s: String) -> Bool {
        !s.unicodeScalars.contains(where: isControl)
    }

    /// Checks one text field: no control characters, at most `maxScalars` chars (or `maxBytes` bytes).
    public static func checkText(_ s: String, field: String, maxScalars: Int? = nil, maxBytes: Int? = nil) throws(OpError) {
        if let maxScalars, s.unicodeScalars.count > maxScalars {
            throw .invalidArgument("\(field) is longer than \(maxScalars) characters")
        }
        if let maxBytes, s.utf8.count > maxBytes {
            throw .invalidArgument("\(field) is longer than \(maxBytes) bytes")
        }
        if !isCleanText(s) {
            throw .invalidArgument("\(field) contains control characters")
        }
    }

    /// Checks a tab id.
    public static func checkTabId(_ id: String, field: String = "tab id") throws(OpError) {
        guard isValidTabId(id) else {
            throw .invalidArgument("\(field) must be 1-64 characters of A-Z a-z 0-9 . _ : -")
        }
    }

    /// Checks every field of a tab (its key is not checked: add, open and replace ignore it).
    public static func checkTab(_ tab: Tab) throws(OpError) {
        try checkTabId(tab.id)
        try checkText(tab.title, field: "title", maxScalars: maxTitleLength)
        try checkText(tab.url, field: "url", maxBytes: maxURLBytes)
        try checkText(tab.icon, field: "icon", maxScalars: maxIconLength)
        try checkText(tab.badge, field: "badge", maxScalars: maxBadgeLength)
        if !tab.group.isEmpty { try checkTabId(tab.group, field: "group id") }
    }

    /// Checks a group's fields: id as a tab id, title ≤ 256 chars, colour one of the nine.
    public static func checkGroup(_ group: TabGroup) throws(OpError) {
        try checkTabId(group.id, field: "group id")
        try checkGroupFields(title: group.title, color: group.color)
    }

    /// Checks a group's title and colour where present.
    public static func checkGroupFields(title: String?, color: String?) throws(OpError) {
        if let title { try checkText(title, field: "group title", maxScalars: maxTitleLength) }
        if let color, !TabGroup.colors.contains(color) {
            throw .invalidArgument(
                "group color \(color.debugDescription) is not one of \(TabGroup.colors.joined(separator: " "))")
        }
    }

    /// Checks a submitted position key: well-formed and at most 128 bytes.
    public static func checkKey(_ key: String) throws(OpError) {
        if key.utf8.count > PositionKey.maxSubmittedLength {
            throw .invalidArgument("key is longer than \(PositionKey.maxSubmittedLength) bytes")
        }
        if !PositionKey.isValid(key) {
            throw .invalidArgument("key \(key.debugDescription) is not a fractional-indexing position key")
        }
    }

    /// Checks a place (a key place's key; `.end` and `.index` are always well-formed).
    public static func checkPlace(_ place: Place) throws(OpError) {
        if case .key(let key) = place, !key.isEmpty { try checkKey(key) }
    }
}
