import ArgumentParser
import Foundation

/// `tabsync-server admin webhooks add|ls|rm`: the webhooks of the admin API (docs/design.md,
/// "Webhooks"). The secret goes to the server once, from a file, the environment, or made here and
/// printed once; no answer of the server holds it.
struct AdminWebhooksCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "webhooks",
        abstract: "Register, list, enable and remove webhooks (every committed version POSTed, signed).",
        subcommands: [Add.self, List.self, Enable.self, Remove.self]
    )

    struct Add: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Register a webhook; without a secret given, one is made and printed once.")
        @OptionGroup var common: AdminCommand.Common
        @Option(help: "Where to POST: an http or https URL.") var url: String
        @Option(help: "The workspaces it follows: an id or a glob (`*`, `?`).") var workspaces: String
        @Option(name: .customLong("secret-file"), help: ArgumentHelp(
            "A file holding the secret (whsec_ and base64). [env: TABSYNC_WEBHOOK_SECRET holds the secret itself]",
            valueName: "file"))
        var secretFile: String?

        func run() throws {
            let (secret, made) = try secret()
            try common.call("POST", "/v1/admin/webhooks", body: ["url": url, "workspaces": workspaces, "secret": secret]) { object in
                var text = "registered \(object["id"] ?? "?"): \(object["url"] ?? "") for \(object["workspaces"] ?? "")\n"
                if made { text += "secret (shown once, keep it for the receiver): \(secret)\n" }
                return text
            }
        }

        /// The secret to register, and whether it was made here.
        private func secret() throws -> (String, Bool) {
            if let secretFile {
                guard let text = try? String(contentsOfFile: secretFile, encoding: .utf8) else {
                    throw ValidationError("cannot read --secret-file \(secretFile)")
                }
                return (text.trimmingCharacters(in: .whitespacesAndNewlines), false)
            }
            if let secret = ProcessInfo.processInfo.environment["TABSYNC_WEBHOOK_SECRET"], !secret.isEmpty { return (secret, false) }
            var generator = SystemRandomNumberGenerator()
            let key = (0..<32).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
            return ("whsec_" + Data(key).base64EncodedString(), true)
        }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "ls", abstract: "List the webhooks (never their secrets), and what each has failing: the last error.")
        @OptionGroup var common: AdminCommand.Common

        func run() throws {
            try common.call("GET", "/v1/admin/webhooks") { object in
                var rows = [["ID", "WORKSPACES", "ENABLED", "CREATED", "FAILING", "URL"]]
                for hook in object["webhooks"] as? [[String: Any]] ?? [] {
                    let enabled = (hook["enabled"] as? Bool ?? true)
                        ? "yes" : "no (since \(hook["disabledAt"] ?? "?")): \(hook["disabledReason"] ?? "")"
                    var failing = "-"
                    if let pending = hook["failing"] as? [String: Any] {
                        failing = "\(pending["workspaces"] ?? "?") workspace(s), \(pending["workspace"] ?? "?") "
                            + "attempt \(pending["attempts"] ?? "?") since \(pending["since"] ?? "?"), "
                            + "next \(pending["nextAttempt"] ?? "?"): \(pending["lastError"] ?? "?")"
                    }
                    rows.append([
                        "\(hook["id"] ?? "")", "\(hook["workspaces"] ?? "")", enabled, "\(hook["createdAt"] ?? "")", failing,
                        "\(hook["url"] ?? "")",
                    ])
                }
                return AdminCommand.pad(rows)
            }
        }
    }

    struct Enable: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Enable a disabled webhook: it sends again from where it stopped.")
        @OptionGroup var common: AdminCommand.Common
        @Argument(help: "The webhook's id, as `ls` lists it.") var id: String

        func run() throws {
            try common.call("POST", "/v1/admin/webhooks/\(id)/enable") { object in "enabled \(object["id"] ?? id)\n" }
        }
    }

    struct Remove: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "rm", abstract: "Remove a webhook and what it had left to send.")
        @OptionGroup var common: AdminCommand.Common
        @Argument(help: "The webhook's id, as `ls` lists it.") var id: String

        func run() throws {
            try common.call("DELETE", "/v1/admin/webhooks/\(id)") { object in "removed \(object["removed"] ?? id)\n" }
        }
    }
}
