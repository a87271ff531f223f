import Foundation
import Histogram

/// Runs benches: one measured load, or a `--max` search, and builds their reports.
public enum BenchRunner {
    /// Runs `configuration` on the calling thread (it blocks for the whole run) and returns every figure.
    /// A server that refuses or drops connections is reported in the result, not thrown.
    /// - Throws: ``BenchError/cannotStart(_:)`` when the lws context cannot be made.
    public static func run(
        _ configuration: BenchConfiguration, progress: (@Sendable (BenchProgress) -> Void)? = nil
    ) throws(BenchError) -> BenchResult {
        let generator = try LoadGenerator(configuration: configuration, progress: progress)
        var report = BenchReport(
            mode: configuration.mode.rawValue, server: "ws://\(configuration.host):\(configuration.port)",
            workspaces: configuration.workspaces, clientsPerWorkspace: configuration.clientsPerWorkspace,
            connections: configuration.connections, rate: configuration.rate, duration: configuration.duration,
            warmup: configuration.warmup, mix: configuration.mix, ramp: configuration.ramp, seed: configuration.seed,
            ack: LatencySummary(generator.measurement.ack), delivery: LatencySummary(generator.measurement.delivery))
        if configuration.servers.count > 1 { report.servers = configuration.servers.map(\.url) }
        report.loadAverageStart = ProcessSample.loadAverage()
        let pids = configuration.serverPids
        let before = ProcessSample.read(pids: pids)
        if let first = pids.first {
            report.serverProcess = BenchReport.Server(pid: first, pids: pids)
            let unreadable = pids.filter { before[$0] == nil }
            if !unreadable.isEmpty {
                report.serverProcess?.readable = false
                report.notes.append("server pid \(unreadable.map(String.init).joined(separator: ", ")) not readable in /proc: no server CPU or RSS")
            }
        }
        if !configuration.storePids.isEmpty { report.storeProcesses = BenchReport.Store(pids: configuration.storePids) }

        generator.connectAll()
        let connectSeconds = generator.schedule.connectSeconds
        let connectedCount = generator.measurement.connected
        report.connect.attempted = configuration.connections
        report.connect.connected = connectedCount
        report.connect.failed = configuration.connections - connectedCount
        report.connect.failures = generator.measurement.connectFailures
        report.connect.seconds = connectSeconds
        report.connect.perSecond = connectSeconds > 0 ? Double(connectedCount) / connectSeconds : 0
        report.connect.time = LatencySummary(generator.measurement.connectTimes)
        if configuration.checkPresence && connectedCount > 0 {
            let check = generator.checkPresence(timeout: 30)
            report.presenceCheck = check
            if check.correct < check.checked {
                report.notes.append("\(check.checked - check.correct) of \(check.checked) peer views were not correct after \(Int(check.seconds)) s")
            }
        }
        let connected = ProcessSample.read(pids: pids)
        if !pids.isEmpty, report.serverProcess?.readable == true, connected.count == pids.count {
            report.serverProcess?.rssBeforeBytes = ProcessSample.rssBytes(before)
            report.serverProcess?.rssConnectedBytes = ProcessSample.rssBytes(connected)
            if connectedCount > 0 {
                report.serverProcess?.rssPerConnectionBytes =
                    Double(ProcessSample.rssBytes(connected) - ProcessSample.rssBytes(before)) / Double(connectedCount)
            }
        }
        if connectedCount == 0 {
            report.notes.append("no connection reached the server: nothing was measured")
            generator.closeAll()
            report.loadAverageEnd = ProcessSample.loadAverage()
            return BenchResult(report: report, ack: generator.measurement.ack, delivery: generator.measurement.delivery)
        } else if connectedCount < configuration.connections {
            report.notes.append("\(configuration.connections - connectedCount) of \(configuration.connections) connections did not open")
        }

        if configuration.searchMax {
            let search = searchMax(generator, configuration, &report)
            report.trials = search.trials
            report.maxRate = search.best?.rate
            report.p99Bound = configuration.p99Bound
            if let best = search.best {
                report.rate = best.rate
                fill(&report, from: best.measurement)
            } else {
                report.notes.append("no trial met the bound (delivery p99 under \(configuration.p99Bound) ms with every op applied)")
                if let last = search.last { fill(&report, from: last) }
            }
            generator.closeAll()
            report.loadAverageEnd = ProcessSample.loadAverage()
            let histograms = search.best?.measurement ?? search.last
            return BenchResult(report: report, ack: histograms?.ack ?? generator.measurement.ack,
                               delivery: histograms?.delivery ?? generator.measurement.delivery)
        }

        let measurement = measure(generator, rate: configuration.rate, warmup: configuration.warmup,
                                  duration: configuration.duration, pids: configuration)
        fill(&report, from: measurement)
        if generator.schedule.timeUp { report.notes.append("stopped by --time-limit") }
        generator.closeAll()
        let end = ProcessSample.read(pids: pids)
        if !pids.isEmpty, end.count == pids.count { report.serverProcess?.rssEndBytes = ProcessSample.rssBytes(end) }
        report.loadAverageEnd = ProcessSample.loadAverage()
        return BenchResult(report: report, ack: measurement.ack, delivery: measurement.delivery)
    }

