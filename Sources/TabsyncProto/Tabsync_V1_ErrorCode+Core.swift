import TabsyncCore

// ``ErrorCode``'s raw values are the proto enum's numbers (a test checks every case both ways), so
// a conversion is a lookup by number.

extension Tabsync_V1_ErrorCode {
    /// The wire value of a core code. Every core code has one.
    init(_ code: ErrorCode) {
        self = Tabsync_V1_ErrorCode(rawValue: code.rawValue) ?? .UNRECOGNIZED(code.rawValue)
    }
}

extension ErrorCode {
    /// The core code of a wire value; nil for `ERROR_CODE_UNSPECIFIED` and for numbers this
    /// version does not know (a newer server may send them: treat them as a refusal of unknown cause).
    public init?(_ code: Tabsync_V1_ErrorCode) {
        self.init(rawValue: code.rawValue)
    }
}
