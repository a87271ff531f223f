import CFuzzerDriver
import SwiftProtobuf
import TabsyncCore
import TabsyncProto

/// libFuzzer target `wire`: client frames in either subprotocol, through the server's path for them
/// (decode → Hello picks the client → `Submit` converted to a core op → `Sequencer.submit`, or
/// `Sequencer.refuse` when the op does not convert), against one live in-memory workspace.
/// No sockets: this is `Server.Loop.received` without the session plumbing.
///
/// Input (see ``FuzzInput``): one header byte (format, limits, tabs to start with), then frames,
/// each a 2-byte big-endian length and that many bytes.
///
/// Properties, checked after every frame (a violation traps, libFuzzer reports a crash):
/// - the workspace invariants hold (`Workspace.invariantViolations`: ids and keys unique, keys valid
///   and sorted, `activeTabId` empty exactly when there are no tabs and else an existing tab,
///   count ≤ `maxTabs`);
/// - an applied outcome is contiguous from the previous version, ends with the submitter's op (a
///   rekey made by the server only before it), and no (client, seq) is applied twice;
/// - a refused, repeated or ignored seq changes nothing in the workspace;
/// - every applied op survives the broadcast round trip (core → `Applied` → frame in this format →
///   decode → core) unchanged, and a follower applying those ops has the same workspace.
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

/// The server side of the run: the sequencer, the client the last Hello named, and a follower
/// workspace that sees only what the server broadcasts.
struct WireState {
    let format: WireFormat
    var sequencer: Sequencer
    var follower: Workspace
    var clientId = "fuzz-client"
    var appliedSeqs: Set<String> = []

    init(input: FuzzInput) {
        format = input.format
        sequencer = Sequencer(workspace: Workspace(id: "fuzz", epoch: "e1"), limits: input.limits)
        follower = sequencer.workspace
        for n in 0..<min(input.startTabs, input.limits.maxTabs) {
            submit(seq: UInt64(n + 1), baseVersion: 0,
                   op: .add(tab: Tab(id: "s\(n)", title: "start \(n)"), place: .end, activate: n == 0))
        }
    }

    mutating func receive(_ frame: [UInt8]) {
        // An undecodable frame closes the session (1007); the next frame is another session's.
        guard let message = try? format.decodeClientMessage(frame) else { return }
        switch message.message {
        case .hello(let hello)?:
            if Validation.isValidClientId(hello.clientID) { clientId = hello.clientID }
        case .submit(let submit)?:
            do throws(ConversionError) {
                guard submit.hasOp else { throw .opKindMissing }
                let op = try Operation(submit.op)
                self.submit(seq: submit.seq, baseVersion: submit.baseVersion, op: op)
            } catch {
                refuse(seq: submit.seq, error: error.opError)
            }
        case .focus?, nil:
            break
        }
    }

    mutating func submit(seq: UInt64, baseVersion: UInt64, op: Operation) {
        let before = sequencer.workspace
        let lastSeq = sequencer.lastSeq(of: clientId)
        let outcome = sequencer.submit(clientId: clientId, seq: seq, baseVersion: baseVersion, op: op)
        check(outcome, before: before, lastSeq: lastSeq, seq: seq, op: op)
    }

    mutating func refuse(seq: UInt64, error: OpError) {
        let before = sequencer.workspace
        let lastSeq = sequencer.lastSeq(of: clientId)
        let outcome = sequencer.refuse(clientId: clientId, seq: seq, error: error)
        if case .applied = outcome { fail("refuse applied an op", outcome) }
        check(outcome, before: before, lastSeq: lastSeq, seq: seq, op: nil)
    }

    mutating func check(_ outcome: Sequencer.Outcome, before: Workspace, lastSeq: UInt64, seq: UInt64, op: Operation?) {
        let workspace = sequencer.workspace
        let problems = workspace.invariantViolations(limits: sequencer.limits)
        if !problems.isEmpty { fail("invariants broken: \(problems)", outcome, op) }
        switch outcome {
        case .applied(let ops):
            guard let last = ops.last else { fail("applied nothing", outcome, op) }
            if seq <= lastSeq { fail("applied an already consumed seq \(seq) (last \(lastSeq))", outcome, op) }
            if last.clientId != clientId || last.seq != seq { fail("last applied op is not the submitter's", outcome, op) }
            if !appliedSeqs.insert("\(clientId) \(seq)").inserted { fail("(client, seq) applied twice", outcome, op) }
            for (n, applied) in ops.enumerated() where applied.version != before.version + UInt64(n) + 1 {
                fail("versions not contiguous from \(before.version)", outcome, op)
            }
            for applied in ops.dropLast() {
                guard case .rekey = applied.op, applied.clientId.isEmpty, applied.seq == 0 else {
                    fail("an op before the submitter's that is not a server rekey", outcome, op)
                }
            }
            if workspace.version != last.version { fail("workspace version is not the last applied op's", outcome, op) }
            if workspace.activeTabId != last.activeTabId { fail("active tab differs from the applied op's", outcome, op) }
            if let missed = sequencer.missed(after: before.version), missed != ops { fail("missed(after:) differs", outcome, op) }
            for applied in ops { broadcast(applied) }
        case .rejected, .answeredAgain, .ignored:
            if workspace != before { fail("a refused or repeated seq changed the workspace", outcome, op) }
        }
        if seq > 0 && sequencer.lastSeq(of: clientId) < seq { fail("seq \(seq) not consumed", outcome, op) }
        if follower != workspace { fail("follower diverged: \(follower) vs \(workspace)", outcome, op) }
        if let first = sequencer.log.first {
            for (n, applied) in sequencer.log.enumerated() where applied.version != first.version + UInt64(n) {
                fail("log not contiguous", outcome, op)
            }
            if sequencer.log.last!.version != workspace.version { fail("log does not end at the workspace version", outcome, op) }
        }
    }

    /// What a client of this format receives for `applied`, decoded and applied to the follower.
    mutating func broadcast(_ applied: AppliedOp) {
        let bytes = format.encode(Tabsync_V1_ServerMessage(applied: applied))
        let message: Tabsync_V1_ServerMessage
        do {
            message = try format.decodeServerMessage(bytes)
        } catch {
            fatalError("an Applied the server encoded does not decode: \(error) \(applied)")
        }
        guard case .applied(let wire)? = message.message else { fatalError("Applied decoded as \(message)") }
        let received: AppliedOp
        do {
            received = try AppliedOp(wire)
        } catch {
            fatalError("an Applied the server encoded does not convert: \(error) \(applied)")
        }
        if received != applied { fatalError("Applied round trip changed it: \(applied) -> \(received)") }
        do {
            try follower.apply(applied: received)
        } catch {
            fatalError("a follower refused a broadcast op: \(error) \(received)")
        }
    }

    func fail(_ what: String, _ outcome: Sequencer.Outcome, _ op: Operation? = nil) -> Never {
        fatalError("\(what)\n  client \(clientId) op \(op.map { "\($0)" } ?? "-")\n  outcome \(outcome)\n  workspace \(sequencer.workspace)")
    }
}
