import Foundation

/// A fresh, empty scratch directory for one test, removed with everything in it when the object
/// goes (at the end of the test, whether it passed or failed).
///
/// With `TABSYNC_KEEP` set in the environment the directory is kept instead and its path printed,
/// to look at what a failing test left (a data file, a log).
package final class TemporaryDirectory: Sendable {
    package let path: String

    /// Creates `<tmp>/<prefix>-<uuid>`; crashes the test if the temporary directory is unwritable.
    package init(prefix: String = "tabsync-test") {
        path = NSTemporaryDirectory() + prefix + "-" + UUID().uuidString
        try! FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    deinit {
        if ProcessInfo.processInfo.environment["TABSYNC_KEEP"] != nil {
            print("TABSYNC_KEEP: kept \(path)")
        } else {
            try? FileManager.default.removeItem(atPath: path)
        }
    }
}
