import Foundation
import SwiftProtobuf
import TabsyncCore
import TabsyncProto
import TabsyncTestServer
import TabsyncTestSupport
import Testing

/// The harness's server read over plain HTTP, as an operator would: snapshots and `/metrics`.
extension TestServer {
    /// `GET /v1/workspaces/{id}` decoded, or nil on 404.
    func snapshot(_ id: String) throws -> Workspace? {
        let (status, body) = try httpGet(port: port, path: "/v1/workspaces/\(id)")
        if status == 404 { return nil }
        #expect(status == 200)
        return Workspace(try Tabsync_V1_Snapshot(jsonString: body))
    }

    /// One series of `/metrics` (the first line naming exactly it), 0 when absent.
    func metric(_ series: String) throws -> Double {
        let (_, body) = try httpGet(port: port, path: "/metrics")
        for line in body.split(separator: "\n") where line.hasPrefix(series + " ") {
            return Double(line.dropFirst(series.count + 1)) ?? 0
        }
        return 0
    }

    /// Reads `series` until it is at least `value` or `timeout` seconds have passed; the last value read.
    @discardableResult
    func waitForMetric(_ series: String, atLeast value: Double, timeout: Double = 5) throws -> Double {
        var last = 0.0
        _ = try waitUntil(deadline: .seconds(timeout)) {
            last = try metric(series)
            return last >= value
        }
        return last
    }

    /// Reads `series` until it is at most `value` or `timeout` seconds have passed; the last value read.
    @discardableResult
    func waitForMetric(_ series: String, atMost value: Double, timeout: Double = 5) throws -> Double {
        var last = 0.0
        _ = try waitUntil(deadline: .seconds(timeout)) {
            last = try metric(series)
            return last <= value
        }
        return last
    }
}
