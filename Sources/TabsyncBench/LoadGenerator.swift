import CLibwebsockets
import Foundation
import Histogram
import TabsyncCore
import TabsyncProto

/// The lws callback of every bench connection: finds the generator through the context's user
/// pointer. Runs on the thread inside `LoadGenerator.run()`.
private func benchCallback(
    wsi: OpaquePointer?, reason: lws_callback_reasons, user: UnsafeMutableRawPointer?,
    input: UnsafeMutableRawPointer?, length: Int
) -> Int32 {
    guard let wsi, let context = lws_get_context(wsi), let slot = lws_context_user(context),
          let raw = slot.assumingMemoryBound(to: UnsafeMutableRawPointer?.self).pointee
    else { return 0 }
    return Unmanaged<LoadGenerator>.fromOpaque(raw).takeUnretainedValue()
        .handle(wsi: wsi, reason: reason, input: input, length: length)
}

private func benchTick(sul: UnsafeMutablePointer<lws_sorted_usec_list_t>?) {
    guard let sul, let raw = ctsc_timer_owner(sul) else { return }
    Unmanaged<LoadGenerator>.fromOpaque(raw).takeUnretainedValue().tick()
}

/// One bench connection (one client of one workspace). Owned by the generator's thread.
final class BenchConnection {
    enum State { case idle, connecting, open, ready, closed }

    let index: Int
    let workspace: Int
    var state = State.idle
    var wsi: OpaquePointer?
    var connectStart: UInt64 = 0
    var seq: UInt64 = 0
    /// Per submitted op (index seq − 1): its scheduled send time, flags and model bookkeeping.
    var sendTimes: [UInt64] = []
    var flags: [UInt8] = []
    var tabs: [Int32] = []
    var queue: [[UInt8]] = []
    var queueHead = 0
    var receiveBuffer: [UInt8] = []
    var closing = false
    var peerCloseCode: UInt16?

    static let measured: UInt8 = 0x80
    static let answered: UInt8 = 0x40
    static let kindMask: UInt8 = 0x0F

    init(index: Int, workspace: Int) {
        self.index = index
        self.workspace = workspace
    }
}

/// Drives every connection of a bench on one libwebsockets client context, on the thread that calls
/// ``run()``: connects at the ramp rate, sends ops by the clock (open loop: it never waits for
/// answers), and measures answers against one monotonic clock.
///
/// Thread rule: everything, lws callbacks included, runs on the thread inside `run()`; the object
/// is never shared with another thread.
final class LoadGenerator {
    let configuration: BenchConfiguration
    let progress: (@Sendable (BenchProgress) -> Void)?
    private var context: OpaquePointer?
    /// The libev (epoll) loop lws runs on (`--event-loop epoll`), nil on lws' poll() loop.
    private var eventLoop: UnsafeMutableRawPointer?
    private let protocols: UnsafeMutablePointer<lws_protocols>
    private let timer: UnsafeMutablePointer<ctsc_timer>
    private let userSlot: UnsafeMutablePointer<UnsafeMutableRawPointer?>
    private let pre = Int(clws_pre())
    private var scratch: UnsafeMutableRawPointer
    private var scratchCapacity = 64 << 10
    private var cStrings: [UnsafeMutablePointer<CChar>] = []
    private var cAddress: UnsafeMutablePointer<CChar>?
    private var cHost: UnsafeMutablePointer<CChar>?
    private var cProtocol: UnsafeMutablePointer<CChar>?
    private var cPaths: [UnsafeMutablePointer<CChar>?] = []
    private let format: WireFormat?

    var connections: [BenchConnection] = []
    private var models: [WorkspaceModel]
    private var random: BenchRandom
    private var workspaceNames: [String]

    // Scheduling.
    private enum Phase { case connecting, idle, load, draining, closing, done }
    private var phase = Phase.connecting
    private var nextToOpen = 0
    private var connectStartedAt: UInt64 = 0
    var connectStartedAtForReport: UInt64 { connectStartedAt }
    private var connectDeadline: UInt64 = 0
    private var loadRate = 0.0
    private var loadStart: UInt64 = 0
    private var measureStart: UInt64 = 0
    private var measureEnd: UInt64 = 0
    private var scheduled: UInt64 = 0
    private var roundRobin = 0
    private var phaseDeadline: UInt64 = 0
    private var lastProgress: UInt64 = 0
    private var progressApplied = 0
    private var progressDeliveries = 0
    private var runStart: UInt64 = 0

