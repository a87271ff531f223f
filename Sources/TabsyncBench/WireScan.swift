/// Reads only what the load generator needs from a server message, without decoding it whole:
/// the kind of message and, for `Applied`, the submitter's client id and seq. Decoding every
/// `Applied` at each of 1,000 receivers would make the load generator the bottleneck.
///
/// Guarantees: `applied` is returned only for a well-formed `Applied` envelope, with the client id
/// and seq the generated decoder reads from it; anything the scan does not recognise is `.other`
/// (the caller decodes it fully and counts an `Applied` there the same way). The field numbers and
/// JSON names below are the .proto's: WireScanTests encodes every `ServerMessage` kind with the
/// generated code, in both encodings, and checks the scan against the generated decoder.
enum WireScan {
    enum Message: Equatable {
        /// An `Applied` with the submitter's client index (from the bench's ids `c<N>`) and seq;
        /// `client` is nil for server-made ops and for ids not made by the bench.
        case applied(client: Int?, seq: UInt64)
        case presence
        case other
    }

    // MARK: protobuf

    static func proto(_ bytes: UnsafeRawBufferPointer) -> Message {
        var reader = ProtoReader(bytes: bytes, position: 0, end: bytes.count)
        guard let (field, wire) = reader.tag(), wire == 2, let length = reader.varint(),
              reader.position + Int(length) == bytes.count
        else { return .other }
        switch field {
        case 2:
            var client: Int?
            var seq: UInt64 = 0
            while reader.position < reader.end {
                guard let (field, wire) = reader.tag() else { return .other }
                switch (field, wire) {
                case (3, 2):
                    guard let length = reader.varint(), let range = reader.take(Int(length)) else { return .other }
                    client = clientIndex(UnsafeRawBufferPointer(rebasing: bytes[range]))
                case (4, 0):
                    guard let value = reader.varint() else { return .other }
                    seq = value
                default:
                    guard reader.skip(wire: wire) else { return .other }
                }
            }
            return .applied(client: client, seq: seq)
        case 4:
            return .presence
        default:
            return .other
        }
    }

    struct ProtoReader {
        let bytes: UnsafeRawBufferPointer
        var position: Int
        let end: Int

        mutating func varint() -> UInt64? {
            var value: UInt64 = 0
            var shift: UInt64 = 0
            while position < end, shift < 64 {
                let byte = bytes[position]
                position += 1
                value |= UInt64(byte & 0x7F) << shift
                if byte & 0x80 == 0 { return value }
                shift += 7
            }
            return nil
        }

        mutating func tag() -> (Int, Int)? {
            guard let key = varint(), key >> 3 > 0 else { return nil }
            return (Int(key >> 3), Int(key & 7))
        }

        mutating func take(_ count: Int) -> Range<Int>? {
            guard count >= 0, position + count <= end else { return nil }
            defer { position += count }
            return position..<(position + count)
        }

        mutating func skip(wire: Int) -> Bool {
            switch wire {
            case 0: return varint() != nil
            case 1: return take(8) != nil
            case 2:
                guard let length = varint() else { return false }
                return take(Int(length)) != nil
            case 5: return take(4) != nil
            default: return false
            }
        }
    }

    // MARK: JSON

    private static let appliedPrefix = Array(#"{"applied":{"#.utf8)
    private static let presencePrefix = Array(#"{"presence":"#.utf8)
    private static let clientKey = Array(#""clientId":""#.utf8)
    private static let seqKey = Array(#""seq":""#.utf8)

    /// The server writes fields in field-number order, so `clientId` and `seq` follow the op:
    /// they are searched from the end, where no tab text can precede them.
    static func json(_ bytes: UnsafeRawBufferPointer) -> Message {
        if starts(bytes, with: presencePrefix) { return .presence }
        guard starts(bytes, with: appliedPrefix) else { return .other }
        var seq: UInt64 = 0
        var client: Int?
        if let at = lastIndex(of: seqKey, in: bytes) {
            var index = at + seqKey.count
            while index < bytes.count, bytes[index] >= 0x30, bytes[index] <= 0x39 {
                seq = seq &* 10 &+ UInt64(bytes[index] - 0x30)
                index += 1
            }
        }
        if let at = lastIndex(of: clientKey, in: bytes) {
            let start = at + clientKey.count
            var end = start
            while end < bytes.count, bytes[end] != 0x22 { end += 1 }
            client = clientIndex(UnsafeRawBufferPointer(rebasing: bytes[start..<end]))
        }
        return .applied(client: client, seq: seq)
    }

    private static func starts(_ bytes: UnsafeRawBufferPointer, with prefix: [UInt8]) -> Bool {
        guard bytes.count >= prefix.count else { return false }
        for index in prefix.indices where bytes[index] != prefix[index] { return false }
        return true
    }

    private static func lastIndex(of needle: [UInt8], in bytes: UnsafeRawBufferPointer) -> Int? {
        guard bytes.count >= needle.count else { return nil }
        var start = bytes.count - needle.count
        while start >= 0 {
            if bytes[start] == needle[0] {
                var match = true
                for offset in 1..<needle.count where bytes[start + offset] != needle[offset] {
                    match = false
                    break
                }
                if match { return start }
            }
            start -= 1
        }
        return nil
    }

    // MARK: ids and mirror messages

    /// `c<N>` → N.
    static func clientIndex(_ id: UnsafeRawBufferPointer) -> Int? {
        guard id.count >= 2, id.count <= 10, id[0] == 0x63 else { return nil }
        var value = 0
        for byte in id.dropFirst() {
            guard byte >= 0x30, byte <= 0x39 else { return nil }
            value = value * 10 + Int(byte - 0x30)
        }
        return value
    }

    /// A mirror message made by ``mirrorMessage(client:seq:size:)``: `m<client> <seq> ` then padding.
    static func mirror(_ bytes: UnsafeRawBufferPointer) -> Message {
        guard bytes.count >= 4, bytes[0] == 0x6D else { return .other }
        var index = 1
        var client = 0
        var seq: UInt64 = 0
        var digits = 0
        while index < bytes.count, bytes[index] >= 0x30, bytes[index] <= 0x39 {
            client = client * 10 + Int(bytes[index] - 0x30)
            index += 1
            digits += 1
        }
        guard digits > 0, index < bytes.count, bytes[index] == 0x20 else { return .other }
        index += 1
        digits = 0
        while index < bytes.count, bytes[index] >= 0x30, bytes[index] <= 0x39 {
            seq = seq &* 10 &+ UInt64(bytes[index] - 0x30)
            index += 1
            digits += 1
        }
        guard digits > 0 else { return .other }
        return .applied(client: client, seq: seq)
    }

    static func mirrorMessage(client: Int, seq: UInt64, size: Int) -> [UInt8] {
        var message = Array("m\(client) \(seq) ".utf8)
        if message.count < size { message.append(contentsOf: repeatElement(0x78, count: size - message.count)) }
        return message
    }
}
