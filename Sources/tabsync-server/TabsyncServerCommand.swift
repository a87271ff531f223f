import ArgumentParser
import TabsyncServer

/// The tabsync server. Not built yet: it says so and exits non-zero.
@main
struct TabsyncServerCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tabsync-server",
        abstract: "The tabsync real-time tab workspace server (not implemented yet)."
    )

    func run() throws {
        print("tabsync-server: the server is not implemented yet")
        throw ExitCode(1)
    }
}