    // Figures.
    var connectTimes = Histogram<UInt64>(lowestDiscernibleValue: 1, highestTrackableValue: 600_000_000, numberOfSignificantValueDigits: .three)
    var ack = Histogram<UInt64>(lowestDiscernibleValue: 1, highestTrackableValue: 600_000_000, numberOfSignificantValueDigits: .three)
    var delivery = Histogram<UInt64>(lowestDiscernibleValue: 1, highestTrackableValue: 600_000_000, numberOfSignificantValueDigits: .three)
    var sendLag = Histogram<UInt64>(lowestDiscernibleValue: 1, highestTrackableValue: 600_000_000, numberOfSignificantValueDigits: .two)
    var connected = 0
    var connectFailures: [String: Int] = [:]
    var connectDoneAt: UInt64 = 0
    var disconnects: [String: Int] = [:]
    var serverErrors: [String: Int] = [:]
    var sent = 0
    var applied = 0
    var rejected = 0
    var rejectedByCode: [String: Int] = [:]
    var notSent = 0
    var deliveries = 0
    var deliveryBytes = 0
    var deliveryMessages = 0
    var totalApplied = 0
    var totalAnswered = 0
    var totalSent = 0

    init(configuration: BenchConfiguration, progress: (@Sendable (BenchProgress) -> Void)?) throws(BenchError) {
        self.configuration = configuration
        self.progress = progress
        switch configuration.mode {
        case .json: format = .json
        case .proto: format = .proto
        case .mirror: format = nil
        }
        models = Array(repeating: WorkspaceModel(), count: configuration.workspaces)
        random = BenchRandom(state: configuration.seed)
        workspaceNames = (0..<configuration.workspaces).map { "\(configuration.workspacePrefix)-\($0)" }
        protocols = .allocate(capacity: 2)
        protocols.initialize(repeating: lws_protocols(), count: 2)
        protocols[0].name = UnsafePointer(strdup("tabsync-bench"))
        protocols[0].callback = benchCallback
        timer = .allocate(capacity: 1)
        memset(timer, 0, MemoryLayout<ctsc_timer>.size)
        userSlot = .allocate(capacity: 1)
        userSlot.initialize(to: nil)
        scratch = .allocate(byteCount: pre + scratchCapacity, alignment: 16)

        Self.raiseFileLimit()
        lws_set_log_level(Int32(LLL_ERR), nil)
        var info = lws_context_creation_info()
        info.port = ctsc_port_no_listen()
        info.protocols = UnsafePointer(protocols)
        info.gid = -1
        info.uid = -1
        info.timeout_secs = 20
        info.connect_timeout_secs = 20
        info.user = UnsafeMutableRawPointer(userSlot)
        // lws reads info.foreign_loops while creating the context: the slot outlives that call.
        let loopSlot = UnsafeMutablePointer<UnsafeMutableRawPointer?>.allocate(capacity: 1)
        defer { loopSlot.deallocate() }
        if configuration.eventLoop == .epoll {
            guard let loop = clws_ev_loop_create() else { throw .cannotStart("could not create a libev (epoll) loop") }
            eventLoop = loop
            clws_ev_use_loop(&info, loopSlot, loop)
        }
        let created = lws_create_context(&info)
        guard let created else {
            if let eventLoop { clws_ev_loop_destroy(eventLoop) }
            throw .cannotStart("lws_create_context failed")
        }
        context = created

        cAddress = keep(configuration.host)
        let bracketed = configuration.host.contains(":") ? "[\(configuration.host)]" : configuration.host
        cHost = keep("\(bracketed):\(configuration.port)")
        cProtocol = keep(configuration.mode.subprotocol)
        cPaths = workspaceNames.map { name in keep(configuration.mode == .mirror ? "/?mirror=\(name)" : "/") }
        for workspace in 0..<configuration.workspaces {
            for _ in 0..<configuration.clientsPerWorkspace {
                connections.append(BenchConnection(index: connections.count, workspace: workspace))
            }
        }
        timer.pointee.owner = Unmanaged.passUnretained(self).toOpaque()
        userSlot.pointee = Unmanaged.passUnretained(self).toOpaque()
    }

