import ArgumentParser
import Foundation
import TabsyncServerSettings
import TabsyncStore

/// `tabsync-server migrate`: creates or migrates a PostgreSQL store's schema, then exits, for
/// operators who migrate before rolling nodes out. Nodes also migrate at start, under the same
/// advisory lock, so running it beside starting nodes is safe.
///
/// Exit status: 0 migrated (or already current), 1 the store could not be reached or migrated
/// (the reason on stderr, never the URL's password), 2 a bad or missing `--store`.
struct MigrateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "migrate",
        abstract: "Create or migrate the schema of a PostgreSQL store (--store), then exit.",
        discussion: "Prints `migrated URL` (without its password) on stdout. Safe beside starting nodes: it takes the same lock."
    )

    @Option(help: ArgumentHelp(
        "The PostgreSQL store: postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?PARAMETERS]. [env: TABSYNC_STORE]",
        valueName: "url"))
    var store: String?

    /// The URL from `--store`, else `TABSYNC_STORE`; required.
    private func url() throws -> String {
        let resolved: String?
        do throws(SettingError) {
            resolved = try SettingTable.store.resolve(flag: store, environment: ProcessInfo.processInfo.environment)
        } catch {
            throw ValidationError(error.description)
        }
        guard let resolved else { throw ValidationError("--store (or TABSYNC_STORE) is required: the PostgreSQL URL to migrate") }
        return resolved
    }

    func validate() throws {
        _ = try url()
    }

    func run() throws {
        let url = try url()
        do throws(PostgresStore.OpenError) {
            try PostgresStore.migrate(url: url)
        } catch {
            let line = Array("tabsync-server: \(error.description)\n".utf8)
            line.withUnsafeBytes { _ = write(2, $0.baseAddress, $0.count) }
            throw ExitCode(1)
        }
        let line = Array("migrated \(SettingValue.redacted(url))\n".utf8)
        line.withUnsafeBytes { _ = write(1, $0.baseAddress, $0.count) }
    }
}
