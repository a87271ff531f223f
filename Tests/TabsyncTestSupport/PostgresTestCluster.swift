import Foundation
import Testing

/// The PostgreSQL cluster `scripts/test` starts (`scripts/postgres start`), as every test that
/// needs one finds it: its URL is in `TABSYNC_TEST_POSTGRES_URL`. scripts/test also sets
/// `TABSYNC_TEST_POSTGRES_REQUIRED=1`, so a missing URL fails those tests there; a plain `swift
/// test` without it skips them. The one copy of that lookup and of the script runner.
package enum PostgresTestCluster {
    package static let url = ProcessInfo.processInfo.environment["TABSYNC_TEST_POSTGRES_URL"].flatMap { $0.isEmpty ? nil : $0 }
    package static let required = ProcessInfo.processInfo.environment["TABSYNC_TEST_POSTGRES_REQUIRED"] == "1"
    /// Run the PostgreSQL tests (they fail with a clear message when required and unconfigured).
    package static let isEnabled = url != nil || required
    package static let skipReason: Comment =
        "TABSYNC_TEST_POSTGRES_URL is unset: PostgreSQL tests skipped (scripts/test starts a cluster and sets it)"

    package struct Unconfigured: Error, CustomStringConvertible {
        package var description: String {
            "TABSYNC_TEST_POSTGRES_URL is unset but TABSYNC_TEST_POSTGRES_REQUIRED=1: start a cluster with "
                + "`eval \"$(scripts/postgres start)\"` (scripts/test does) so the PostgreSQL tests run"
        }
    }

    package static func requireURL() throws -> String {
        guard let url else { throw Unconfigured() }
        return url
    }

    /// scripts/postgres in this checkout.
    package static var script: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("scripts/postgres").path
    }

    /// Runs scripts/postgres and returns its output. Not Foundation's `Process`: its
    /// `waitUntilExit` was seen hanging once the script had started a server (a daemon).
    @discardableResult
    package static func runScript(_ arguments: [String]) throws -> String {
        let outputPath = NSTemporaryDirectory() + "tabsync-pg-output-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: outputPath) }
        let quote = { (text: String) in "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'" }
        let command = ([script] + arguments).map(quote).joined(separator: " ") + " >" + quote(outputPath) + " </dev/null"
        let status = system(command)
        guard status == 0 else { throw Failure("scripts/postgres \(arguments.joined(separator: " ")) exited with status \(status)") }
        return (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
    }

    package struct Failure: Error, CustomStringConvertible {
        package var description: String
        package init(_ description: String) { self.description = description }
    }
}
