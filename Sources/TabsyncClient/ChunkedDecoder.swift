/// An incremental decoder of an HTTP/1.1 `Transfer-Encoding: chunked` body (RFC 9112 §7.1), fed
/// the bytes after the head in pieces of any size: what a proxy in front of the server (nginx)
/// may turn a streamed answer into.
///
/// Guarantees: returns the body's bytes in order, none of the framing; chunk extensions and
/// trailers are skipped; the last (zero) chunk sets ``finished``; a size line that is not
/// hexadecimal, or longer than 64 bytes, throws (the stream cannot be trusted past it).
struct ChunkedDecoder {
    struct Malformed: Error, CustomStringConvertible {
        var description: String { "a chunked body that is not well formed" }
    }

    private enum State {
        case size, data(remaining: Int), dataEnd, trailer, done
    }

    private var state = State.size
    private var line: [UInt8] = []
    private(set) var finished = false

    mutating func feed(_ bytes: some Collection<UInt8>) throws(Malformed) -> [UInt8] {
        var out: [UInt8] = []
        var index = bytes.startIndex
        while index != bytes.endIndex {
            switch state {
            case .data(let remaining):
                let end = bytes.index(index, offsetBy: remaining, limitedBy: bytes.endIndex) ?? bytes.endIndex
                out += bytes[index..<end]
                let left = remaining - bytes.distance(from: index, to: end)
                index = end
                state = left == 0 ? .dataEnd : .data(remaining: left)
            case .done:
                return out
            case .size, .dataEnd, .trailer:
                let byte = bytes[index]
                index = bytes.index(after: index)
                guard byte == 0x0A else {
                    line.append(byte)
                    if line.count > 64 { throw Malformed() }
                    continue
                }
                if line.last == 0x0D { line.removeLast() }
                defer { line = [] }
                try endLine()
            }
        }
        return out
    }

    private mutating func endLine() throws(Malformed) {
        switch state {
        case .size:
            let digits = line.prefix { $0 != UInt8(ascii: ";") && $0 != UInt8(ascii: " ") }
            guard !digits.isEmpty, digits.count <= 15,
                  let size = Int(String(decoding: digits, as: UTF8.self), radix: 16)
            else { throw Malformed() }
            state = size == 0 ? .trailer : .data(remaining: size)
        case .dataEnd:
            guard line.isEmpty else { throw Malformed() }
            state = .size
        case .trailer:
            if line.isEmpty {
                state = .done
                finished = true
            }
        case .data, .done:
            break
        }
    }
}
