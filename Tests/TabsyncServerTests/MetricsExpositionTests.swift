import Foundation
import TabsyncCore
import TabsyncTestServer
import Testing

/// `GET /metrics` from a running server, read by a real Prometheus text-format parser (Python's
/// `prometheus_client`, which scripts/test installs) plus the rules that parser leaves to the
/// reader: HELP and TYPE for every family, counters named `_total`, histograms with ordered
/// cumulative `_bucket{le}` series ending at `+Inf` = `_count`, and a `_sum`.
@Suite("/metrics exposition", .serialized)
struct MetricsExpositionTests {
    @Test func metricsAfterOpsRejectionsAndSessionsParseAsPrometheusText() throws {
        let server = try TestServer()
        defer { server.stop() }
        let a = try seed(server, workspace: "ma", tabs: 3)
        let b = try seed(server, workspace: "mb", tabs: 2)
        let (watcher, _) = try TestClient.joined(port: server.port, workspace: "ma", clientId: "watcher", format: .proto)
        try a.submit(.remove(tabId: "t9"))
        #expect(try a.nextRejected().code == .tabGone)
        try b.submit(.add(tab: .named("t1"), place: .end, activate: false))
        #expect(try b.nextRejected().code == .tabExists)
        try b.submit(.move(tabId: "nope", place: .index(0)))
        #expect(try b.nextRejected().code == .tabGone)
        try a.submit(.activate(.tabId("t2")))
        _ = try a.nextApplied()
        _ = try watcher.nextApplied()

        let (status, body) = try httpGet(port: server.port, path: "/metrics")
        #expect(status == 200)
        let samples = try Self.parse(body)

        #expect(samples["tabsync_connections"] == 3)
        #expect(samples["tabsync_sockets_open"] == 4, "3 sessions and this request's connection")
        #expect(samples["tabsync_workspaces_loaded"] == 2)
        #expect(samples["tabsync_ops_applied_total"] == 6)
        #expect(samples["tabsync_ops_rejected_total{code=\"TAB_GONE\"}"] == 2)
        #expect(samples["tabsync_ops_rejected_total{code=\"TAB_EXISTS\"}"] == 1)
        #expect(samples["tabsync_ops_rejected_total{code=\"LOCKED\"}"] == 0)
        #expect(samples["tabsync_op_latency_seconds_count"] == 6)
        #expect(samples["tabsync_op_latency_seconds_bucket{le=\"+Inf\"}"] == 6)
        #expect((samples["tabsync_commit_batch_ops_count"] ?? 0) >= 1)
        #expect((samples["tabsync_commit_seconds_count"] ?? 0) >= 1)
        #expect((samples["tabsync_messages_out_total"] ?? 0) > 0)
        #expect((samples["tabsync_writes_out_total"] ?? 0) > 0)
        #expect(samples["tabsync_slow_consumer_closes_total"] == 0)
    }

    /// The checker itself: it refuses what a Prometheus server would refuse or misread.
    @Test(arguments: [
        "tabsync_x 1\n",  // no HELP/TYPE
        "# HELP tabsync_x_total X.\n# TYPE tabsync_x_total counter\ntabsync_x_total{code=\"A} 1\n",  // bad label quoting
        "# HELP tabsync_x X.\n# TYPE tabsync_x counter\ntabsync_x 1\n",  // counter without _total
        "# HELP h H.\n# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n",  // not cumulative
        "# HELP h H.\n# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_sum 1\nh_count 1\n",  // no +Inf
        "# HELP h H.\n# TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_sum 1\nh_count 1\n",  // +Inf != count
        "# HELP g G.\n# TYPE g gauge\ng 1",  // no final newline
    ])
    func theCheckerRefusesBrokenExpositions(text: String) throws {
        let error = #expect(throws: ExpositionError.self) { try Self.parse(text) }
        if case .checkerMissing(let why)? = error { Issue.record("the checker could not run: \(why)") }
    }

    /// Why an exposition was refused, or why it could not be checked.
    enum ExpositionError: Error, CustomStringConvertible {
        case invalid(String)
        case checkerMissing(String)

        var description: String {
            switch self {
            case .invalid(let why): "not valid Prometheus text: \(why)"
            case .checkerMissing(let why): why
            }
        }
    }

