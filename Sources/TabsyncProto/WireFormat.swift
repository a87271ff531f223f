import SwiftProtobuf

/// The two encodings of the tabsync protocol, chosen per connection by WebSocket subprotocol.
///
/// - ``json``: `tabsync.v1.json`, text frames, protobuf's canonical JSON mapping. Output is compact
///   (no whitespace), names are lowerCamelCase, enums are names, 64-bit integers are strings and
///   fields at their default value are left out. Input accepts 64-bit integers as strings or
///   numbers, and refuses unknown fields.
/// - ``proto``: `tabsync.v1.proto`, binary frames, protobuf binary. Unknown fields on input are
///   skipped (and dropped), as protobuf binary readers do.
///
/// One frame holds exactly one message. Bytes are `[UInt8]` both ways: a JSON frame's bytes are
/// its UTF-8 text.
///
/// Decoding checks only the encoding. A message with none of its fields set decodes fine; the
/// caller tells it by `message.message == nil` (the server answers `PROTOCOL_ERROR` and closes 4400).
public enum WireFormat: String, Sendable, CaseIterable, Hashable {
    case json = "tabsync.v1.json"
    case proto = "tabsync.v1.proto"

    /// The WebSocket subprotocol name: `tabsync.v1.json` or `tabsync.v1.proto`.
    public var subprotocol: String { rawValue }

    /// The format a subprotocol names; nil for any other name.
    public init?(subprotocol: String) {
        self.init(rawValue: subprotocol)
    }

    /// True when frames of this format are WebSocket text frames (JSON), false for binary frames.
    public var usesTextFrames: Bool {
        switch self {
        case .json: true
        case .proto: false
        }
    }

    /// A frame that is not a message of the expected type in this format. The server closes the
    /// connection with ``closeCode`` (1007); a client treats it as a broken connection.
    public struct DecodingError: Error, Sendable, Equatable, CustomStringConvertible {
        /// The format the frame was read as.
        public var format: WireFormat
        /// What swift-protobuf reported, for logs.
        public var reason: String

        public init(format: WireFormat, reason: String) {
            self.format = format
            self.reason = reason
        }

        /// The WebSocket close code for an undecodable frame: 1007 (invalid frame payload data).
        public var closeCode: UInt16 { 1007 }

        public var description: String { "undecodable \(format.subprotocol) frame: \(reason)" }
    }

    /// Reads one client message from a frame's bytes.
    /// - Throws: ``DecodingError`` when the bytes are not a `ClientMessage` in this format
    ///   (for JSON: not JSON, an unknown field, a wrong type, trailing data).
    public func decodeClientMessage(_ bytes: [UInt8]) throws(DecodingError) -> Tabsync_V1_ClientMessage {
        try decode(bytes)
    }

    /// Reads one server message from a frame's bytes.
    /// - Throws: ``DecodingError`` when the bytes are not a `ServerMessage` in this format.
    public func decodeServerMessage(_ bytes: [UInt8]) throws(DecodingError) -> Tabsync_V1_ServerMessage {
        try decode(bytes)
    }

    /// The frame bytes of one client message in this format.
    public func encode(_ message: Tabsync_V1_ClientMessage) -> [UInt8] {
        encodeMessage(message)
    }

    /// The frame bytes of one server message in this format. Encode once per broadcast: the same
    /// bytes serve every session of this format.
    public func encode(_ message: Tabsync_V1_ServerMessage) -> [UInt8] {
        encodeMessage(message)
    }

    private func decode<M: SwiftProtobuf.Message>(_ bytes: [UInt8]) throws(DecodingError) -> M {
        do {
            switch self {
            case .json:
                // Defaults: unknown fields are an error; int64 as string or number is accepted.
                return try M(jsonUTF8Bytes: bytes, options: JSONDecodingOptions())
            case .proto:
                var options = BinaryDecodingOptions()
                options.discardUnknownFields = true
                return try M(serializedBytes: bytes, options: options)
            }
        } catch {
            throw DecodingError(format: self, reason: String(describing: error))
        }
    }

    private func encodeMessage<M: SwiftProtobuf.Message>(_ message: M) -> [UInt8] {
        do {
            switch self {
            case .json:
                // Defaults: lowerCamelCase names, enum names, int64 as strings, no whitespace.
                return try message.jsonUTF8Bytes(options: JSONEncodingOptions())
            case .proto:
                return try message.serializedBytes()
            }
        } catch {
            // swift-protobuf fails to encode only for proto2 required fields, google.protobuf.Any,
            // well-known types out of range, non-finite floats, or messages over 2 GiB. The tabsync
            // schema has none of these, and messages are bounded far below 2 GiB, so this is a bug.
            preconditionFailure("tabsync message failed to encode as \(subprotocol): \(error)")
        }
    }
}
