import Foundation
import Histogram

extension BenchResult {
    /// The final table, for people.
    public var table: String {
        let r = report
        func f(_ value: Double, _ digits: Int = 1) -> String { String(format: "%.\(digits)f", value) }
        func mib(_ bytes: Int) -> String { f(Double(bytes) / 1_048_576, 1) + " MiB" }
        func codes(_ counts: [String: Int]) -> String {
            counts.isEmpty ? "none" : counts.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
        }
        var rows: [(String, String)] = []
        rows.append(("server", "\((r.servers ?? [r.server]).joined(separator: ", ")) (\(r.mode))"
            + ((r.servers?.count ?? 1) > 1 ? ", connections round-robin" : "")))
        rows.append(("load", "\(r.workspaces) workspaces × \(r.clientsPerWorkspace) clients, \(f(r.rate, 0)) ops/s, \(f(r.window, 1)) s measured"))
        rows.append(("load average", r.loadAverageStart.map { f($0, 2) }.joined(separator: " ")))
        rows.append(("connections", "\(r.connect.connected)/\(r.connect.attempted) in \(f(r.connect.seconds, 2)) s (\(f(r.connect.perSecond, 0))/s)"
            + (r.connect.failures.isEmpty ? "" : "; failed: \(codes(r.connect.failures))")))
        rows.append(("connect time", "p50 \(f(r.connect.time.p50, 2)) ms, p99 \(f(r.connect.time.p99, 2)) ms, max \(f(r.connect.time.max, 2)) ms"))
        if r.rate > 0 || r.maxRate != nil {
            rows.append(("ops", "sent \(r.ops.sent), applied \(r.ops.applied), rejected \(r.ops.rejected), unanswered \(r.ops.unanswered)"
                + (r.ops.notSent > 0 ? ", not sent \(r.ops.notSent)" : "")))
            rows.append(("rejected by code", codes(r.ops.rejectedByCode)))
            rows.append(("ops applied/s", f(r.ops.appliedPerSecond, 0)))
            rows.append(("deliveries", "\(r.ops.deliveries) of \(r.ops.expectedDeliveries) expected, \(f(r.ops.deliveriesPerSecond, 0))/s, \(f(r.ops.bytesPerDelivery, 0)) B each"))
            var latencies = [("ack latency", r.ack), ("delivery latency", r.delivery)]
            if let same = r.deliverySameNode, let cross = r.deliveryCrossNode {
                latencies += [("  same node", same), ("  cross node", cross)]
            }
            for (name, summary) in latencies {
                rows.append((name, "p50 \(f(summary.p50, 2)) ms, p90 \(f(summary.p90, 2)), p99 \(f(summary.p99, 2)), p99.9 \(f(summary.p999, 2)), max \(f(summary.max, 2)) ms"))
            }
        }
        if let check = r.presenceCheck {
            rows.append(("presence views", "\(check.correct) of \(check.checked) correct after \(f(check.seconds, 2)) s "
                + "(at most \(check.namedMax) named; \(check.messages) presence messages)"))
        }
        rows.append(("disconnects", codes(r.disconnects)))
        if !r.serverErrors.isEmpty { rows.append(("server errors", codes(r.serverErrors))) }
        if let server = r.serverProcess, server.readable {
            rows.append(("server RSS", "\(mib(server.rssBeforeBytes)) before, \(mib(server.rssConnectedBytes)) connected (\(f(server.rssPerConnectionBytes / 1024, 2)) KiB per connection)"))
            var cpu = "\(f(server.cpuPercent, 1))% of a core"
            if let perDelivery = server.cpuMicrosPerDelivery { cpu += ", \(f(perDelivery, 2)) µs per delivery" }
            if let perOp = server.cpuMicrosPerOp { cpu += ", \(f(perOp, 1)) µs per op" }
            rows.append((server.pids.count > 1 ? "server CPU (\(server.pids.count) processes)" : "server CPU", cpu))
        }
        if let store = r.storeProcesses {
            var cpu = "\(f(store.cpuPercent, 1))% of a core (\(store.pids.count) processes)"
            if let perOp = store.cpuMicrosPerOp { cpu += ", \(f(perOp, 1)) µs per op" }
            rows.append(("store CPU", cpu))
        }
        rows.append(("generator CPU", "\(f(r.generator.cpuPercent, 1))% of a core, send lag p99 \(f(r.generator.sendLagP99Ms, 2)) ms"
            + (r.generator.bottleneck ? " (BOTTLENECK)" : "")))
        if let trials = r.trials {
            for (number, trial) in trials.enumerated() {
                rows.append(("trial \(number + 1)", "\(f(trial.rate, 0)) ops/s → \(f(trial.appliedPerSecond, 0)) applied/s, ack p99 \(f(trial.ackP99, 2)) ms, delivery p99 \(f(trial.deliveryP99, 2)) ms: \(trial.passed ? "pass" : "fail (\(trial.reason))")"))
            }
            rows.append(("max", r.maxRate.map { "\(f($0, 0)) ops/s with p99 under \(f(r.p99Bound ?? 0, 1)) ms" } ?? "none"))
        }
        for note in r.notes { rows.append(("note", note)) }
        let width = rows.map(\.0.count).max() ?? 0
        return rows.map { $0.0.padding(toLength: width, withPad: " ", startingAt: 0) + "  " + $0.1 }.joined(separator: "\n") + "\n"
    }

