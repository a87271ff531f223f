import Foundation

/// What a churn run did and found.
public struct ChurnResult: Sendable {
    /// Ops acknowledged (an `Applied` seen), each checked against the server's snapshot.
    public var acknowledged: Int
    public var sent: Int
    public var resent: Int
    public var connects: Int
    public var drops: Int
    public var midSubmitDrops: Int
    public var stalls: Int
    public var welcomes: Int
    public var recovered: Int
    public var connectFailures: Int
    public var serverCloses: [String: Int]
    public var rejected: [String: Int]
    public var workspacesVerified: Int
    /// Every check that failed, one line each (empty: passed).
    public var problems: [String]

    public var passed: Bool { problems.isEmpty }

    public var summary: String {
        var lines = [
            "churn: \(acknowledged) ops acknowledged and checked (\(sent) sent, \(resent) sent again after a reconnect)",
            "  connects \(connects), welcomes \(welcomes) (\(recovered) resumed from missed ops), connect failures \(connectFailures)",
            "  drops \(drops) (\(midSubmitDrops) right after a submit), stalled readers \(stalls)",
            "  server closes \(serverCloses.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(separator: ", "))",
            "  rejected \(rejected.isEmpty ? "none" : rejected.map { "\($0.key): \($0.value)" }.joined(separator: ", "))",
            "  workspaces verified against the server's snapshot: \(workspacesVerified)",
        ]
        if problems.isEmpty {
            lines.append("churn check passed: every acknowledged op is present exactly once")
        } else {
            lines.append("churn check FAILED: \(problems.count) problem(s)")
            lines += problems.prefix(20).map { "  " + $0 }
        }
        return lines.joined(separator: "\n") + "\n"
    }
}

/// Runs a churn bench: `duration` seconds of ops with drops, stalls and reconnects (the server may
/// restart meanwhile), then a settle (every client back, every op answered), then a check of each
/// workspace's snapshot against the acknowledged ops.
public enum ChurnRunner {
    /// Runs on the calling thread for the whole run. `log` gets a progress line every 10 s.
    /// - Throws: ``BenchError/cannotStart(_:)``, ``BenchError/cannotWrite(path:reason:)`` (the ledger).
    public static func run(_ configuration: ChurnConfiguration, log: @escaping (String) -> Void) throws(BenchError) -> ChurnResult {
        let generator = try ChurnGenerator(configuration: configuration, log: log)
        generator.phaseStart = monotonicNanos()
        generator.lastTick = generator.phaseStart
        generator.lastReport = generator.phaseStart
        generator.run { generator.phase == .done }
        for client in generator.clients where client.wsi != nil { generator.drop(client) }
        let verified = generator.clients.filter(\.verified).count
        var result = ChurnResult(
            acknowledged: generator.ledger.acknowledged, sent: generator.stats.sent, resent: generator.stats.resent,
            connects: generator.stats.connects, drops: generator.stats.drops, midSubmitDrops: generator.stats.midSubmitDrops,
            stalls: generator.stats.stalls, welcomes: generator.stats.welcomes, recovered: generator.stats.recovered,
            connectFailures: generator.stats.connectFailures, serverCloses: generator.stats.serverCloses,
            rejected: generator.stats.rejected, workspacesVerified: verified, problems: generator.ledger.problems)
        if let path = configuration.ledgerPath {
            do {
                try generator.ledgerJSON(result).write(to: URL(fileURLWithPath: path), atomically: true, encoding: .utf8)
            } catch {
                result.problems.append("cannot write the ledger \(path)")
                throw .cannotWrite(path: path, reason: "\(error)")
            }
        }
        return result
    }
}

extension ChurnGenerator {
    // MARK: the tick (every 5 ms)

    func tick() {
        let now = monotonicNanos()
        let dt = Double(now &- lastTick) / 1e9
        lastTick = now
        let elapsed = Double(now &- phaseStart) / 1e9
        let base = configuration.base
        var opens = max(1, Int(base.ramp * dt))
        for client in clients where client.state == .waiting && now >= client.reconnectAt && phase != .done {
            if client.verifying && client.verified { continue }
            // A storm's clients pace only their first connect (--ramp): their reconnects go when
            // their back-off says, as real clients' do.
            if !configuration.storm || client.epoch.isEmpty {
                guard opens > 0 else { continue }
                opens -= 1
            }
            open(client, now: now)
        }
        welcomeLog?.flush()
        switch phase {
        case .churn:
            if !configuration.storm { churnTick(now: now, dt: dt) }
            if elapsed >= base.duration { startSettling(now: now) }
        case .settle:
            let busy = clients.contains { $0.state != .ready || !$0.pending.isEmpty }
            if !busy || elapsed >= configuration.settle {
                if busy {
                    let unanswered = clients.reduce(0) { $0 + $1.pending.count }
                    let away = clients.filter { $0.state != .ready }.count
                    ledger.problem("settle: after \(Int(elapsed)) s, \(unanswered) ops unanswered and \(away) clients not resumed")
                }
                startVerifying(now: now)
            }
        case .verify:
            let left = clients.contains { $0.verifying && !$0.verified }
            if !left || elapsed >= 60 {
                if left {
                    ledger.problem("verify: \(clients.filter { $0.verifying && !$0.verified }.count) workspaces gave no snapshot in 60 s")
                }
                phase = .done
                wake()
                return
            }
        case .done:
            return
        }
        if now &- lastReport >= 10_000_000_000 {
            lastReport = now
            let ready = clients.filter { $0.state == .ready }.count
            let pending = clients.reduce(0) { $0 + $1.pending.count }
            log("churn \(phase) \(Int(elapsed))s: ready \(ready)/\(clients.count), acknowledged \(ledger.acknowledged), "
                + "sent \(stats.sent), pending \(pending), drops \(stats.drops), connects \(stats.connects), "
                + "connect failures \(stats.connectFailures), closes \(stats.serverCloses), problems \(ledger.problems.count)")
        }
        armTick()
    }

