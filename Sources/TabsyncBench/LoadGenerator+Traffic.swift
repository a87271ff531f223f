import TabsyncCore
import TabsyncProto

/// What the bench sends and how the answers count: Hello and Welcome, one op per intended send time,
/// and every `Applied`, `Rejected` and `Error` matched to the op it answers. The transport
/// (LoadGenerator.swift) calls in here; nothing here touches libwebsockets.
extension LoadGenerator {
    // MARK: connection events

    /// The WebSocket handshake is done: returns the Hello to send (tabsync subprotocols), or nil
    /// when the connection is ready at once (mirror).
    func established(_ connection: BenchConnection) -> [UInt8]? {
        guard let format else {
            becameReady(connection)
            return nil
        }
        connection.state = .open
        let hello = Tabsync_V1_ClientMessage(hello: Tabsync_V1_Hello(
            workspace: workspaceNames[connection.workspace], clientId: "c\(connection.index)", clientName: "bench",
            presenceDeltas: configuration.presenceDeltas))
        return format.encode(hello)
    }

    func connectFailed(_ connection: BenchConnection, reason: String) {
        connection.state = .closed
        measurement.connectFailures[reason, default: 0] += 1
    }

    /// The connection is gone (`code`: the server's close code, or 1006 when it just dropped).
    func closed(_ connection: BenchConnection, code: UInt16) {
        if !connection.closing {
            if connection.state == .ready {
                measurement.disconnects["\(code)", default: 0] += 1
            } else {
                measurement.connectFailures["closed \(code) before ready", default: 0] += 1
            }
        }
        if connection.state == .ready { measurement.connected -= 1 }
        connection.state = .closed
    }

    private func becameReady(_ connection: BenchConnection) {
        connection.state = .ready
        let now = monotonicNanos()
        measurement.becameReady(connectMicros: max(1, (now - connection.connectStart) / 1000))
    }

    // MARK: sending

    /// Submits the op intended at `intended` (round-robin over workspaces, a random ready client of
    /// the workspace); counts it as not sent when the workspace has no ready client.
    func submitNext(intended: UInt64, now: UInt64) {
        let workspace = schedule.nextWorkspace(of: configuration.workspaces)
        let base = workspace * configuration.clientsPerWorkspace
        let count = configuration.clientsPerWorkspace
        var pick = Int(random.next() % UInt64(count))
        var tries = 0
        while connections[base + pick].state != .ready && tries < count {
            pick = (pick + 1) % count
            tries += 1
        }
        let connection = connections[base + pick]
        let measuring = schedule.isMeasured(intended)
        guard connection.state == .ready, connection.hasSocket else {
            if measuring { measurement.notSent += 1 }
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
        connection.recordSend(intended: intended, flag: flag, tab: tab)
        send(frame, on: connection)
        if measuring { measurement.sentMeasured(lateMicros: max(1, (now &- intended) / 1000)) }
    }

    // MARK: receiving

    /// One whole message from the server (or the mirror).
    func received(_ connection: BenchConnection, _ bytes: UnsafeRawBufferPointer) {
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
            measurement.presenceMessages += 1
            if configuration.checkPresence { receivedPresence(connection, bytes) }
        case .other:
            guard let format, let message = try? format.decodeServerMessage(Array(bytes)) else { return }
            switch message.message {
            case .welcome(let welcome)?:
                guard connection.state == .open else { return }
                connection.seq = max(connection.seq, welcome.lastSeq)
                connection.sessionId = UInt64(welcome.sessionID) ?? 0
                becameReady(connection)
            case .rejected(let rejected):
                rejectedAnswer(at: connection, seq: rejected.seq, code: rejected.code)
            case .error(let error):
                let name = errorCodeName(error.code)
                measurement.serverErrors[name, default: 0] += 1
                if connection.state == .open { measurement.connectFailures["server Error \(name)", default: 0] += 1 }
            case .applied(let applied):
                // An Applied the scan passed over (it recognises every one the server sends: see
                // WireScanTests), counted the same way.
                let client = Array(applied.clientID.utf8).withUnsafeBytes { WireScan.clientIndex($0) }
                self.applied(at: connection, from: client, seq: applied.seq, size: bytes.count)
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
            measurement.totalApplied += 1
            if let kind = WorkspaceModel.Kind(rawValue: flag & BenchConnection.kindMask) {
                models[submitter.workspace].applied(kind: kind, tab: submitter.tabs[index])
            }
            if flag & BenchConnection.measured != 0 {
                measurement.acknowledged(micros: micros, workspace: submitter.workspace)
            }
        } else if flag & BenchConnection.measured != 0 {
            measurement.delivered(
                micros: micros, bytes: size,
                sameNode: configuration.servers.count > 1 ? submitter.node == receiver.node : nil)
        }
    }

    private func rejectedAnswer(at connection: BenchConnection, seq: UInt64, code: Tabsync_V1_ErrorCode) {
        guard seq >= 1, Int(seq - 1) < connection.sendTimes.count else { return }
        let index = Int(seq - 1)
        let flag = connection.flags[index]
        guard flag & BenchConnection.answered == 0 else { return }
        // Refused, so it is not counted among the applied ones.
        connection.flags[index] = flag | BenchConnection.answered | BenchConnection.refused
        if let kind = WorkspaceModel.Kind(rawValue: flag & BenchConnection.kindMask) {
            models[connection.workspace].rejected(kind: kind, tab: connection.tabs[index])
        }
        if flag & BenchConnection.measured != 0 {
            measurement.refused(code: errorCodeName(code))
        }
    }
}

/// The wire name of a proto error code (`TAB_GONE`), or its number when unknown.
func errorCodeName(_ code: Tabsync_V1_ErrorCode) -> String {
    ErrorCode(code)?.wireName ?? "code \(code.rawValue)"
}
