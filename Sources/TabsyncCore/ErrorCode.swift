/// The wire codes of refusals and errors, mirroring `tabsync.v1.ErrorCode` one to one.
///
/// The raw values are the proto enum's numbers, so a conversion is a plain lookup.
/// The codes have no order here: which refusal wins when several apply is decided by the order of
/// the checks (docs/design.md, 'Refusals and their precedence').
public enum ErrorCode: Int, Sendable, CaseIterable, Hashable {
    case invalidArgument = 1
    case tabExists = 2
    case tabGone = 3
    case locked = 4
    case notEditable = 5
    case limitExceeded = 6
    case rateLimited = 7
    case unauthorized = 8
    case notPermitted = 9
    case unavailable = 10
    case protocolError = 11
    /// Only in `Rejected`, answering a seq sent again at or below `Welcome.lastSeq` whose answer
    /// the server no longer holds. Not a refusal: the seq was consumed long ago, and whatever it
    /// did is in the state the client was welcomed with (docs/design.md, 'Submit, seqs and dedup').
    case answerGone = 12

    /// The code's name on the wire (protobuf JSON uses it), e.g. `TAB_GONE`.
    public var wireName: String {
        switch self {
        case .invalidArgument: "INVALID_ARGUMENT"
        case .tabExists: "TAB_EXISTS"
        case .tabGone: "TAB_GONE"
        case .locked: "LOCKED"
        case .notEditable: "NOT_EDITABLE"
        case .limitExceeded: "LIMIT_EXCEEDED"
        case .rateLimited: "RATE_LIMITED"
        case .unauthorized: "UNAUTHORIZED"
        case .notPermitted: "NOT_PERMITTED"
        case .unavailable: "UNAVAILABLE"
        case .protocolError: "PROTOCOL_ERROR"
        case .answerGone: "ANSWER_GONE"
        }
    }

    /// Looks a code up by its wire name.
    public init?(wireName: String) {
        guard let code = ErrorCode.allCases.first(where: { $0.wireName == wireName }) else { return nil }
        self = code
    }
}
