/// One key press, decoded from the bytes a terminal sends.
public enum Key: Sendable, Hashable {
    /// A printable character (UTF-8 decoded), including space.
    case char(Character)
    case up, down, left, right
    /// Shift+arrows, as xterm and tmux send them (`ESC [1;2C`).
    case shiftUp, shiftDown, shiftLeft, shiftRight
    case home, end, pageUp, pageDown, delete
    case enter, escape, backspace, tab
    /// Ctrl with a letter, e.g. `.ctrl("c")` for byte 0x03 (only seen when signals are off).
    case ctrl(Character)
    /// A complete escape sequence this decoder does not know; ignored by the bar.
    case unknown
}

/// Turns raw terminal input into ``Key``s. Pure and incremental: bytes may arrive split anywhere;
/// an incomplete escape sequence or UTF-8 character at the end of a chunk is kept for the next one.
///
/// One ambiguity is settled by convention: a lone ESC at the end of a chunk is the Escape key
/// (terminals send a whole sequence in one write, so a sequence is never split right after its ESC
/// in practice). ``flush()`` gives up on whatever is buffered.
struct KeyDecoder: Sendable {
    private var buffer: [UInt8] = []
    /// Longest escape sequence kept while waiting for its end; longer ones are dropped.
    private static let maxSequence = 32

    init() {}

    /// Decodes a chunk; returns the complete keys in order.
    mutating func feed(_ bytes: some Sequence<UInt8>) -> [Key] {
        buffer.append(contentsOf: bytes)
        var keys: [Key] = []
        var i = 0
        while i < buffer.count {
            switch decodeOne(at: i) {
            case .key(let key, let length):
                keys.append(key)
                i += length
            case .skip(let length):
                i += length
            case .incomplete:
                if buffer[i] == 0x1B && buffer.count - i == 1 {
                    keys.append(.escape)
                    i += 1
                } else if buffer.count - i > Self.maxSequence {
                    i += 1  // never completes: drop its first byte and go on
                } else {
                    buffer.removeFirst(i)
                    return keys
                }
            }
        }
        buffer.removeAll(keepingCapacity: true)
        return keys
    }

    /// Whatever is buffered, as keys: a pending ESC becomes Escape, the rest is dropped.
    mutating func flush() -> [Key] {
        defer { buffer.removeAll() }
        return buffer.first == 0x1B ? [.escape] : []
    }

    /// True when bytes are buffered waiting for the rest of a sequence.
    var hasPending: Bool { !buffer.isEmpty }

    private enum Step {
        case key(Key, length: Int)
        case skip(length: Int)
        case incomplete
    }

    private func decodeOne(at i: Int) -> Step {
        let b = buffer[i]
        switch b {
        case 0x1B: return decodeEscape(at: i)
        case 0x0D, 0x0A: return .key(.enter, length: 1)
        case 0x7F, 0x08: return .key(.backspace, length: 1)
        case 0x09: return .key(.tab, length: 1)
        case 0x01...0x1A: return .key(.ctrl(Character(Unicode.Scalar(b + 0x60))), length: 1)
        case 0x00, 0x1C...0x1F: return .skip(length: 1)
        case 0x20...0x7E: return .key(.char(Character(Unicode.Scalar(b))), length: 1)
        default: return decodeUTF8(at: i)
        }
    }

    private func decodeUTF8(at i: Int) -> Step {
        let b = buffer[i]
        let length: Int
        switch b {
        case 0xC2...0xDF: length = 2
        case 0xE0...0xEF: length = 3
        case 0xF0...0xF4: length = 4
        default: return .skip(length: 1)  // continuation byte or invalid lead
        }
        var end = i + 1
        while end < buffer.count && end < i + length {
            guard buffer[end] & 0xC0 == 0x80 else { return .skip(length: end - i) }
            end += 1
        }
        if end < i + length { return .incomplete }
        var iterator = buffer[i..<end].makeIterator()
        var utf8 = UTF8()
        guard case .scalarValue(let scalar) = utf8.decode(&iterator),
              TerminalText.isClean(String(Character(scalar)))
        else { return .skip(length: length) }
        return .key(.char(Character(scalar)), length: length)
    }

    private func decodeEscape(at i: Int) -> Step {
        guard i + 1 < buffer.count else { return .incomplete }
        let next = buffer[i + 1]
        switch next {
        case UInt8(ascii: "["):
            return decodeCSI(at: i)
        case UInt8(ascii: "O"):
            guard i + 2 < buffer.count else { return .incomplete }
            let key: Key
            switch buffer[i + 2] {
            case UInt8(ascii: "A"): key = .up
            case UInt8(ascii: "B"): key = .down
            case UInt8(ascii: "C"): key = .right
            case UInt8(ascii: "D"): key = .left
            case UInt8(ascii: "H"): key = .home
            case UInt8(ascii: "F"): key = .end
            case UInt8(ascii: "M"): key = .enter
            default: key = .unknown
            }
            return .key(key, length: 3)
        default:
            // Alt+key or Escape typed just before another key: Escape, then that key on its own.
            return .key(.escape, length: 1)
        }
    }

    private func decodeCSI(at i: Int) -> Step {
        // ESC [ parameters (0x30–0x3F)* intermediates (0x20–0x2F)* final (0x40–0x7E)
        var j = i + 2
        var params: [UInt8] = []
        while j < buffer.count, (0x30...0x3F).contains(buffer[j]) {
            params.append(buffer[j])
            j += 1
        }
        while j < buffer.count, (0x20...0x2F).contains(buffer[j]) { j += 1 }
        guard j < buffer.count else { return .incomplete }
        let final = buffer[j]
        let length = j - i + 1
        guard (0x40...0x7E).contains(final) else { return .skip(length: length - 1) }
        let fields = String(decoding: params, as: UTF8.self).split(separator: ";", omittingEmptySubsequences: false)
        let first = fields.first.flatMap { Int($0) }
        let modifier = fields.count > 1 ? Int(fields[1]) ?? 1 : 1
        let shifted = modifier == 2
        switch final {
        case UInt8(ascii: "A"): return .key(shifted ? .shiftUp : .up, length: length)
        case UInt8(ascii: "B"): return .key(shifted ? .shiftDown : .down, length: length)
        case UInt8(ascii: "C"): return .key(shifted ? .shiftRight : .right, length: length)
        case UInt8(ascii: "D"): return .key(shifted ? .shiftLeft : .left, length: length)
        case UInt8(ascii: "H"): return .key(.home, length: length)
        case UInt8(ascii: "F"): return .key(.end, length: length)
        case UInt8(ascii: "~"):
            switch first {
            case 1, 7: return .key(.home, length: length)
            case 4, 8: return .key(.end, length: length)
            case 3: return .key(.delete, length: length)
            case 5: return .key(.pageUp, length: length)
            case 6: return .key(.pageDown, length: length)
            default: return .key(.unknown, length: length)
            }
        default:
            return .key(.unknown, length: length)
        }
    }
}
