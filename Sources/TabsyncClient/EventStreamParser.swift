/// One dispatched Server-Sent Event: its type (`message` when the stream named none), its data
/// (the `data:` lines joined by `\n`) and the last event id in force when it was dispatched.
public struct ServerSentEvent: Sendable, Equatable {
    public var event: String
    public var data: String
    /// The stream's last event id at dispatch (`id:` persists across events, as in a browser's
    /// `EventSource`); nil when no `id:` was seen yet.
    public var id: String?

    public init(event: String = "message", data: String, id: String? = nil) {
        self.event = event
        self.data = data
        self.id = id
    }
}

/// An incremental `text/event-stream` parser following the HTML standard's "Parsing an event
/// stream" (the rules every `EventSource` applies), fed bytes as they arrive in pieces of any size.
///
/// Guarantees: lines end at CRLF, LF or CR, even when a CRLF is split between two pieces; a leading
/// UTF-8 BOM is dropped; a line starting with `:` is a comment (counted in ``comments``, never an
/// event); `field: value` drops one space after the colon, a line without a colon is a field with
/// an empty value; several `data:` lines are joined with `\n`; `id:` sets the last event id unless
/// its value holds NUL, and it stays set for later events; `retry:` of ASCII digits only sets
/// ``retry`` (other values are ignored); unknown fields are ignored; an event is dispatched at a
/// blank line only when it has data; bytes after the last blank line are never dispatched: a cut
/// stream's half-written event is dropped by ``reset()``, never half-delivered.
public struct EventStreamParser: Sendable {
    /// The last event id (`id:`), kept across events and connections.
    public private(set) var lastEventId: String?
    /// The reconnection time the server asked for (`retry:` in milliseconds).
    public private(set) var retry: Duration?
    /// Comment lines seen (keep-alives).
    public private(set) var comments = 0

    private var line: [UInt8] = []
    private var afterCR = false
    private var atStreamStart = true
    private var data = ""
    private var hasData = false
    private var eventType = ""

    public init(lastEventId: String? = nil) {
        self.lastEventId = lastEventId
    }

    /// Parses `bytes` (the next piece of the stream) and returns the events it completes, in order.
    public mutating func feed(_ bytes: some Sequence<UInt8>) -> [ServerSentEvent] {
        var events: [ServerSentEvent] = []
        for byte in bytes {
            if afterCR {
                afterCR = false
                if byte == 0x0A { continue }  // the LF of a CRLF
            }
            switch byte {
            case 0x0D:
                afterCR = true
                endLine(into: &events)
            case 0x0A:
                endLine(into: &events)
            default:
                line.append(byte)
                if atStreamStart, line == [0xEF, 0xBB, 0xBF] { line = []; atStreamStart = false }
                if line.count >= 3 { atStreamStart = false }
            }
        }
        return events
    }

    /// The stream ended (or was cut): what was not dispatched is dropped; ``lastEventId`` and
    /// ``retry`` stay, a new stream may start with a BOM again.
    public mutating func reset() {
        line = []
        afterCR = false
        atStreamStart = true
        data = ""
        hasData = false
        eventType = ""
    }

    private mutating func endLine(into events: inout [ServerSentEvent]) {
        atStreamStart = false
        defer { line = [] }
        guard !line.isEmpty else { return dispatch(into: &events) }
        if line[0] == UInt8(ascii: ":") {
            comments += 1
            return
        }
        let name: String
        var value: ArraySlice<UInt8> = []
        if let colon = line.firstIndex(of: UInt8(ascii: ":")) {
            name = String(decoding: line[..<colon], as: UTF8.self)
            value = line[(colon + 1)...]
            if value.first == UInt8(ascii: " ") { value = value.dropFirst() }
        } else {
            name = String(decoding: line, as: UTF8.self)
        }
        switch name {
        case "event":
            eventType = String(decoding: value, as: UTF8.self)
        case "data":
            if hasData { data += "\n" }
            data += String(decoding: value, as: UTF8.self)
            hasData = true
        case "id":
            if !value.contains(0) { lastEventId = String(decoding: value, as: UTF8.self) }
        case "retry":
            if !value.isEmpty, value.allSatisfy({ (0x30...0x39).contains($0) }),
               let milliseconds = Int64(String(decoding: value, as: UTF8.self))
            {
                retry = .milliseconds(milliseconds)
            }
        default:
            break
        }
    }

    private mutating func dispatch(into events: inout [ServerSentEvent]) {
        defer {
            data = ""
            hasData = false
            eventType = ""
        }
        guard hasData else { return }
        events.append(ServerSentEvent(event: eventType.isEmpty ? "message" : eventType, data: data, id: lastEventId))
    }
}
