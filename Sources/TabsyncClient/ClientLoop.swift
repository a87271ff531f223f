import CLibwebsockets
import Foundation
import Synchronization
import TabsyncLock
import TabsyncLoop

/// One libwebsockets client context and the thread that services it; any number of connections
/// (``TabsyncClient``s) share it.
///
/// Thread rule: the loop thread owns every connection's state (sockets, receive buffers, send
/// queues, retry timers). Other threads only append commands to a `Lock` inbox (`LoopInbox`) and
/// wake the loop with `lws_cancel_service`; the loop drains the inbox in
/// `LWS_CALLBACK_EVENT_WAIT_CANCELLED`.
/// A connection costs a few small objects, its lws state and its replica (about 11 KB measured in a
/// debug build with 3,000 connections, `ScaleTests`); no thread per connection.
///
/// `shutdown()` (also run by `deinit`) closes every connection and joins the thread; it must
/// not be called from the loop thread (from a client's event handler).
public final class ClientLoop: Sendable {
    /// Settings fixed when the loop starts.
    public struct Options: Sendable {
        /// Idle seconds before lws pings the server; a connection with no valid traffic for
        /// `hangupAfterSeconds` is closed (and reconnects).
        public var pingAfterSeconds: UInt16 = 20
        public var hangupAfterSeconds: UInt16 = 45
        /// Seconds a connection attempt (TCP, TLS, upgrade) may take.
        public var connectTimeoutSeconds: UInt32 = 10
        /// The largest message accepted from the server (all fragments); larger closes 1009.
        public var maxMessageBytes: Int = 64 << 20
        /// Bytes a connection's send queue holds; past it, frames wait in the client.
        public var maxQueuedBytes: Int = 1 << 20
        /// CA bundle for `wss://`; nil = the system's default trust store.
        public var caFile: String?
        /// Raise the soft open-file limit to the hard one before creating the context (one fd per
        /// connection; lws sizes its tables from the limit at creation).
        public var raiseFileLimit = true
        /// lws's log mask (`LLL_*` bits), asked when the loop starts; nil asks nothing. lws' log is
        /// process-wide: the mask in force is the union of every mask asked in the process (the
        /// server's too), and lines go to stderr, rate-limited. The default asks errors and
        /// warnings only.
        public var libraryLogLevel: Int32? = Int32(LLL_ERR) | Int32(LLL_WARN)
        /// Connection attempts (TCP, TLS, upgrade) in flight at once; more wait their turn, so
        /// thousands of clients started together do not overflow the server's accept backlog.
        /// 0 = no limit.
        public var maxConcurrentConnects = 128
        /// How long `shutdown()` waits for open connections to finish their close handshake.
        public var closeGrace: Duration = .seconds(1)

        public init() {}
    }

    let inbox: LoopInbox<LoopCommand>
    private let finished = DispatchSemaphore(value: 0)
    private let loopThreadId: Atomic<UInt>
    private let nextConnectionId = Atomic<UInt64>(1)
    let options: Options

    /// Starts a client context and its service thread.
    public init(options: Options = Options()) throws(ClientError) {
        self.options = options
        let core = try LoopCore(options: options)
        inbox = core.inbox
        loopThreadId = Atomic(0)
        let finished = self.finished
        let thread = Thread { [core] in
            core.run()
            finished.signal()
        }
        thread.name = "tabsync-client-loop"
        thread.start()
        // Published by the thread itself before it services anything; wait for it so that
        // `isLoopThread` is exact from now on.
        loopThreadId.store(core.threadId.wait(), ordering: .releasing)
    }

    deinit {
        if isLoopThread {
            inbox.postFinal(.stop)  // the thread finishes on its own; it cannot wait for itself
        } else {
            shutdown()
        }
    }

    /// Closes every connection and stops the loop thread; waits for it to finish. Idempotent.
    public func shutdown() {
        precondition(!isLoopThread, "ClientLoop.shutdown() must not be called from the loop thread")
        inbox.postFinal(.stop)
        finished.wait()
        finished.signal()  // later callers return at once
    }

    /// True on the loop thread (inside lws callbacks and event handlers).
    public var isLoopThread: Bool {
        loopThreadId.load(ordering: .acquiring) == UInt(pthread_self())
    }

    /// Queues `command` for the loop; false once the loop is stopping or stopped.
    @discardableResult
    func send(_ command: LoopCommand) -> Bool {
        inbox.post(command)
    }

    func makeConnectionId() -> UInt64 {
        nextConnectionId.wrappingAdd(1, ordering: .relaxed).oldValue
    }
}

/// What other threads ask of the loop.
enum LoopCommand: Sendable {
    /// Starts connecting a new connection and keeps it connected until `close`.
    case open(id: UInt64, owner: any LoopConnectionOwner, url: ServerURL, subprotocol: String,
              backoff: Backoff, allowSelfSigned: Bool)
    /// The owner has frames to send.
    case flush(id: UInt64)
    /// Closes the current socket (1000) and connects again now.
    case reconnect(id: UInt64)
    /// Closes for good with `code`.
    case close(id: UInt64, code: UInt16, reason: String)
    /// Shuts the socket down abruptly, without a close frame, as a network failure would.
    case drop(id: UInt64)
    /// Stops the loop (posted last: the inbox refuses commands after it).
    case stop
}

/// What the loop does after a connection ended, as decided by its owner.
enum LoopNext: Sendable {
    /// Retry after the back-off delay for the next attempt.
    case retry
    /// The server refused the connection before a `Welcome` (a quota, an unavailable store):
    /// retry with a back-off that keeps growing over such refusals in a row, although each
    /// connection opened and heard the server (which otherwise restarts the count).
    case retryAfterRefusal
    /// Connect again at once (resync); the back-off attempt count restarts.
    case reconnectNow
    /// Forget the connection.
    case stop
}

/// The owner's answer to a received message.
enum LoopVerdict: Sendable {
    case keep
    /// Close with this code, then ask `loopClosed` what next.
    case close(code: UInt16, reason: String)
}

/// The session side of a connection. Every method is called on the loop thread only, in order.
protocol LoopConnectionOwner: AnyObject, Sendable {
    /// Attempt `attempt` starts (0 = first or deliberate reconnect).
    func loopConnecting(attempt: Int)
    /// The WebSocket is open; returns the frames to send before anything else (the Hello).
    func loopOpened() -> [[UInt8]]
    /// One whole message arrived.
    func loopReceived(_ message: [UInt8]) -> LoopVerdict
    /// Frames waiting to be sent, about `budget` bytes at most (always at least one if any wait).
    func loopTakeOutgoing(budget: Int) -> [[UInt8]]
    /// The connection ended or never opened; the answer decides what happens next.
    func loopClosed(_ ending: ConnectionEnding) -> LoopNext
    /// The next attempt, `attempt`, starts in `delay`.
    func loopWaiting(attempt: Int, delay: Duration)
    /// The loop forgot the connection (after `.stop`, a close for good, or the loop stopping):
    /// no further call comes.
    func loopForgotten()
    /// After a received message: a delay after which the owner wants ``loopRetryDue()`` called
    /// (ops it holds to send again), at most once per request.
    func loopTakeRetryRequest() -> Duration?
    /// The retry delay asked for has passed (the connection may be another one by now); true
    /// when frames are waiting to be taken.
    func loopRetryDue() -> Bool
}

extension LoopConnectionOwner {
    func loopTakeRetryRequest() -> Duration? { nil }
    func loopRetryDue() -> Bool { false }
}