    /// Runs on a thread of its own; for async callers (tests).
    public static func runDetached(
        _ configuration: BenchConfiguration, progress: (@Sendable (BenchProgress) -> Void)? = nil
    ) async throws(BenchError) -> BenchResult {
        let outcome: Result<BenchResult, BenchError> = await withCheckedContinuation { continuation in
            let thread = Thread {
                do throws(BenchError) {
                    continuation.resume(returning: .success(try run(configuration, progress: progress)))
                } catch {
                    continuation.resume(returning: .failure(error))
                }
            }
            thread.stackSize = 8 << 20
            thread.start()
        }
        return try outcome.get()
    }

    /// The figures of one measured window, as the report takes them.
    struct MeasuredWindow {
        var rate: Double
        var seconds: Double
        var ops = BenchReport.Ops()
        var ack: Histogram<UInt64>
        var delivery: Histogram<UInt64>
        /// With several servers (else nil).
        var deliverySameNode: Histogram<UInt64>?
        var deliveryCrossNode: Histogram<UInt64>?
        var sendLagP99Ms: Double
        var generatorCPUPercent: Double
        var serverCPUSeconds: Double?
        var storeCPUSeconds: Double?
        var disconnects: [String: Int]
        var serverErrors: [String: Int]
    }

    /// One open-loop window at `rate`; the CPU of `pids`' server and store processes is read at
    /// its start and end.
    static func measure(
        _ generator: LoadGenerator, rate: Double, warmup: Double, duration: Double, pids: BenchConfiguration
    ) -> MeasuredWindow {
        let serverPids = pids.serverPids
        let storePids = pids.storePids
        var startServer: [Int32: ProcessSample] = [:]
        var endServer: [Int32: ProcessSample] = [:]
        var startStore: [Int32: ProcessSample] = [:]
        var endStore: [Int32: ProcessSample] = [:]
        var startCPU = 0.0
        var endCPU = 0.0
        generator.measureStartHook = {
            startCPU = ProcessSample.ownCPUSeconds()
            startServer = ProcessSample.read(pids: serverPids)
            startStore = ProcessSample.read(pids: storePids)
        }
        generator.measureEndHook = {
            endCPU = ProcessSample.ownCPUSeconds()
            endServer = ProcessSample.read(pids: serverPids)
            endStore = ProcessSample.read(pids: storePids)
        }
        generator.load(rate: rate, warmup: warmup, duration: duration)
        let seconds = generator.measuredSeconds
        let figures = generator.measurement
        let ops = figures.ops(seconds: seconds, expectedDeliveries: generator.expectedDeliveries)
        // Every server process at both ends, or no figure (a node that died would hide its CPU).
        let serverCPU = !serverPids.isEmpty && startServer.count == serverPids.count && endServer.count == serverPids.count
            ? ProcessSample.cpuSeconds(from: startServer, to: endServer) : nil
        let storeCPU = storePids.isEmpty ? nil : ProcessSample.cpuSeconds(from: startStore, to: endStore)
        return MeasuredWindow(
            rate: rate, seconds: seconds, ops: ops, ack: figures.ack, delivery: figures.delivery,
            deliverySameNode: generator.configuration.servers.count > 1 ? figures.deliverySameNode : nil,
            deliveryCrossNode: generator.configuration.servers.count > 1 ? figures.deliveryCrossNode : nil,
            sendLagP99Ms: Double(figures.sendLag.valueAtPercentile(99)) / 1000,
            generatorCPUPercent: (endCPU - startCPU) / seconds * 100,
            serverCPUSeconds: serverCPU, storeCPUSeconds: storeCPU, disconnects: figures.disconnects, serverErrors: figures.serverErrors)
    }