    deinit {
        if let context { lws_context_destroy(context) }
        if let eventLoop { clws_ev_loop_destroy(eventLoop) }
        cStrings.forEach { free($0) }
        free(UnsafeMutableRawPointer(mutating: protocols[0].name))
        protocols.deallocate()
        timer.deallocate()
        userSlot.deallocate()
        scratch.deallocate()
    }

    private func keep(_ text: String) -> UnsafeMutablePointer<CChar>? {
        guard let copy = strdup(text) else { return nil }
        cStrings.append(copy)
        return copy
    }

    /// Raises the soft open-file limit to the hard one (one fd per connection; lws sizes its tables
    /// from the limit when the context is created). Returns the soft limit now in force.
    @discardableResult
    static func raiseFileLimit() -> Int {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 0 }
        if limit.rlim_cur < limit.rlim_max {
            limit.rlim_cur = limit.rlim_max
            _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
            _ = getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        }
        return Int(clamping: limit.rlim_cur)
    }

    // MARK: phases (called by the runner, on this thread)

    private func service(until done: () -> Bool) {
        guard let context else { return }
        if let eventLoop {
            while !done() { clws_ev_run_once(eventLoop) }
        } else {
            while !done() {
                if lws_service(context, 0) < 0 { break }
            }
        }
    }

    private func armTick() {
        guard let context else { return }
        lws_sul_schedule(context, 0, &timer.pointee.sul, benchTick, 1000)
    }

    /// Opens every connection at the ramp rate; returns once each is ready or has failed (or the
    /// connect deadline passed).
    func connectAll() {
        runStart = monotonicNanos()
        connectStartedAt = runStart
        let rampSeconds = Double(connections.count) / configuration.ramp
        connectDeadline = runStart + UInt64((rampSeconds + 20) * 1e9)
        phase = .connecting
        armTick()
        service { phase != .connecting }
        connectDoneAt = monotonicNanos()
    }

    /// Sends at `rate` for `warmup` seconds, then measures for `duration`, then waits for the answers.
    func load(rate: Double, warmup: Double, duration: Double) {
        resetFigures()
        guard !timeUp else {
            measureStart = monotonicNanos()
            measureEnd = measureStart
            return
        }
        loadRate = rate
        loadStart = monotonicNanos()
        scheduled = 0
        measureStart = loadStart + UInt64(warmup * 1e9)
        measureEnd = measureStart + UInt64(duration * 1e9)
        phase = .load
        measureStartHookFired = warmup == 0
        if measureStartHookFired { measureStartHook?() }
        service { phase != .load }
        measureEndHook?()
        phaseDeadline = monotonicNanos() + 5_000_000_000
        service { phase != .draining }
    }

    /// Called on this thread when the measured window starts and ends (server samples).
    var measureStartHook: (() -> Void)?
    var measureEndHook: (() -> Void)?
    private var measureStartHookFired = false

    /// Closes every connection (1000) and waits up to a second for the close handshakes.
    func closeAll() {
        phase = .closing
        phaseDeadline = monotonicNanos() + 1_000_000_000
        for connection in connections where connection.wsi != nil && connection.state != .closed {
            connection.closing = true
            lws_callback_on_writable(connection.wsi)
        }
        service { phase != .closing }
        phase = .done
    }

    private func resetFigures() {
        ack.reset()
        delivery.reset()
        sendLag.reset()
        sent = 0
        applied = 0
        rejected = 0
        rejectedByCode = [:]
        notSent = 0
        deliveries = 0
        deliveryBytes = 0
        deliveryMessages = 0
        appliedPerWorkspace = Array(repeating: 0, count: configuration.workspaces)
        // Ops of an earlier phase no longer count.
        for connection in connections {
            for index in connection.flags.indices { connection.flags[index] &= ~BenchConnection.measured }
        }
    }

    var measuredSeconds: Double { max(0.001, Double(Int64(measureEnd) - Int64(measureStart)) / 1e9) }

    /// Ops still owed an answer among the measured ones.
    var outstanding: Int { sent - applied - rejected }

    /// Measured applied ops per workspace.
    private var appliedPerWorkspace: [Int] = []

    var expectedDeliveries: Int {
        // Every other client of the workspace that is still connected receives each applied op.
        var readyPerWorkspace = Array(repeating: 0, count: configuration.workspaces)
        for connection in connections where connection.state == .ready { readyPerWorkspace[connection.workspace] += 1 }
        return zip(readyPerWorkspace, appliedPerWorkspace).reduce(0) { $0 + max(0, $1.0 - 1) * $1.1 }
    }

    // MARK: the tick (every millisecond)

    /// Set once `--time-limit` has passed: every phase ends at once and no trial follows.
    private(set) var timeUp = false

    func tick() {
        let now = monotonicNanos()
        if let limit = configuration.timeLimit, !timeUp, runStart > 0, now - runStart >= UInt64(limit * 1e9),
           phase == .connecting || phase == .load || phase == .draining {
            timeUp = true
            if phase == .load { measureEnd = min(measureEnd, now) }
            if phase == .connecting {
                for connection in connections where connection.state == .connecting || connection.state == .open || connection.state == .idle {
                    connectFailures["not ready before --time-limit", default: 0] += 1
                    connection.closing = true
                    connection.state = .closed
                    if let wsi = connection.wsi { lws_set_timeout(wsi, PENDING_TIMEOUT_CLOSE_SEND, LWS_TO_KILL_ASYNC) }
                }
            }
            phase = .idle
        }
        switch phase {
        case .connecting:
            let due = min(connections.count, Int(Double(now - connectStartedAt) / 1e9 * configuration.ramp) + 1)
            while nextToOpen < due {
                open(connections[nextToOpen], now: now)
                nextToOpen += 1
            }
            let pending = connections.contains { $0.state == .connecting || $0.state == .open || $0.state == .idle }
            if !pending || now >= connectDeadline {
                phase = .idle  // leaves the connect service loop
                for connection in connections where connection.state == .connecting || connection.state == .open {
                    connectFailures["no answer before the connect deadline", default: 0] += 1
                    connection.closing = true
                    if let wsi = connection.wsi { lws_set_timeout(wsi, PENDING_TIMEOUT_CLOSE_SEND, LWS_TO_KILL_ASYNC) }
                }
            }
        case .idle:
            break
        case .load:
            if !measureStartHookFired && now >= measureStart {
                measureStartHookFired = true
                measureStartHook?()
            }
            if loadRate > 0 {
                let until = min(now, measureEnd)
                let elapsed = Double(until - loadStart) / 1e9
                let due = UInt64(elapsed * loadRate)
                while scheduled < due {
                    scheduled += 1
                    let intended = loadStart + UInt64(Double(scheduled) / loadRate * 1e9)
                    submitNext(intended: intended, now: now)
                }
            }
            if now >= measureEnd { phase = .draining }
        case .draining:
            let answered = outstanding <= 0
            let delivered = configuration.mode == .mirror || deliveries >= expectedDeliveries
            if (answered && delivered) || now >= phaseDeadline { phase = .idle }
        case .closing:
            if now >= phaseDeadline || !connections.contains(where: { $0.wsi != nil }) { phase = .done }
        case .done:
            return
        }
        report(now: now)
        armTick()
    }

    private func report(now: UInt64) {
        guard let progress, now - lastProgress >= 1_000_000_000 else { return }
        let seconds = lastProgress == 0 ? 1 : Double(now - lastProgress) / 1e9
        lastProgress = now
        let phaseName: String
        switch phase {
        case .connecting: phaseName = "connecting"
        case .idle: phaseName = "idle"
        case .load: phaseName = now < measureStart ? "warmup" : "measuring"
        case .draining: phaseName = "draining"
        case .closing, .done: phaseName = "closing"
        }
        progress(BenchProgress(
            elapsed: Double(now - runStart) / 1e9, phase: phaseName, connections: connected,
            target: connections.count,
            opsPerSecond: Double(totalApplied - progressApplied) / seconds,
            deliveriesPerSecond: Double(deliveries - progressDeliveries) / seconds,
            ackP99: Double(ack.valueAtPercentile(99)) / 1000,
            deliveryP99: Double(delivery.valueAtPercentile(99)) / 1000))
        progressApplied = totalApplied
        progressDeliveries = deliveries
    }

    // MARK: connections

    private func open(_ connection: BenchConnection, now: UInt64) {
        guard let context else { return }
        connection.state = .connecting
        connection.connectStart = now
        var info = lws_client_connect_info()
        info.context = context
        info.address = UnsafePointer(cAddress)
        info.port = Int32(configuration.port)
        info.path = UnsafePointer(cPaths[connection.workspace])
        info.host = UnsafePointer(cHost)
        info.origin = UnsafePointer(cHost)
        info.protocol = UnsafePointer(cProtocol)
        info.opaque_user_data = UnsafeMutableRawPointer(bitPattern: connection.index + 1)
        let wsi = lws_client_connect_via_info(&info)
        if wsi == nil && connection.state == .connecting {
            connection.state = .closed
            connectFailures["could not start connecting", default: 0] += 1
        } else if connection.state == .connecting, connection.wsi == nil {
            connection.wsi = wsi
        }
    }

    private func connection(of wsi: OpaquePointer) -> BenchConnection? {
        let bits = Int(bitPattern: lws_get_opaque_user_data(wsi))
        guard bits >= 1, bits <= connections.count else { return nil }
        return connections[bits - 1]
    }

    func handle(wsi: OpaquePointer, reason: lws_callback_reasons, input: UnsafeMutableRawPointer?, length: Int) -> Int32 {
        switch reason {
        case LWS_CALLBACK_CLIENT_CONNECTION_ERROR:
            guard let connection = connection(of: wsi), connection.state != .closed else { return 0 }
            let message = input.map { String(cString: $0.assumingMemoryBound(to: CChar.self)) } ?? "connection failed"
            connection.state = .closed
            connection.wsi = nil
            connectFailures[message, default: 0] += 1
            return 0
        case LWS_CALLBACK_CLIENT_ESTABLISHED:
            guard let connection = connection(of: wsi) else { return -1 }
            connection.wsi = wsi
            if let format {
                connection.state = .open
                let hello = Tabsync_V1_ClientMessage(hello: Tabsync_V1_Hello(
                    workspace: workspaceNames[connection.workspace], clientId: "c\(connection.index)", clientName: "bench"))
                connection.queue.append(format.encode(hello))
                lws_callback_on_writable(wsi)
            } else {
                becameReady(connection)
            }
            return 0
        case LWS_CALLBACK_CLIENT_RECEIVE:
            guard let connection = connection(of: wsi) else { return -1 }
            let bytes = UnsafeRawBufferPointer(start: input, count: input == nil ? 0 : length)
            let whole = lws_is_final_fragment(wsi) != 0 && lws_remaining_packet_payload(wsi) == 0
            if connection.receiveBuffer.isEmpty && whole {
                received(connection, bytes)
            } else {
                connection.receiveBuffer.append(contentsOf: bytes)
                if whole {
                    let message = connection.receiveBuffer
                    connection.receiveBuffer = []
                    message.withUnsafeBytes { received(connection, $0) }
                }
            }
            return 0
        case LWS_CALLBACK_CLIENT_WRITEABLE:
            guard let connection = connection(of: wsi) else { return -1 }
            return write(connection, wsi: wsi)
        case LWS_CALLBACK_WS_PEER_INITIATED_CLOSE:
            guard let connection = connection(of: wsi) else { return 0 }
            if let input, length >= 2 {
                let bytes = UnsafeRawBufferPointer(start: input, count: length)
                connection.peerCloseCode = UInt16(bytes[0]) << 8 | UInt16(bytes[1])
            } else {
                connection.peerCloseCode = 1005
            }
            return 0
        case LWS_CALLBACK_CLIENT_CLOSED:
            guard let connection = connection(of: wsi), connection.state != .closed else { return 0 }
            if !connection.closing {
                let code = connection.peerCloseCode ?? 1006
                if connection.state == .ready {
                    disconnects["\(code)", default: 0] += 1
                } else {
                    connectFailures["closed \(code) before ready", default: 0] += 1
                }
            }
            if connection.state == .ready { connected -= 1 }
            connection.state = .closed
            connection.wsi = nil
            return 0
        default:
            return 0
        }
    }

    private func becameReady(_ connection: BenchConnection) {
        connection.state = .ready
        connected += 1
        let now = monotonicNanos()
        connectTimes.record(max(1, (now - connection.connectStart) / 1000))
    }

    private func write(_ connection: BenchConnection, wsi: OpaquePointer) -> Int32 {
        if connection.closing {
            var reason = Array("bench done".utf8)
            reason.withUnsafeMutableBufferPointer { buffer in
                lws_close_reason(wsi, LWS_CLOSE_STATUS_NORMAL, buffer.baseAddress, buffer.count)
            }
            return -1
        }
        while connection.queueHead < connection.queue.count, lws_partial_buffered(wsi) == 0 {
            if !writeFrame(connection.queue[connection.queueHead], wsi: wsi) { return -1 }
            connection.queueHead += 1
        }
        if connection.queueHead == connection.queue.count {
            connection.queue.removeAll(keepingCapacity: true)
            connection.queueHead = 0
        } else {
            lws_callback_on_writable(wsi)
        }
        return 0
    }

    /// One `lws_write` of a frame through the scratch buffer (which has lws' headroom); false when
    /// lws refused it. What the socket does not take at once, lws keeps and sends on POLLOUT.
    private func writeFrame(_ frame: [UInt8], wsi: OpaquePointer) -> Bool {
        if frame.count > scratchCapacity {
            scratch.deallocate()
            scratchCapacity = frame.count * 2
            scratch = .allocate(byteCount: pre + scratchCapacity, alignment: 16)
        }
        let payload = scratch + pre
        frame.withUnsafeBytes { payload.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
        let kind = format?.usesTextFrames ?? true ? LWS_WRITE_TEXT : LWS_WRITE_BINARY
        return lws_write(wsi, payload.assumingMemoryBound(to: UInt8.self), frame.count, kind) >= 0
    }

    // MARK: sending

    private func submitNext(intended: UInt64, now: UInt64) {
        let workspace = roundRobin % configuration.workspaces
        roundRobin &+= 1
        let base = workspace * configuration.clientsPerWorkspace
        let count = configuration.clientsPerWorkspace
        var pick = Int(random.next() % UInt64(count))
        var tries = 0
        while connections[base + pick].state != .ready && tries < count {
            pick = (pick + 1) % count
            tries += 1
        }
        let connection = connections[base + pick]
        let measuring = intended >= measureStart && intended < measureEnd
        guard connection.state == .ready, let wsi = connection.wsi else {
            if measuring { notSent += 1 }
            return
        }
        connection.seq += 1
        var flag: UInt8 = measuring ? BenchConnection.measured : 0
        let frame: [UInt8]
        var tab: Int32 = 0
        if let format {
            let planned = models[workspace].plan(mix: configuration.mix, random: &random)
            flag |= planned.kind.rawValue
            tab = planned.tab
            frame = format.encode(Tabsync_V1_ClientMessage(submit: Tabsync_V1_Submit(seq: connection.seq, op: planned.op)))
        } else {
            frame = WireScan.mirrorMessage(client: connection.index, seq: connection.seq, size: configuration.messageBytes)
        }
        connection.sendTimes.append(intended)
        connection.flags.append(flag)
        connection.tabs.append(tab)
        // Straight out when nothing waits before it (no writable round trip through the loop).
        if connection.queueHead == connection.queue.count && lws_partial_buffered(wsi) == 0 {
            if !writeFrame(frame, wsi: wsi) { lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC) }
        } else {
            connection.queue.append(frame)
            lws_callback_on_writable(wsi)
        }
        totalSent += 1
        if measuring {
            sent += 1
            sendLag.record(max(1, (now &- intended) / 1000))
        }
    }

    // MARK: receiving

    private func received(_ connection: BenchConnection, _ bytes: UnsafeRawBufferPointer) {
        let scanned: WireScan.Message
        switch configuration.mode {
        case .proto: scanned = WireScan.proto(bytes)
        case .json: scanned = WireScan.json(bytes)
        case .mirror: scanned = WireScan.mirror(bytes)
        }
        switch scanned {
        case .applied(let client, let seq):
            applied(at: connection, from: client, seq: seq, size: bytes.count)
        case .presence:
            break
        case .other:
            guard let format, let message = try? format.decodeServerMessage(Array(bytes)) else { return }
            switch message.message {
            case .welcome(let welcome)?:
                guard connection.state == .open else { return }
                connection.seq = max(connection.seq, welcome.lastSeq)
                becameReady(connection)
            case .rejected(let rejected):
                rejectedAnswer(at: connection, seq: rejected.seq, code: rejected.code)
            case .error(let error):
                let name = errorCodeName(error.code)
                serverErrors[name, default: 0] += 1
                if connection.state == .open { connectFailures["server Error \(name)", default: 0] += 1 }
            case .applied(let applied):
                // Not recognised by the scan (ids the bench did not make): a server-made op.
                _ = applied
            default:
                break
            }
        }
    }

    private func applied(at receiver: BenchConnection, from client: Int?, seq: UInt64, size: Int) {
        guard let client, client < connections.count, seq >= 1 else { return }
        let submitter = connections[client]
        let index = Int(seq - 1)
        guard index < submitter.sendTimes.count else { return }
        let now = monotonicNanos()
        let flag = submitter.flags[index]
        let micros = max(1, (now &- submitter.sendTimes[index]) / 1000)
        if submitter === receiver {
            guard flag & BenchConnection.answered == 0 else { return }
            submitter.flags[index] = flag | BenchConnection.answered
            totalApplied += 1
            totalAnswered += 1
            if let kind = WorkspaceModel.Kind(rawValue: flag & BenchConnection.kindMask) {
                models[submitter.workspace].applied(kind: kind, tab: submitter.tabs[index])
            }
            if flag & BenchConnection.measured != 0 {
                applied += 1
                appliedPerWorkspace[submitter.workspace] += 1
                ack.record(micros)
            }
        } else if flag & BenchConnection.measured != 0 {
            deliveries += 1
            deliveryBytes += size
            deliveryMessages += 1
            delivery.record(micros)
        }
    }

    private func rejectedAnswer(at connection: BenchConnection, seq: UInt64, code: Tabsync_V1_ErrorCode) {
        guard seq >= 1, Int(seq - 1) < connection.sendTimes.count else { return }
        let index = Int(seq - 1)
        let flag = connection.flags[index]
        guard flag & BenchConnection.answered == 0 else { return }
        // 0x20 marks a refused op, so it is not counted among the applied ones.
        connection.flags[index] = flag | BenchConnection.answered | 0x20
        totalAnswered += 1
        if let kind = WorkspaceModel.Kind(rawValue: flag & BenchConnection.kindMask) {
            models[connection.workspace].rejected(kind: kind, tab: connection.tabs[index])
        }
        if flag & BenchConnection.measured != 0 {
            rejected += 1
            rejectedByCode[errorCodeName(code), default: 0] += 1
        }
    }
}

/// The wire name of a proto error code (`TAB_GONE`), or its number when unknown.
func errorCodeName(_ code: Tabsync_V1_ErrorCode) -> String {
    ErrorCode(code)?.wireName ?? "code \(code.rawValue)"
}

/// What the live progress line shows, once a second.
public struct BenchProgress: Sendable {
    public var elapsed: Double
    public var phase: String
    public var connections: Int
    public var target: Int
    public var opsPerSecond: Double
    public var deliveriesPerSecond: Double
    public var ackP99: Double
    public var deliveryP99: Double

    /// One line, no newline.
    public var line: String {
        func f(_ value: Double, _ digits: Int = 0) -> String { String(format: "%.\(digits)f", value) }
        return "\(f(elapsed, 1))s \(phase)  conn \(connections)/\(target)  ops/s \(f(opsPerSecond))  "
            + "deliveries/s \(f(deliveriesPerSecond))  ack p99 \(f(ackP99, 1)) ms  delivery p99 \(f(deliveryP99, 1)) ms"
    }
}
