import TabsyncCore

extension Tabsync_V1_ErrorCode {
    /// The wire value of a core code. Every core code has one.
    init(_ code: ErrorCode) {
        switch code {
        case .invalidArgument: self = .invalidArgument
        case .tabExists: self = .tabExists
        case .tabGone: self = .tabGone
        case .locked: self = .locked
        case .notEditable: self = .notEditable
        case .limitExceeded: self = .limitExceeded
        case .rateLimited: self = .rateLimited
        case .unauthorized: self = .unauthorized
        case .notPermitted: self = .notPermitted
        case .unavailable: self = .unavailable
        case .protocolError: self = .protocolError
        case .answerGone: self = .answerGone
        }
    }
}

extension ErrorCode {
    /// The core code of a wire value; nil for `ERROR_CODE_UNSPECIFIED` and for numbers this
    /// version does not know (a newer server may send them: treat them as a refusal of unknown cause).
    public init?(_ code: Tabsync_V1_ErrorCode) {
        switch code {
        case .unspecified, .UNRECOGNIZED: return nil
        case .invalidArgument: self = .invalidArgument
        case .tabExists: self = .tabExists
        case .tabGone: self = .tabGone
        case .locked: self = .locked
        case .notEditable: self = .notEditable
        case .limitExceeded: self = .limitExceeded
        case .rateLimited: self = .rateLimited
        case .unauthorized: self = .unauthorized
        case .notPermitted: self = .notPermitted
        case .unavailable: self = .unavailable
        case .protocolError: self = .protocolError
        case .answerGone: self = .answerGone
        }
    }
}