    static func fill(_ report: inout BenchReport, from measurement: MeasuredWindow) {
        report.window = measurement.seconds
        report.ops = measurement.ops
        report.ack = LatencySummary(measurement.ack)
        report.delivery = LatencySummary(measurement.delivery)
        report.deliverySameNode = measurement.deliverySameNode.map { LatencySummary($0) }
        report.deliveryCrossNode = measurement.deliveryCrossNode.map { LatencySummary($0) }
        report.disconnects = measurement.disconnects
        report.serverErrors = measurement.serverErrors
        report.generator.cpuPercent = measurement.generatorCPUPercent
        report.generator.sendLagP99Ms = measurement.sendLagP99Ms
        if let cpu = measurement.serverCPUSeconds, report.serverProcess != nil {
            report.serverProcess?.cpuSeconds = cpu
            report.serverProcess?.cpuPercent = cpu / measurement.seconds * 100
            if measurement.ops.deliveries > 0 {
                report.serverProcess?.cpuMicrosPerDelivery = cpu * 1e6 / Double(measurement.ops.deliveries)
            }
            if measurement.ops.applied > 0 {
                report.serverProcess?.cpuMicrosPerOp = cpu * 1e6 / Double(measurement.ops.applied)
            }
        }
        if let cpu = measurement.storeCPUSeconds, report.storeProcesses != nil {
            report.storeProcesses?.cpuSeconds = cpu
            report.storeProcesses?.cpuPercent = cpu / measurement.seconds * 100
            if measurement.ops.applied > 0 { report.storeProcesses?.cpuMicrosPerOp = cpu * 1e6 / Double(measurement.ops.applied) }
        }
        // One thread runs the whole load: near a full core, it (not the server) sets the pace.
        let behind = measurement.rate > 0 && measurement.sendLagP99Ms > 20
        report.generator.bottleneck = measurement.generatorCPUPercent >= 85 || behind
        if measurement.generatorCPUPercent >= 85 {
            report.notes.append(String(format: "the load generator used %.0f%% of a core: it may be the bottleneck", measurement.generatorCPUPercent))
        }
        if behind {
            report.notes.append(String(format: "ops left up to %.1f ms (p99) after their scheduled time: the load generator fell behind", measurement.sendLagP99Ms))
        }
        if measurement.ops.unanswered > 0 {
            report.notes.append("\(measurement.ops.unanswered) ops were never answered")
        }
        if measurement.ops.deliveries < measurement.ops.expectedDeliveries {
            report.notes.append("\(measurement.ops.expectedDeliveries - measurement.ops.deliveries) deliveries missing")
        }
        if !measurement.disconnects.isEmpty {
            report.notes.append("the server closed or dropped \(measurement.disconnects.values.reduce(0, +)) connections during the run")
        }
    }

    struct Search {
        var trials: [BenchReport.Trial] = []
        var best: (rate: Double, measurement: MeasuredWindow)?
        var last: MeasuredWindow?
    }

    /// Feedback search over open-loop trials on the same connections, rates chosen by
    /// ``Schedule/RateSearch``. A trial passes when its delivery p99 (ack p99 with one client per
    /// workspace) is under the bound, ≥ 95% of the offered rate was applied and nothing is unanswered.
    static func searchMax(_ generator: LoadGenerator, _ configuration: BenchConfiguration, _ report: inout BenchReport) -> Search {
        var search = Search()
        var rates = Schedule.RateSearch(start: configuration.rate)
        for _ in 0..<Schedule.RateSearch.maxTrials {
            let rate = rates.rate
            let measurement = measure(generator, rate: rate, warmup: configuration.warmup,
                                      duration: configuration.duration, pids: configuration)
            search.last = measurement
            let p99 = configuration.clientsPerWorkspace > 1
                ? Double(measurement.delivery.valueAtPercentile(99)) / 1000
                : Double(measurement.ack.valueAtPercentile(99)) / 1000
            var reason = "ok"
            if generator.schedule.timeUp {
                search.trials.append(BenchReport.Trial(
                    rate: rate, appliedPerSecond: measurement.ops.appliedPerSecond,
                    deliveriesPerSecond: measurement.ops.deliveriesPerSecond, ackP99: 0, deliveryP99: 0,
                    passed: false, reason: "stopped by --time-limit"))
                report.notes.append("the search was stopped by --time-limit")
                break
            }
            if p99 > configuration.p99Bound { reason = String(format: "p99 %.1f ms over the bound", p99) }
            else if measurement.ops.appliedPerSecond < 0.95 * rate {
                reason = String(format: "only %.0f of %.0f ops/s applied", measurement.ops.appliedPerSecond, rate)
            } else if measurement.ops.unanswered > 0 { reason = "\(measurement.ops.unanswered) unanswered" }
            let passed = reason == "ok"
            search.trials.append(BenchReport.Trial(
                rate: rate, appliedPerSecond: measurement.ops.appliedPerSecond,
                deliveriesPerSecond: measurement.ops.deliveriesPerSecond,
                ackP99: Double(measurement.ack.valueAtPercentile(99)) / 1000,
                deliveryP99: Double(measurement.delivery.valueAtPercentile(99)) / 1000, passed: passed, reason: reason))
            if generator.measurement.connected == 0 || generator.schedule.timeUp { break }
            let verdict: Schedule.RateSearch.Verdict
            if passed {
                verdict = .passed
                search.best = (rate, measurement)
            } else if p99 > configuration.p99Bound && measurement.ops.appliedPerSecond >= 0.95 * rate
                        && measurement.ops.unanswered == 0 {
                verdict = .missedOnlyTheBound
            } else {
                verdict = .failed
            }
            guard rates.record(verdict) else { break }
        }
        return search
    }
}
