import CFuzzerDriver
import Logging
import SwiftProtobuf
import TabsyncCore
import TabsyncProto
import TabsyncServerCore
import TabsyncStore

/// libFuzzer target `wire`: client frames in either subprotocol, through the server's own core
/// (`ServerCore`: decode, the session machine, Hello, Submit, the sequencer, the commit pipeline),
/// one session after another on one workspace, with a `MemoryStore` answering its store calls.
/// Each session says Hello first (made here, resuming from what the follower saw); a frame the core
/// closes the session for (undecodable, a second Hello, ...) ends it, and the next frame is the
/// next session's.
///
/// Input (see ``FuzzInput``): one header byte (format, limits, tabs to start with), then frames,
/// each a 2-byte big-endian length and that many bytes.
///
/// Properties, checked after every frame (a violation traps, libFuzzer reports a crash):
/// - the workspace invariants hold on the core's live state (`Workspace.invariantViolations`: ids
///   and keys unique, keys valid and sorted, `activeTabId` empty exactly when there are no tabs and
///   else an existing tab, count ≤ `maxTabs`);
/// - every broadcast `Applied` survives the round trip (frame in this format → decode → core)
///   unchanged, follows the previous version, and a follower applying them has the core's workspace;
/// - no (client, seq) is broadcast as applied twice, and only a server rekey has seq 0.
@_cdecl("fuzz_wire_main")
public func main(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    tabsync_fuzz_run(argc, argv, fuzzWire)
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzWire(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data else { return 0 }
    let input = FuzzInput(Array(UnsafeBufferPointer(start: data, count: size)))
    var state = WireState(input: input)
    for frame in input.frames.prefix(64) { state.receive(frame) }
    return 0
}

/// The fuzz bytes, split: header byte `h`, then frames of `[len_hi, len_lo, bytes…]` (a length past
/// the end takes what is left).
///
/// `h & 1`: 0 = `tabsync.v1.json`, 1 = `tabsync.v1.proto`; `(h >> 1) & 3`: maxTabs 500, 3, 8, 40;
/// `(h >> 3) & 3`: logRetention 10000, 1, 4, 64; `h >> 5`: tabs added before the frames (0–7).
struct FuzzInput {
    var format: WireFormat
    var limits: Limits
    var startTabs: Int
    var frames: [[UInt8]]

    init(_ bytes: [UInt8]) {
        let h = bytes.first ?? 0
        format = h & 1 == 0 ? .json : .proto
        limits = Limits(maxTabs: [500, 3, 8, 40][Int(h >> 1) & 3], logRetention: [10_000, 1, 4, 64][Int(h >> 3) & 3])
        startTabs = Int(h >> 5)
        frames = []
        var i = 1
        while i < bytes.count {
            let length = i + 1 < bytes.count ? Int(bytes[i]) << 8 | Int(bytes[i + 1]) : 0
            let start = min(i + 2, bytes.count)
            let end = min(start + length, bytes.count)
            frames.append(Array(bytes[start..<end]))
            i = end
        }
    }
}

/// The server side of the run: the core, the store answering it, and a follower workspace that
/// sees only what the core broadcasts.
struct WireState {
    let format: WireFormat
    let store = MemoryStore()
    var core: ServerCore
    var follower: Workspace
    let clientId = "fuzz-client"
    /// The session being fuzzed.
    var connection: ConnectionID = 0
    var closed = false
    var appliedSeqs: Set<UInt64> = []
    let now = ContinuousClock.now
    /// Events the core's actions caused (store answers), handled in order after them.
    var events: [ServerCore.Event] = []

    init(input: FuzzInput) {
        format = input.format
        var limits = input.limits
        limits.maxOpsPerSecond = 1_000_000
        var settings = ServerCore.Settings(limits: limits, storeEpoch: store.epoch)
        settings.idleUnload = .seconds(3600)
        core = ServerCore(settings: settings, logger: Logger(label: "fuzz", factory: { _ in SwiftLogNoOpLogHandler() }), now: now)
        follower = Workspace(id: "fuzz", epoch: store.epoch)
        open()
        for n in 0..<min(input.startTabs, limits.maxTabs) {
            let submit = Tabsync_V1_Submit(
                seq: UInt64(n + 1), op: .add(tab: Tab(id: "s\(n)", title: "start \(n)"), place: .end, activate: n == 0))
            receive(format.encode(Tabsync_V1_ClientMessage(submit: submit)))
        }
    }

    /// A new session: opened, its Hello sent (resuming from the follower's version).
    mutating func open() {
        connection += 1
        closed = false
        handle(.connected(connection, format: format, echo: false))
        let hello = Tabsync_V1_Hello(
            workspace: "fuzz", clientId: clientId, lastVersion: follower.version, epoch: follower.version > 0 ? store.epoch : "")
        handle(.frame(connection, format.encode(Tabsync_V1_ClientMessage(hello: hello)), binary: !format.usesTextFrames))
    }

    mutating func receive(_ frame: [UInt8]) {
        if closed {
            handle(.disconnected(connection))
            open()
        }
        handle(.frame(connection, frame, binary: !format.usesTextFrames))
        check()
    }

    mutating func handle(_ event: ServerCore.Event) {
        events.append(event)
        while !events.isEmpty {
            var actions: [ServerCore.Action] = []
            core.handle(events.removeFirst(), now: now, into: &actions)
            for action in actions { perform(action) }
        }
    }

    mutating func perform(_ action: ServerCore.Action) {
        switch action {
        case .load, .commit:
            // The driver's own store turn, against the memory store (which never fails here).
            let instant = now
            switch StoreTurn(stores: StoreCapabilities(store), holders: nil, clock: { instant }).answer(action) {
            case .loaded(_, .failure(let error))?:
                fatalError("the memory store failed a load: \(error)")
            case .committed(_, .failed(let error), _)?:
                fatalError("the memory store failed a commit: \(error)")
            case .committed(_, .behind, _)?:
                fatalError("the memory store, its only writer, refused a commit as behind")
            case let event?:
                events.append(event)
            case nil:
                break
            }
        case .broadcast(_, let message):
            if case .applied? = message.message { broadcast(message) }
        case .close(let id, _, _) where id == connection:
            closed = true
        default:
            break
        }
    }

    /// What every client receives for a broadcast `Applied`, decoded and applied to the follower.
    mutating func broadcast(_ message: Tabsync_V1_ServerMessage) {
        let bytes = format.encode(message)
        let decoded: Tabsync_V1_ServerMessage
        do {
            decoded = try format.decodeServerMessage(bytes)
        } catch {
            fatalError("an Applied the server encoded does not decode: \(error) \(message)")
        }
        guard case .applied(let wire)? = decoded.message, case .applied(let original)? = message.message else {
            fatalError("Applied decoded as \(decoded)")
        }
        let received: AppliedOp
        let sent: AppliedOp
        do {
            received = try AppliedOp(wire)
            sent = try AppliedOp(original)
        } catch {
            fatalError("an Applied the server encoded does not convert: \(error) \(message)")
        }
        if received != sent { fatalError("Applied round trip changed it: \(sent) -> \(received)") }
        if received.version != follower.version + 1 { fatalError("Applied v\(received.version) after v\(follower.version)") }
        if received.seq == 0 {
            guard case .rekey = received.op, received.clientId.isEmpty else { fatalError("seq 0 on a client op: \(received)") }
        } else if !appliedSeqs.insert(received.seq).inserted {
            fatalError("seq \(received.seq) applied twice")
        }
        do {
            try follower.apply(applied: received)
        } catch {
            fatalError("a follower refused a broadcast op: \(error) \(received)")
        }
    }

    func check() {
        guard let live = core.liveWorkspace("fuzz") else { return }
        let problems = live.invariantViolations(limits: core.settings.limits)
        if !problems.isEmpty { fatalError("invariants broken: \(problems)\n  workspace \(live)") }
        // Every commit was answered at once, so the live state is durable and broadcast.
        if live != follower { fatalError("follower diverged: \(follower) vs \(live)") }
    }
}
