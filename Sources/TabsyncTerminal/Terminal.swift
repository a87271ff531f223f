#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Why the terminal could not be set up.
public enum TerminalError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Standard input or output is not a terminal (the bar needs one).
    case notATerminal
    /// A system call failed; `call` names it, `errno` says why.
    case system(call: String, errno: Int32)

    public var description: String {
        switch self {
        case .notATerminal: "standard input and output must be a terminal"
        case .system(let call, let code): "\(call) failed: \(String(cString: strerror(code)))"
        }
    }
}

/// The controlling terminal while the bar runs: raw mode, the alternate screen, hidden cursor and
/// no autowrap on ``enter()``; all of it undone by ``restore()``.
///
/// Guarantees: ``restore()`` is idempotent and safe to call on every exit path; it also runs at
/// process exit (`atexit`) if the program ends without calling it, so a `q`, a signal turned into a
/// loop exit, a lost connection or a thrown error all leave the terminal as it was found.
/// Thread rule: one thread (the bar's loop) uses a `Terminal`.
public final class Terminal {
    let input: Int32
    let output: Int32
    private var entered = false

    public init(input: Int32 = STDIN_FILENO, output: Int32 = STDOUT_FILENO) throws(TerminalError) {
        guard isatty(input) == 1, isatty(output) == 1 else { throw .notATerminal }
        self.input = input
        self.output = output
    }

    /// Switches to raw mode and the alternate screen.
    public func enter() throws(TerminalError) {
        guard !entered else { return }
        var saved = termios()
        guard tcgetattr(input, &saved) == 0 else { throw .system(call: "tcgetattr", errno: errno) }
        var raw = saved
        raw.c_iflag &= ~tcflag_t(BRKINT | ICRNL | INPCK | ISTRIP | IXON)
        raw.c_oflag &= ~tcflag_t(OPOST)
        raw.c_cflag |= tcflag_t(CS8)
        raw.c_lflag &= ~tcflag_t(ECHO | ICANON | IEXTEN | ISIG)
        withUnsafeMutableBytes(of: &raw.c_cc) { cc in
            cc[Int(VMIN)] = 1
            cc[Int(VTIME)] = 0
        }
        TerminalRestore.save(fd: input, termios: saved, output: output)
        guard tcsetattr(input, TCSAFLUSH, &raw) == 0 else { throw .system(call: "tcsetattr", errno: errno) }
        entered = true
        // Alternate screen, hidden cursor, autowrap off, attributes reset, screen cleared.
        write("\u{1B}[?1049h\u{1B}[?25l\u{1B}[?7l\u{1B}[0m\u{1B}[2J")
    }

    /// Leaves the alternate screen and puts back the saved terminal modes. Idempotent.
    public func restore() {
        TerminalRestore.run()
        entered = false
    }

    /// The window size in cells (rows, columns); (24, 80) when the terminal does not say.
    public func size() -> (rows: Int, cols: Int) {
        var ws = winsize()
        if ioctl(output, UInt(TIOCGWINSZ), &ws) == 0, ws.ws_row > 0, ws.ws_col > 0 {
            return (Int(ws.ws_row), Int(ws.ws_col))
        }
        return (24, 80)
    }

    /// Writes all of `text`, retrying on interrupts and partial writes.
    func write(_ text: String) {
        Self.writeAll(output, Array(text.utf8))
    }

    static func writeAll(_ fd: Int32, _ bytes: [UInt8]) {
        bytes.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let n = systemWrite(fd, buffer.baseAddress! + offset, buffer.count - offset)
                if n > 0 {
                    offset += n
                } else if n < 0 && (errno == EINTR || errno == EAGAIN) {
                    continue
                } else {
                    return
                }
            }
        }
    }
}

/// The saved terminal state, kept where an `atexit` handler can reach it.
enum TerminalRestore {
    private struct Saved {
        var fd: Int32
        var termios: termios
        var output: Int32
    }

    // nonisolated(unsafe): written by `save` on the bar's thread before raw mode is set, read and
    // cleared by `run` on that same thread or at process exit (`atexit`), when no other thread
    // touches the terminal.
    nonisolated(unsafe) private static var saved: Saved?
    nonisolated(unsafe) private static var registered = false

    static func save(fd: Int32, termios: termios, output: Int32) {
        saved = Saved(fd: fd, termios: termios, output: output)
        if !registered {
            registered = true
            atexit { TerminalRestore.run() }
        }
    }

    static func run() {
        guard var s = saved else { return }
        saved = nil
        Terminal.writeAll(s.output, Array("\u{1B}[0m\u{1B}[?7h\u{1B}[?25h\u{1B}[?1049l".utf8))
        _ = tcsetattr(s.fd, TCSAFLUSH, &s.termios)
    }
}

/// Turns signals into bytes on a pipe the loop polls (the self-pipe trick): the handler only calls
/// `write`, which is async-signal-safe.
///
/// Guarantees: after ``install(_:)``, each delivery of one of the signals puts its number on
/// ``readEnd`` (a burst may coalesce when the pipe is full; the loop treats a signal as a level).
public enum SignalPipe {
    // nonisolated(unsafe): set once by `install` before any handler is installed, then only read
    // (by the handler and the loop).
    nonisolated(unsafe) private static var fds: (read: Int32, write: Int32) = (-1, -1)

    /// The end the loop polls; -1 before ``install(_:)``.
    static var readEnd: Int32 { fds.read }

    public static func install(_ signals: [Int32]) throws(TerminalError) {
        if fds.read < 0 {
            var pair: [Int32] = [0, 0]
            guard pipe(&pair) == 0 else { throw .system(call: "pipe", errno: errno) }
            for fd in pair {
                _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
                _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            }
            fds = (pair[0], pair[1])
        }
        for signo in signals {
            var action = sigaction()
            let handler: @convention(c) (Int32) -> Void = { signo in
                var byte = UInt8(truncatingIfNeeded: signo)
                let saved = errno
                _ = systemWrite(SignalPipe.fds.write, &byte, 1)
                errno = saved
            }
            #if os(Linux)
            action.__sigaction_handler.sa_handler = handler
            #else
            action.__sigaction_u.__sa_handler = handler
            #endif
            sigemptyset(&action.sa_mask)
            action.sa_flags = SA_RESTART
            guard sigaction(signo, &action, nil) == 0 else { throw .system(call: "sigaction", errno: errno) }
        }
    }

    /// Puts the default action back for `signals`.
    public static func uninstall(_ signals: [Int32]) {
        for signo in signals { signal(signo, SIG_DFL) }
    }

    /// The signals received since the last drain, oldest first.
    static func drain() -> [Int32] {
        var out: [Int32] = []
        var buffer = [UInt8](repeating: 0, count: 64)
        while true {
            let n = read(fds.read, &buffer, buffer.count)
            if n <= 0 { break }
            out += buffer[0..<n].map { Int32($0) }
        }
        return out
    }
}

/// The C `write`, reachable from types that have their own `write` method.
@inline(__always)
func systemWrite(_ fd: Int32, _ buffer: UnsafeRawPointer, _ count: Int) -> Int {
    write(fd, buffer, count)
}
