import CLibwebsockets
import Foundation
import Synchronization
import TabsyncLock
import TabsyncLoop

/// The lws callback for every client connection: finds the loop core as the event loop's owner
/// and hands the call to it. Runs on the loop thread.
private func clientCallback(
    wsi: OpaquePointer?, reason: lws_callback_reasons, user: UnsafeMutableRawPointer?,
    input: UnsafeMutableRawPointer?, length: Int
) -> Int32 {
    guard let wsi, let core = EventLoop.owner(of: wsi, as: LoopCore.self) else { return 0 }
    return core.handle(wsi: wsi, reason: reason, input: input, length: length)
}

/// The loop thread's id, published once the thread runs.
final class ThreadIdPromise: Sendable {
    let value = Atomic<UInt>(0)
    let ready = DispatchSemaphore(value: 0)

    func fulfil() {
        value.store(UInt(pthread_self()), ordering: .releasing)
        ready.signal()
    }

    func wait() -> UInt {
        ready.wait()
        ready.signal()
        return value.load(ordering: .acquiring)
    }
}

/// Everything the loop thread owns: the lws context (an ``EventLoop`` on lws' poll() loop), the
/// connection table, the retry timers.
///
/// `@unchecked Sendable`: the object crosses to the loop thread once, when the thread starts;
/// after `init` every mutable property is touched only on that thread (inside `run()` and the
/// lws callbacks it drives). Other threads reach it only through `inbox` (a `Lock`) and
/// `threadId` (atomic), which are Sendable on their own.
final class LoopCore: @unchecked Sendable {
    let eventLoop: EventLoop
    let inbox: LoopInbox<LoopCommand>
    let threadId = ThreadIdPromise()
    let options: ClientLoop.Options
    let protocols: UnsafeMutablePointer<lws_protocols>
    let retryPolicy: UnsafeMutablePointer<lws_retry_bo_t>
    /// The one lws timer, pointed at the earliest retry deadline (``runDueTimers()``).
    private(set) var timer: LoopTimer!
    /// Writes each frame through one buffer with lws' headroom.
    let writer = ScratchWriter()

    var context: OpaquePointer { eventLoop.context }

    // Loop thread only, from here on.
    /// Commands taken from the inbox, being handled (kept to reuse its storage).
    var commands: [LoopCommand] = []
    var connections: [UInt64: LoopConnection] = [:]
    var timers = TimerHeap()
    var timerArmedFor: ContinuousClock.Instant?
    var stopping = false
    var stopDeadline: ContinuousClock.Instant?
    /// Connections in the TCP/TLS/upgrade phase, at most `maxConcurrentConnects`.
    var connectsInFlight = 0
    /// Connections waiting for a connect slot, oldest first, with the attempt tag they queued under.
    var connectQueue: [(id: UInt64, tag: UInt16)] = []
    var connectQueueHead = 0
    var startingQueued = false

    init(options: ClientLoop.Options) throws(ClientError) {
        self.options = options
        protocols = .allocate(capacity: 2)
        protocols.initialize(repeating: lws_protocols(), count: 2)
        protocols[0].name = UnsafePointer(strdup("tabsync-client"))
        protocols[0].callback = clientCallback
        retryPolicy = .allocate(capacity: 1)
        retryPolicy.initialize(to: lws_retry_bo_t())
        retryPolicy.pointee.secs_since_valid_ping = options.pingAfterSeconds
        retryPolicy.pointee.secs_since_valid_hangup = options.hangupAfterSeconds

        if let level = options.libraryLogLevel { LWSLog.request(level) }
        if options.raiseFileLimit { FileLimit.raise() }

        var info = lws_context_creation_info()
        info.port = clws_port_no_listen()
        info.protocols = UnsafePointer(protocols)
        info.options = clws_option_ssl_global_init()
        info.gid = -1
        info.uid = -1
        info.timeout_secs = options.connectTimeoutSeconds
        info.connect_timeout_secs = options.connectTimeoutSeconds
        info.retry_and_idle_policy = UnsafePointer(retryPolicy)
        let caFile = options.caFile.map { strdup($0) }
        defer { caFile.map { free($0) } }
        if let caFile { info.client_ssl_ca_filepath = UnsafePointer(caFile) }
        // The owner is set once `self` is initialised; callbacks during creation (PROTOCOL_INIT)
        // find none and are ignored. Unretained: the loop thread keeps the core alive until after
        // it destroys the context.
        do {
            eventLoop = try EventLoop(info, backend: .poll, fallbackToPoll: false)
        } catch {
            free(UnsafeMutableRawPointer(mutating: protocols[0].name))
            protocols.deallocate()
            retryPolicy.deallocate()
            throw .loopUnavailable("lws_create_context failed")
        }
        inbox = LoopInbox()
        inbox.attach(eventLoop)
        timer = LoopTimer(on: eventLoop) { [unowned self] in self.runDueTimers() }
        eventLoop.setOwner(self)
    }

    deinit {
        free(UnsafeMutableRawPointer(mutating: protocols[0].name))
        protocols.deallocate()
        retryPolicy.deallocate()
    }

    /// The loop thread's body: services lws until told to stop, then destroys the context.
    func run() {
        threadId.fulfil()
        while true {
            // Stopping: keep servicing until every close handshake is done or the grace runs out.
            if stopping, connections.isEmpty || stopDeadline.map({ ContinuousClock.now >= $0 }) ?? true { break }
            if !eventLoop.runOnce() { break }
        }
        stopping = true
        inbox.close()
        // Tell every owner its connection is gone for good, then let lws close the sockets.
        let remaining = connections.values
        connections = [:]
        for connection in remaining {
            _ = connection.owner.loopClosed(ConnectionEnding(kind: .closedLocally, reason: "client loop stopped"))
            connection.releaseStrings()
            connection.owner.loopForgotten()
        }
        timer.cancel()
        eventLoop.destroy()
    }
}
