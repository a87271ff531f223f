import ArgumentParser
import Foundation
import TabsyncBench

/// `tabsync bench`: drives many WebSocket connections against a tabsync server (or libwebsockets'
/// mirror test server as a baseline) and reports latency, throughput and server cost.
///
/// The flags are ``BenchOptions`` (in TabsyncBench, where they are tested); a bad one gets the
/// parser's usage error and exit status 2, like every other command.
struct Bench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench",
        abstract: "Load generator: many clients, open-loop ops, latency percentiles and server cost.",
        discussion: """
            Exit status: 0 when the run completed (even if the server refused or dropped connections: \
            the table says so), 1 when no connection could be made or a file could not be written, \
            2 on bad arguments.
            """
    )

    @OptionGroup var options: BenchOptions
    @OptionGroup(title: "Churn (soak) options") var churnOptions: ChurnOptions

    func run() throws {
        if churnOptions.churn { return try runChurn() }
        do {
            let configuration = try options.configuration()
            let interactive = isatty(2) == 1
            // One line, rewritten in place; nothing when stderr is not a terminal.
            let progress: (@Sendable (BenchProgress) -> Void)?
            if interactive {
                progress = { update in FileHandle.standardError.write(Data(("\r\u{1B}[K" + update.line).utf8)) }
            } else {
                progress = nil
            }
            let result = try BenchRunner.run(configuration, progress: progress)
            if interactive { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
            print(result.table, terminator: "")
            try result.writeFiles(configuration)
            if result.report.connect.connected == 0 { throw ExitCode(1) }
        } catch let error as BenchError {
            FileHandle.standardError.write(Data("tabsync bench: \(error)\n".utf8))
            throw ExitCode(error.exitCode)
        }
    }
}

extension Bench {
    /// `--churn`: connections drop, stall, reconnect and resume; exit 1 when a check failed.
    func runChurn() throws {
        do {
            let configuration = try churnOptions.configuration(base: options.configuration())
            let result = try ChurnRunner.run(configuration) { line in
                FileHandle.standardError.write(Data((line + "\n").utf8))
            }
            print(result.summary, terminator: "")
            if !result.passed { throw ExitCode(1) }
        } catch let error as BenchError {
            FileHandle.standardError.write(Data("tabsync bench: \(error)\n".utf8))
            throw ExitCode(error.exitCode)
        }
    }
}
