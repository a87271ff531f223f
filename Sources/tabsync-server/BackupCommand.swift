import ArgumentParser
import Foundation
import TabsyncServerSettings
import TabsyncStore

/// `tabsync-server backup`: an online copy of the embedded SQLite store, taken while a server serves
/// it (``SQLiteStore/backup(from:to:)``): one consistent state, integrity-checked, renamed into
/// place only when whole. A PostgreSQL store is backed up with PostgreSQL's own tools
/// (docs/operating.md, "Backups").
///
/// Exit status: 0 copied and checked, 1 the copy could not be made (the reason on stderr; no file is
/// left at `--to`), 2 bad arguments.
struct BackupCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "backup",
        abstract: "Copy the SQLite store of --data-dir to a file while a server may be serving it.",
        discussion: """
            Prints `backed up SOURCE to FILE: N workspaces, highest version V, B bytes, integrity ok`. \
            The copy is a store file: start a server on it with `--data-dir` of a directory holding \
            it as tabsync.sqlite3. A PostgreSQL store (--store) is backed up with pg_dump instead.
            """
    )

    @Option(help: ArgumentHelp(
        "The directory of the store to copy (its tabsync.sqlite3). [env: TABSYNC_DATA_DIR] (default: ./data)",
        valueName: "path"))
    var dataDir: String?

    @Option(help: ArgumentHelp("The file to write; it must not exist.", valueName: "file"))
    var to: String

    func validate() throws {
        if ProcessInfo.processInfo.environment["TABSYNC_STORE"].map({ !$0.isEmpty }) == true, dataDir == nil {
            throw ValidationError(
                "TABSYNC_STORE names a PostgreSQL store: back it up with pg_dump (docs/operating.md, \"Backups\"); "
                    + "this command copies the embedded SQLite store of --data-dir")
        }
        if to.isEmpty { throw ValidationError("--to must name a file") }
    }

    func run() throws {
        let directory: String
        do throws(SettingError) {
            directory = try SettingTable.dataDir.resolve(flag: dataDir, environment: ProcessInfo.processInfo.environment)
        } catch {
            throw ValidationError(error.description)
        }
        let started = ContinuousClock.now
        let report: SQLiteStore.BackupReport
        do throws(SQLiteStore.BackupError) {
            report = try SQLiteStore.backup(from: directory + "/" + SQLiteStore.fileName, to: to)
        } catch {
            let line = Array("tabsync-server: \(error.description)\n".utf8)
            line.withUnsafeBytes { _ = write(2, $0.baseAddress, $0.count) }
            throw ExitCode(1)
        }
        let elapsed = (ContinuousClock.now - started).components
        let seconds = Double(elapsed.seconds) + Double(elapsed.attoseconds) / 1e18
        let line = Array((
            "backed up \(report.source) to \(report.destination): \(report.workspaces) workspaces, highest version "
                + "\(report.maxVersion), \(report.bytes) bytes, integrity ok, in \(String(format: "%.2f", seconds)) s\n"
        ).utf8)
        line.withUnsafeBytes { _ = write(1, $0.baseAddress, $0.count) }
    }
}
