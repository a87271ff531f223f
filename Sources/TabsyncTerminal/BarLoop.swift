#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import TabsyncLock

/// Events posted from other threads (the client library's callbacks) to the bar's loop.
///
/// Guarantees: events come out of ``drain()`` in the order they were posted; ``post(_:)`` never
/// blocks on the loop (it appends under a lock and writes one byte to a non-blocking wake pipe).
public final class BarInbox: Sendable {
    private let queue = Lock<[BarEvent]>([])
    /// Read end polled by the loop; write end poked by `post`.
    let wakeRead: Int32
    private let wakeWrite: Int32

    public init() throws(TerminalError) {
        var pair: [Int32] = [0, 0]
        guard pipe(&pair) == 0 else { throw .system(call: "pipe", errno: errno) }
        for fd in pair {
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        }
        wakeRead = pair[0]
        wakeWrite = pair[1]
    }

    deinit {
        close(wakeRead)
        close(wakeWrite)
    }

    /// Queues an event and wakes the loop. Any thread.
    public func post(_ event: BarEvent) {
        queue.withLock { $0.append(event) }
        var byte: UInt8 = 1
        _ = systemWrite(wakeWrite, &byte, 1)  // a full pipe already means "wake up"
    }

    /// Takes every queued event. Loop thread.
    func drain() -> [BarEvent] {
        var buffer = [UInt8](repeating: 0, count: 256)
        while read(wakeRead, &buffer, buffer.count) > 0 {}
        return queue.withLock { events in
            defer { events.removeAll() }
            return events
        }
    }
}

/// The bar's loop, in tmux's shape: keys, signals and inbox events only change the model and mark
/// the screen dirty; one redraw per loop turn, from the current state, writing only changed lines.
///
/// Guarantees: returns on `q` (or Ctrl-C/Ctrl-D), on SIGINT, SIGTERM or SIGHUP, when input closes,
/// or when `perform` asks to stop; SIGWINCH re-lays everything out. The caller restores the terminal
/// (``Terminal/restore()``) after it returns, whatever the reason. Thread rule: runs on the thread
/// that owns `terminal`; `perform` and `tick` are called on it.
public enum BarLoop {
    public enum Exit: Sendable, Equatable {
        case quit
        case signal(Int32)
        case inputClosed
        case stopped(String)
    }

    /// Signals the loop handles; install them with ``SignalPipe/install(_:)`` before ``run``.
    public static let signals: [Int32] = [SIGINT, SIGTERM, SIGHUP, SIGWINCH]

    /// - Parameters:
    ///   - tick: called about once a second when nothing else happens, and after each batch of
    ///     inbox events; returns events (stats, reconnect countdowns).
    ///   - perform: carries out an action; returns a reason to stop, or nil to go on.
    public static func run(
        model: inout BarModel, terminal: Terminal, inbox: BarInbox,
        tick: () -> [BarEvent], perform: (BarAction) -> String?
    ) -> Exit {
        var renderer = Renderer()
        var decoder = KeyDecoder()
        var dirty = true
        let size = terminal.size()
        _ = model.handle(.resize(rows: size.rows, cols: size.cols))

        /// Handles one event; returns an exit when an action ends the loop.
        func handle(_ event: BarEvent) -> Exit? {
            dirty = true
            for action in model.handle(event) {
                if action == .quit { return .quit }
                if let why = perform(action) { return .stopped(why) }
            }
            return nil
        }

        while true {
            if dirty {
                let output = renderer.render(model.frame())
                if !output.isEmpty { terminal.write(output) }
                dirty = false
            }
            var fds = [
                pollfd(fd: terminal.input, events: Int16(POLLIN), revents: 0),
                pollfd(fd: inbox.wakeRead, events: Int16(POLLIN), revents: 0),
                pollfd(fd: SignalPipe.readEnd, events: Int16(POLLIN), revents: 0),
            ]
            let ready = poll(&fds, nfds_t(fds.count), decoder.hasPending ? 25 : 1000)
            if ready < 0 {
                if errno == EINTR { continue }
                return .stopped("poll failed: \(String(cString: strerror(errno)))")
            }
            if ready == 0 {
                let pendingKeys = decoder.flush()
                for key in pendingKeys { if let exit = handle(.key(key)) { return exit } }
                if pendingKeys.isEmpty {
                    for event in tick() { if let exit = handle(event) { return exit } }
                }
                continue
            }
            if fds[2].revents != 0 {
                for signo in SignalPipe.drain() {
                    if signo == SIGWINCH {
                        let size = terminal.size()
                        renderer.invalidate()
                        if let exit = handle(.resize(rows: size.rows, cols: size.cols)) { return exit }
                    } else {
                        return .signal(signo)
                    }
                }
            }
            if fds[0].revents != 0 {
                var buffer = [UInt8](repeating: 0, count: 4096)
                let n = read(terminal.input, &buffer, buffer.count)
                if n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN) { return .inputClosed }
                if n > 0 {
                    for key in decoder.feed(buffer[0..<n]) { if let exit = handle(.key(key)) { return exit } }
                }
            }
            if fds[1].revents != 0 {
                for event in inbox.drain() { if let exit = handle(event) { return exit } }
                for event in tick() { if let exit = handle(event) { return exit } }
            }
        }
    }
}
