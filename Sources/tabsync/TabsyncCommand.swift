import ArgumentParser
import TabsyncClient

/// The tabsync user tool. Not built yet: it says so and exits non-zero.
@main
struct TabsyncCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tabsync",
        abstract: "Live terminal tab bar, one-shot commands and load generator for tabsync (not implemented yet).",
        subcommands: [Bench.self]
    )

    func run() throws {
        print("tabsync: no commands are implemented yet")
        throw ExitCode(1)
    }
}