    private func churnTick(now: UInt64, dt: Double) {
        for client in clients where client.state == .ready {
            if client.dropAt != 0 && now >= client.dropAt {
                if Double(random.next() % 1000) / 1000 < configuration.midSubmit {
                    submit(on: client)
                    stats.midSubmitDrops += 1
                }
                stats.drops += 1
                drop(client)
                client.backoffSeconds = 0
                client.reconnectAt = now + UInt64(50_000_000 + random.next() % 950_000_000)
                continue
            }
            if client.stallAt != 0 && now >= client.stallAt && !client.stalled {
                setReading(client, paused: true)
                client.stallAt = 0
                client.stallUntil = now + UInt64(configuration.stall * 1e9)
                stats.stalls += 1
            } else if client.stalled && now >= client.stallUntil {
                setReading(client, paused: false)
            }
        }
        opsDue += configuration.base.rate * dt
        while opsDue >= 1 {
            opsDue -= 1
            var sent = false
            for _ in 0..<8 {
                let client = clients[Int(random.next() % UInt64(clients.count))]
                if client.state == .ready && client.pending.count < 50 {
                    submit(on: client)
                    sent = true
                    break
                }
            }
            if !sent { stats.notSent += 1 }
        }
    }

    private func startSettling(now: UInt64) {
        log("churn: \(Int(configuration.base.duration)) s of churn done; settling (every client resumes, every op answered)")
        phase = .settle
        phaseStart = now
        for client in clients {
            if client.stalled { setReading(client, paused: false) }
            client.dropAt = 0
            client.stallAt = 0
            if client.state == .waiting { client.reconnectAt = min(client.reconnectAt, now + 100_000_000) }
        }
    }

    private func startVerifying(now: UInt64) {
        log("churn: settled; checking each workspace's snapshot against the acknowledged ops")
        phase = .verify
        phaseStart = now
        var chosen = Set<Int>()
        for client in clients where !chosen.contains(client.workspace) {
            chosen.insert(client.workspace)
            drop(client)
            client.verifying = true
            client.reconnectAt = now
        }
    }

    // MARK: the ledger file

    /// Every acknowledged op and each workspace's expected state, for checks outside the bench
    /// (scripts/soak compares them with the HTTP snapshot and the store's op log).
    func ledgerJSON(_ result: ChurnResult) -> String {
        func quote(_ text: String) -> String {
            var out = "\""
            for scalar in text.unicodeScalars {
                switch scalar {
                case "\"": out += "\\\""
                case "\\": out += "\\\\"
                default:
                    if scalar.value < 0x20 { out += String(format: "\\u%04x", scalar.value) } else { out.unicodeScalars.append(scalar) }
                }
            }
            return out + "\""
        }
        var out = "{\"acknowledged\":\(result.acknowledged),\"passed\":\(result.passed),\"problems\":["
        out += result.problems.map(quote).joined(separator: ",")
        out += "],\"workspaces\":[\n"
        for (index, workspace) in ledger.workspaces.enumerated() {
            let expected = ledger.expected(workspace: index)
            if index > 0 { out += ",\n" }
            out += "{\"name\":\(quote(workspaceNames[index])),\"epoch\":\(quote(workspace.epoch ?? "")),\"version\":\(expected.version),"
            out += "\"serverOps\":\(workspace.serverVersions.count),\"tabs\":{"
            out += expected.tabs.sorted { $0.key < $1.key }.map { "\(quote($0.key)):\(quote($0.value))" }.joined(separator: ",")
            out += "},\"ops\":["
            out += workspace.entries.map { "[\"c\($0.client)\",\($0.seq),\($0.version)]" }.joined(separator: ",")
            out += "]}"
        }
        out += "\n]}\n"
        return out
    }
}

extension ChurnRunner {
    /// ``run(_:log:)`` on a thread of its own; for async callers (tests).
    public static func runDetached(
        _ configuration: ChurnConfiguration, log: @escaping @Sendable (String) -> Void = { _ in }
    ) async throws(BenchError) -> ChurnResult {
        let outcome: Result<ChurnResult, BenchError> = await withCheckedContinuation { continuation in
            let thread = Thread {
                do throws(BenchError) {
                    continuation.resume(returning: .success(try run(configuration, log: log)))
                } catch {
                    continuation.resume(returning: .failure(error))
                }
            }
            thread.stackSize = 8 << 20
            thread.start()
        }
        return try outcome.get()
    }
}
