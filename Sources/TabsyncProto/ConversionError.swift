import TabsyncCore

/// Why a decoded proto message cannot become a core value.
///
/// These are well-formed protobuf messages that mean nothing (an `Op` with no kind set, an
/// `Activate` naming no tab). They reach the peer as a refusal with ``code``
/// (`INVALID_ARGUMENT`): inside a `Submit` as `Rejected{seq, INVALID_ARGUMENT, message}`,
/// in an `Applied` received from a server as a broken stream (the client resyncs).
/// Frames that are not protobuf at all are ``WireFormat/DecodingError`` instead.
public enum ConversionError: Error, Sendable, Equatable, CustomStringConvertible {
    /// An `Op` with none of its `kind` fields set (an absent `Submit.op` included).
    case opKindMissing
    /// An `Activate` with neither `tabId` nor `index` set.
    case activateTargetMissing

    /// The wire code this error is refused with.
    public var code: ErrorCode {
        switch self {
        case .opKindMissing, .activateTargetMissing: .invalidArgument
        }
    }

    /// A one-line explanation for people.
    public var message: String {
        switch self {
        case .opKindMissing: "op has no kind set (expected one of add, open, move, remove, activate, update, setEditable, replace)"
        case .activateTargetMissing: "activate has neither tabId nor index set"
        }
    }

    /// The same refusal as core's error, for code paths that answer every refusal alike.
    public var opError: OpError { .invalidArgument(message) }

    public var description: String { "\(code.wireName): \(message)" }
}
