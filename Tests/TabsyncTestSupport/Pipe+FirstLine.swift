import Foundation

#if canImport(Glibc)
import Glibc
#endif

extension Pipe {
    /// The first line a child process writes into this pipe, without its newline: how a test learns
    /// the address a server it started listens on (`listening on ws://127.0.0.1:PORT`).
    ///
    /// Time-boxed: returns what was read so far (possibly nothing) when the writer closes its end
    /// or `deadline` passes before a newline. Reads byte by byte, so nothing after the newline is
    /// consumed: the rest of the output is still in the pipe for the test to read.
    package func firstLine(within deadline: Duration = .seconds(10)) -> String {
        let fd = fileHandleForReading.fileDescriptor
        let clock = ContinuousClock()
        let end = clock.now + deadline
        var bytes: [UInt8] = []
        while true {
            let remaining = end - clock.now
            if remaining <= .zero { break }
            var ready = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&ready, 1, Int32(min(100, max(1, remaining.seconds * 1000)))) > 0 else { continue }
            var byte: UInt8 = 0
            guard read(fd, &byte, 1) == 1, byte != UInt8(ascii: "\n") else { break }
            bytes.append(byte)
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
