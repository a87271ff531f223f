import ArgumentParser
import Dispatch
import Foundation
import TabsyncLock
import TabsyncServer

/// `tabsync-server token`: prints a signed access token for one workspace (or glob) and role,
/// made with an HS256 secret file (the same file the server is given with `--auth-key-file`).
struct TokenCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "token",
        abstract: "Print an access token (JWT, HS256) for a workspace and a role.",
        discussion: """
            The token's kid is the key file's name without extension, so a server holding several \
            keys picks the right one. Give it to a client as TABSYNC_TOKEN, --token-file or --token.
            """
    )

    @Option(help: ArgumentHelp("The HS256 secret file (as given to the server). [env: TABSYNC_AUTH_KEY_FILE, the first]", valueName: "file"))
    var authKeyFile: String = ProcessInfo.processInfo.environment["TABSYNC_AUTH_KEY_FILE"]?
        .split(separator: ",").first.map(String.init) ?? ""

    @Option(help: ArgumentHelp("A workspace id, or a glob such as team-* (ws claim).", valueName: "id"))
    var workspace: String

    @Option(help: ArgumentHelp("viewer (reads only), editor (every op but setEditable) or admin (all).", valueName: "role"))
    var role: String

    @Option(help: ArgumentHelp("Lifetime: seconds, or a duration such as 90s, 30m, 8h, 7d.", valueName: "duration"))
    var ttl: String = "1h"

    @Option(help: ArgumentHelp("The user (sub claim), shown in presence.", valueName: "name"))
    var sub: String

    @Option(help: ArgumentHelp(
        "The token's id (jti claim), what revokes this one token (default: 128 random bits, base64url).",
        valueName: "id"))
    var jti: String?

    func validate() throws {
        guard !authKeyFile.isEmpty else { throw ValidationError("--auth-key-file is required") }
        guard WorkspacePattern(workspace) != nil else {
            throw ValidationError("--workspace must be a workspace id or a glob of [A-Za-z0-9._-*?]")
        }
        guard AccessRole(rawValue: role) != nil else { throw ValidationError("--role must be viewer, editor or admin") }
        guard let seconds = Self.seconds(ttl), seconds > 0, seconds.isFinite else {
            throw ValidationError("--ttl must be a positive duration such as 3600, 90s, 30m, 8h, 7d")
        }
        guard !sub.isEmpty, sub.unicodeScalars.count <= 64 else { throw ValidationError("--sub must be 1-64 chars") }
        if let jti, jti.isEmpty || jti.unicodeScalars.count > AccessClaims.maxTokenIdLength
            || jti.unicodeScalars.contains(where: { $0.value < 0x20 || (0x7f...0x9f).contains($0.value) }) {
            throw ValidationError("--jti must be 1-\(AccessClaims.maxTokenIdLength) chars without control characters")
        }
    }

    /// 128 random bits as unpadded base64url: a token id no one guesses or repeats.
    static func randomTokenId() -> String {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) }
        return Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// Seconds from plain seconds or a number with a unit (`s`, `m`, `h`, `d`).
    static func seconds(_ text: String) -> Double? {
        let units: [(String, Double)] = [("s", 1), ("m", 60), ("h", 3600), ("d", 86_400)]
        for (suffix, factor) in units where text.hasSuffix(suffix) {
            return Double(text.dropLast(suffix.count)).map { $0 * factor }
        }
        return Double(text)
    }

    func run() throws {
        let path = authKeyFile
        let key: AuthKey
        do throws(AuthKeyError) {
            key = try AuthKey.load(file: path)
        } catch {
            throw ValidationError(error.description)
        }
        guard key.isSecret, let minter = try? TokenMinter(key: key) else {
            throw ValidationError("\(path) is a public key: tokens for it are minted by whoever holds the private key")
        }
        let now = Date().rounded()
        let claims = AccessClaims(
            subject: sub, workspaces: workspace, role: AccessRole(rawValue: role) ?? .viewer,
            expiresAt: now.addingTimeInterval((Self.seconds(ttl) ?? 3600).rounded(.down)), tokenId: jti ?? Self.randomTokenId(),
            issuedAt: now)
        // A command-line tool: blocking this thread on the signing task is fine here.
        let outcome = Outcome()
        Task {
            do {
                let token = try await minter.mint(claims)
                outcome.value.withLock { $0 = .success(token) }
            } catch {
                outcome.value.withLock { $0 = .failure(Failure(text: "\(error)")) }
            }
            outcome.done.signal()
        }
        outcome.done.wait()
        switch outcome.value.withLock({ $0 }) {
        case .success(let token)?: print(token)
        case .failure(let failure)?: throw ValidationError("cannot sign: \(failure.text)")
        case nil: throw ExitCode(1)
        }
    }

    /// The signing task's result, handed back to the blocked command thread.
    private final class Outcome: Sendable {
        let value = Lock<Result<String, Failure>?>(nil)
        let done = DispatchSemaphore(value: 0)
    }

    private struct Failure: Error {
        var text: String
    }
}

extension Date {
    /// Whole seconds (JWT NumericDate as integers).
    func rounded() -> Date { Date(timeIntervalSince1970: timeIntervalSince1970.rounded(.down)) }
}
