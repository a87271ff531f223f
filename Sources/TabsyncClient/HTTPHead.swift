import Foundation

/// The head of an HTTP/1.1 answer, as ``ChangeFeed`` reads it: the status, whether the body is
/// chunked, its length and `Retry-After` (seconds, capped at 60).
struct HTTPHead {
    var status: Int
    var chunked: Bool
    var contentLength: Int?
    var retryAfter: Duration?

    /// Parses the head at the start of `bytes` once it is whole, and leaves only the body's bytes
    /// in `bytes`; nil (bytes untouched) while the head is not whole or is not HTTP.
    init?(parsing bytes: inout [UInt8]) {
        let crlf: [UInt8] = [13, 10, 13, 10]
        guard bytes.count >= 4, let end = (0...(bytes.count - 4)).first(where: { bytes[$0..<($0 + 4)].elementsEqual(crlf) })
        else { return nil }
        let lines = String(decoding: bytes[..<end], as: UTF8.self).components(separatedBy: "\r\n")
        let statusParts = lines[0].split(separator: " ")
        guard statusParts.count >= 2, statusParts[0].hasPrefix("HTTP/"), let status = Int(statusParts[1]) else { return nil }
        self.status = status
        chunked = false
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            let name = line[..<colon].lowercased()
            let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            switch name {
            case "transfer-encoding": chunked = value.lowercased().contains("chunked")
            case "content-length": contentLength = Int(value)
            case "retry-after": retryAfter = Int(value).map { .seconds(min(max($0, 0), 60)) }
            default: break
            }
        }
        bytes.removeFirst(end + 4)
    }
}