    /// Parses `text` with `prometheus_client` and checks it; every sample as `name{labels}` → value.
    /// - Throws: `.invalid` with the checker's findings; `.checkerMissing` when python3 or
    ///   prometheus_client is not installed (a failure, never a pass: scripts/test installs them).
    static func parse(_ text: String) throws -> [String: Double] {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-c", checker]
        let input = Pipe()
        let output = Pipe()
        let errors = Pipe()
        process.standardInput = input
        process.standardOutput = output
        process.standardError = errors
        do {
            try process.run()
        } catch {
            throw ExpositionError.checkerMissing("cannot run python3 (\(error)): install it, then run scripts/test")
        }
        input.fileHandleForWriting.write(Data(text.utf8))
        try input.fileHandleForWriting.close()
        let out = output.fileHandleForReading.readDataToEndOfFile()
        let err = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        switch process.terminationStatus {
        case 0:
            return try JSONDecoder().decode([String: Double].self, from: out)
        case 3:
            throw ExpositionError.checkerMissing(err)
        default:
            throw ExpositionError.invalid(err)
        }
    }

    /// Exit 0 with the samples as JSON on stdout; 1 with the problems on stderr; 3 when
    /// prometheus_client is missing.
    static let checker = #"""
        import json, math, sys
        try:
            from prometheus_client.parser import text_string_to_metric_families
        except ImportError:
            sys.stderr.write("python3 has no prometheus_client: scripts/test installs it "
                             "(python3 -m pip install prometheus_client)\n")
            sys.exit(3)
        text = sys.stdin.read()
        problems = []
        if not text.endswith("\n"):
            problems.append("the text does not end with a line feed")
        try:
            families = list(text_string_to_metric_families(text))
        except Exception as error:
            sys.stderr.write("parser: %r\n" % (error,))
            sys.exit(1)
        for line in text.splitlines():
            words = line.split()
            if len(words) == 4 and words[:2] == ["#", "TYPE"] and words[3] == "counter" and not words[2].endswith("_total"):
                problems.append("counter %s is not named ..._total" % words[2])
        samples, seen = {}, set()
        for family in families:
            if family.name in seen:
                problems.append("%s: two families of that name" % family.name)
            seen.add(family.name)
            if family.type not in ("counter", "gauge", "histogram", "summary"):
                problems.append("%s: type %s (no TYPE line, or samples outside their family: %s)"
                                % (family.name, family.type, [s.name for s in family.samples]))
            if not family.documentation:
                problems.append("%s: no HELP text" % family.name)
            if not family.samples:
                problems.append("%s: no samples" % family.name)
            if family.type == "counter":
                for s in family.samples:
                    if not s.name.endswith("_total") or s.name != family.name + "_total":
                        problems.append("counter sample %s is not named %s_total" % (s.name, family.name))
                    if s.value < 0:
                        problems.append("counter %s is negative" % s.name)
            if family.type == "histogram":
                series = {}
                for s in family.samples:
                    rest = tuple(sorted((k, v) for k, v in s.labels.items() if k != "le"))
                    series.setdefault(rest, []).append(s)
                for rest, group in series.items():
                    buckets = [s for s in group if s.name == family.name + "_bucket"]
                    counts = [s for s in group if s.name == family.name + "_count"]
                    sums = [s for s in group if s.name == family.name + "_sum"]
                    if len(counts) != 1 or len(sums) != 1:
                        problems.append("%s%s: needs one _count and one _sum" % (family.name, rest))
                    bounds = [float(s.labels.get("le", "nan")) for s in buckets]
                    if not buckets or bounds[-1] != math.inf:
                        problems.append("%s%s: the last bucket is not le=\"+Inf\"" % (family.name, rest))
                    if any(not (a < b) for a, b in zip(bounds, bounds[1:])):
                        problems.append("%s%s: bucket bounds are not increasing: %s" % (family.name, rest, bounds))
                    values = [s.value for s in buckets]
                    if any(a > b for a, b in zip(values, values[1:])):
                        problems.append("%s%s: buckets are not cumulative: %s" % (family.name, rest, values))
                    if buckets and counts and values[-1] != counts[0].value:
                        problems.append("%s%s: +Inf bucket %s != _count %s"
                                        % (family.name, rest, values[-1], counts[0].value))
            for s in family.samples:
                labels = ",".join('%s="%s"' % (k, v) for k, v in sorted(s.labels.items()))
                key = s.name + ("{%s}" % labels if labels else "")
                if key in samples:
                    problems.append("%s: the same series twice" % key)
                samples[key] = s.value
        if problems:
            sys.stderr.write("\n".join(problems) + "\n")
            sys.exit(1)
        json.dump(samples, sys.stdout)
        """#
}
