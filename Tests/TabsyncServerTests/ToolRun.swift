import Foundation

/// A program run to completion: its exit status and everything it wrote (stdout and stderr).
struct ToolRun {
    var status: Int32
    var output: String

    /// Runs `executable` with `arguments`, `input` on its stdin; waits for it.
    static func run(_ executable: String, _ arguments: [String], input: String = "") throws -> ToolRun {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let output = Pipe()
        let stdin = Pipe()
        process.standardOutput = output
        process.standardError = output
        process.standardInput = stdin
        try process.run()
        stdin.fileHandleForWriting.write(Data(input.utf8))
        try? stdin.fileHandleForWriting.close()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return ToolRun(status: process.terminationStatus, output: String(decoding: data, as: UTF8.self))
    }
}