    /// Every figure as pretty JSON.
    public func json() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        return try encoder.encode(report)
    }

    /// The percentile distributions (HdrHistogram's text format, values in milliseconds), ack then delivery.
    public var hgrm: String {
        var text = ""
        for (name, histogram) in [("ack", ack), ("delivery", delivery)] {
            text += "# \(name) latency (ms), \(report.mode), \(report.workspaces)×\(report.clientsPerWorkspace), \(Int(report.rate)) ops/s\n"
            var stream = StringStream()
            histogram.outputPercentileDistribution(to: &stream, outputValueUnitScalingRatio: 1000)
            text += stream.text + "\n"
        }
        return text
    }

    /// An SVG of both latency percentile curves: x = percentile on a log scale of 1/(1−p) (50% to
    /// 99.999%), y = milliseconds.
    public var svg: String {
        let (width, height, left, right, top, bottom) = (800.0, 480.0, 70.0, 20.0, 40.0, 50.0)
        let plotWidth = width - left - right
        let plotHeight = height - top - bottom
        let maxX = 5.0  // log10(1/(1-0.99999))
        func points(_ histogram: Histogram<UInt64>) -> [(Double, Double)] {
            guard histogram.totalCount > 0 else { return [] }
            var result: [(Double, Double)] = []
            var p = 0.0
            while p <= 0.99999 {
                let x = log10(1 / (1 - p))
                result.append((x, Double(histogram.valueAtPercentile(p * 100)) / 1000))
                p = 1 - (1 - p) / 1.25
            }
            result.append((maxX, Double(histogram.max) / 1000))
            return result
        }
        let curves = [("ack", "#1f77b4", points(ack)), ("delivery", "#d62728", points(delivery))]
        let maxY = max(0.001, curves.flatMap { $0.2.map(\.1) }.max() ?? 1) * 1.05
        func sx(_ x: Double) -> Double { left + x / maxX * plotWidth }
        func sy(_ y: Double) -> Double { top + plotHeight - y / maxY * plotHeight }
        func f(_ value: Double) -> String { String(format: "%.1f", value) }
        var svg = """
            <svg xmlns="http://www.w3.org/2000/svg" width="\(Int(width))" height="\(Int(height))" font-family="sans-serif" font-size="12">
            <rect width="100%" height="100%" fill="white"/>
            <text x="\(f(width / 2))" y="20" text-anchor="middle" font-size="14">tabsync bench (\(report.mode)): \(report.workspaces)×\(report.clientsPerWorkspace) clients, \(Int(report.rate)) ops/s — latency by percentile</text>
            <line x1="\(f(left))" y1="\(f(top + plotHeight))" x2="\(f(left + plotWidth))" y2="\(f(top + plotHeight))" stroke="black"/>
            <line x1="\(f(left))" y1="\(f(top))" x2="\(f(left))" y2="\(f(top + plotHeight))" stroke="black"/>

            """
        for (x, label) in [(0.0, "0%"), (1.0, "90%"), (2.0, "99%"), (3.0, "99.9%"), (4.0, "99.99%"), (5.0, "99.999%")] {
            svg += "<line x1=\"\(f(sx(x)))\" y1=\"\(f(top))\" x2=\"\(f(sx(x)))\" y2=\"\(f(top + plotHeight))\" stroke=\"#ddd\"/>\n"
            svg += "<text x=\"\(f(sx(x)))\" y=\"\(f(top + plotHeight + 18))\" text-anchor=\"middle\">\(label)</text>\n"
        }
        for step in 0...5 {
            let y = maxY * Double(step) / 5
            svg += "<line x1=\"\(f(left))\" y1=\"\(f(sy(y)))\" x2=\"\(f(left + plotWidth))\" y2=\"\(f(sy(y)))\" stroke=\"#eee\"/>\n"
            svg += "<text x=\"\(f(left - 6))\" y=\"\(f(sy(y) + 4))\" text-anchor=\"end\">\(String(format: "%.2f", y))</text>\n"
        }
        svg += "<text x=\"\(f(left + plotWidth / 2))\" y=\"\(f(height - 10))\" text-anchor=\"middle\">percentile</text>\n"
        svg += "<text transform=\"translate(16 \(f(top + plotHeight / 2))) rotate(-90)\" text-anchor=\"middle\">latency (ms)</text>\n"
        for (index, (name, color, curve)) in curves.enumerated() where !curve.isEmpty {
            let path = curve.map { "\(f(sx($0.0))),\(f(sy($0.1)))" }.joined(separator: " ")
            svg += "<polyline fill=\"none\" stroke=\"\(color)\" stroke-width=\"2\" points=\"\(path)\"/>\n"
            svg += "<text x=\"\(f(left + 12))\" y=\"\(f(top + 16 + Double(index) * 16))\" fill=\"\(color)\">\(name)</text>\n"
        }
        return svg + "</svg>\n"
    }

    /// Writes the files `configuration` asks for (`--json`, `--hgrm`, `--plot`).
    public func writeFiles(_ configuration: BenchConfiguration) throws(BenchError) {
        func write(_ data: Data, _ path: String) throws(BenchError) {
            do { try data.write(to: URL(fileURLWithPath: path)) } catch {
                throw .cannotWrite(path: path, reason: "\(error.localizedDescription)")
            }
        }
        if let path = configuration.jsonPath {
            do { try write(try json(), path) } catch let error as BenchError { throw error } catch {
                throw .cannotWrite(path: path, reason: "\(error)")
            }
        }
        if let path = configuration.hgrmPath { try write(Data(hgrm.utf8), path) }
        if let path = configuration.plotPath { try write(Data(svg.utf8), path) }
    }
}

/// A `TextOutputStream` into a string.
struct StringStream: TextOutputStream {
    var text = ""
    mutating func write(_ string: String) { text += string }
}
