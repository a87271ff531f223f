import CLibwebsockets
import Foundation
import Synchronization

/// The lws callback for every client connection: finds the loop core through the context's
/// user pointer and hands the call to it. Runs on the loop thread.
private func clientCallback(
    wsi: OpaquePointer?, reason: lws_callback_reasons, user: UnsafeMutableRawPointer?,
    input: UnsafeMutableRawPointer?, length: Int
) -> Int32 {
    guard let wsi, let context = lws_get_context(wsi), let slot = lws_context_user(context),
          let raw = slot.assumingMemoryBound(to: UnsafeMutableRawPointer?.self).pointee
    else { return 0 }
    let core = Unmanaged<LoopCore>.fromOpaque(raw).takeUnretainedValue()
    return core.handle(wsi: wsi, reason: reason, input: input, length: length)
}

/// The loop's single lws timer fired: run the retries that are due.
func timerFired(sul: UnsafeMutablePointer<lws_sorted_usec_list_t>?) {
    guard let sul, let raw = ctsc_timer_owner(sul) else { return }
    Unmanaged<LoopCore>.fromOpaque(raw).takeUnretainedValue().runDueTimers()
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

/// Everything the loop thread owns: the lws context, the connection table, the retry timers.
///
/// `@unchecked Sendable`: the object crosses to the loop thread once, when the thread starts;
/// after `init` every mutable property is touched only on that thread (inside `run()` and the
/// lws callbacks it drives). Other threads reach it only through `inbox` (a `Mutex`) and
/// `threadId` (atomic), which are Sendable on their own.
final class LoopCore: @unchecked Sendable {
    let context: OpaquePointer
    let inbox: LoopInbox
    let threadId = ThreadIdPromise()
    let options: ClientLoop.Options
    let protocols: UnsafeMutablePointer<lws_protocols>
    let retryPolicy: UnsafeMutablePointer<lws_retry_bo_t>
    let timer: UnsafeMutablePointer<ctsc_timer>
    let userSlot: UnsafeMutablePointer<UnsafeMutableRawPointer?>
    let pre = Int(clws_pre())
    var scratch: UnsafeMutableRawPointer
    var scratchCapacity: Int

    // Loop thread only, from here on.
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
        timer = .allocate(capacity: 1)
        memset(timer, 0, MemoryLayout<ctsc_timer>.size)
        scratchCapacity = 16 << 10
        scratch = .allocate(byteCount: pre + scratchCapacity, alignment: 16)

        if let level = options.libraryLogLevel { lws_set_log_level(level, nil) }
        if options.raiseFileLimit { Self.raiseFileLimit() }

        var info = lws_context_creation_info()
        info.port = ctsc_port_no_listen()
        info.protocols = UnsafePointer(protocols)
        info.options = ctsc_option_ssl_global_init()
        info.gid = -1
        info.uid = -1
        info.timeout_secs = options.connectTimeoutSeconds
        info.connect_timeout_secs = options.connectTimeoutSeconds
        info.retry_and_idle_policy = UnsafePointer(retryPolicy)
        let caFile = options.caFile.map { strdup($0) }
        defer { caFile.map { free($0) } }
        if let caFile { info.client_ssl_ca_filepath = UnsafePointer(caFile) }
        // The context's user pointer is a slot that receives `self` once initialised; callbacks
        // during creation (PROTOCOL_INIT) find it empty and are ignored. Unretained: the loop
        // thread keeps the core alive until after it destroys the context.
        userSlot = .allocate(capacity: 1)
        userSlot.initialize(to: nil)
        info.user = UnsafeMutableRawPointer(userSlot)
        guard let created = lws_create_context(&info) else {
            free(UnsafeMutableRawPointer(mutating: protocols[0].name))
            protocols.deallocate()
            retryPolicy.deallocate()
            timer.deallocate()
            scratch.deallocate()
            userSlot.deallocate()
            throw .loopUnavailable("lws_create_context failed")
        }
        context = created
        inbox = LoopInbox(context: ContextHandle(pointer: created))
        timer.pointee.owner = Unmanaged.passUnretained(self).toOpaque()
        userSlot.pointee = Unmanaged.passUnretained(self).toOpaque()
    }

    deinit {
        free(UnsafeMutableRawPointer(mutating: protocols[0].name))
        protocols.deallocate()
        retryPolicy.deallocate()
        timer.deallocate()
        scratch.deallocate()
        userSlot.deallocate()
    }

    /// Raises the soft `RLIMIT_NOFILE` to the hard limit: lws sizes its fd table from it when the
    /// context is created, and every connection is one fd.
    static func raiseFileLimit() {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < limit.rlim_max else { return }
        limit.rlim_cur = limit.rlim_max
        _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    }

    /// The loop thread's body: services lws until told to stop, then destroys the context.
    func run() {
        threadId.fulfil()
        while true {
            // Stopping: keep servicing until every close handshake is done or the grace runs out.
            if stopping, connections.isEmpty || stopDeadline.map({ ContinuousClock.now >= $0 }) ?? true { break }
            if lws_service(context, 0) < 0 { break }
        }
        stopping = true
        inbox.markStopped()
        // Tell every owner its connection is gone for good, then let lws close the sockets.
        let remaining = connections.values
        connections = [:]
        for connection in remaining {
            _ = connection.owner.loopClosed(ConnectionEnding(kind: .closedLocally, reason: "client loop stopped"))
            connection.releaseStrings()
            connection.owner.loopForgotten()
        }
        lws_context_destroy(context)
    }
}
