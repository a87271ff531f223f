import Foundation
import TabsyncCore
import Testing

/// ``TabsyncVersion``: what both executables print for `--version`.
@Suite("version")
struct TabsyncVersionTests {
    /// MAJOR.MINOR.PATCH, digits only (semantic versioning without pre-release or build parts).
    @Test func theVersionIsThreeNumbers() {
        let parts = TabsyncVersion.current.split(separator: ".", omittingEmptySubsequences: false)
        #expect(parts.count == 3)
        #expect(parts.allSatisfy { !$0.isEmpty && $0.allSatisfy(\.isASCII) && $0.allSatisfy(\.isNumber) })
    }

    /// CHANGELOG.md's newest release (the first `## [X.Y.Z] - DATE` heading after Unreleased) is
    /// this version: a release bumps both in one commit.
    @Test func theChangelogsNewestReleaseIsThisVersion() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let changelog = try String(contentsOf: root.appendingPathComponent("CHANGELOG.md"), encoding: .utf8)
        let released = changelog.split(separator: "\n").first { $0.hasPrefix("## [") && !$0.hasPrefix("## [Unreleased]") }
        let heading = try #require(released)
        #expect(heading.hasPrefix("## [\(TabsyncVersion.current)] - "))
    }
}
