import ArgumentParser
import Foundation
import TabsyncCore

/// `tabsync-server admin`: the admin API (docs/operating.md, "The admin API") from a shell, over
/// plain HTTP to a loopback address (``AdminHTTP``). Each subcommand prints a short table, or the
/// server's JSON with `--json`.
///
/// Exit status: 0 done, 1 the server could not be reached or answered 5xx, 2 bad arguments,
/// 3 refused (401, 403, 404 and other 4xx: the server's reason on stderr).
struct AdminCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "admin",
        abstract: "Operators' controls: list workspaces and sessions, kick, revoke tokens, delete workspaces, webhooks.",
        discussion: """
            Talks to a running server's admin API with a token of role admin (`tabsync-server token \
            --role admin --workspace '*' --sub you`): --token-file or TABSYNC_ADMIN_TOKEN. Plain HTTP to a \
            loopback address only (the token would cross the network in clear): run it on the node or \
            through an SSH tunnel. Exit 3 when the server refuses (the reason on stderr).
            """,
        subcommands: [List.self, Show.self, Kick.self, Revoke.self, Revocations.self, Delete.self, AdminWebhooksCommand.self]
    )

    struct Common: ParsableArguments {
        @Option(help: ArgumentHelp("The server's HTTP address. [env: TABSYNC_ADMIN_URL] (default: http://127.0.0.1:7070)", valueName: "url"))
        var server: String?

        @Option(name: .customLong("token-file"), help: ArgumentHelp(
            "A file holding the admin token. [env: TABSYNC_ADMIN_TOKEN holds the token itself]", valueName: "file"))
        var tokenFile: String?

        @Flag(help: "Print the server's JSON answer as it is.")
        var json = false

        func client() throws -> AdminHTTP {
            let env = ProcessInfo.processInfo.environment
            let url = server ?? env["TABSYNC_ADMIN_URL"].flatMap { $0.isEmpty ? nil : $0 } ?? "http://127.0.0.1:7070"
            do throws(AdminHTTP.Failure) {
                return try AdminHTTP(url: url)
            } catch {
                throw ValidationError(error.description)
            }
        }

        func token() throws -> String {
            if let tokenFile {
                guard let text = try? String(contentsOfFile: tokenFile, encoding: .utf8) else {
                    throw ValidationError("cannot read --token-file \(tokenFile)")
                }
                return text.trimmingCharacters(in: .whitespacesAndNewlines)
            }
            if let token = ProcessInfo.processInfo.environment["TABSYNC_ADMIN_TOKEN"], !token.isEmpty { return token }
            throw ValidationError("an admin token is needed: --token-file FILE or TABSYNC_ADMIN_TOKEN")
        }

        /// Sends the request; prints the JSON with --json or hands it to `table`; exits 1 or 3 on failure.
        func call(_ method: String, _ path: String, body: [String: Any]? = nil, table: ([String: Any]) -> String) throws {
            let http = try client()
            let token = try token()
            let response: AdminHTTP.Response
            do throws(AdminHTTP.Failure) {
                response = try http.request(method, path, token: token, body: body)
            } catch {
                FileHandle.standardError.write(Data("tabsync-server admin: \(error)\n".utf8))
                throw ExitCode(1)
            }
            guard (200..<300).contains(response.status) else {
                let why = response.body.trimmingCharacters(in: .whitespacesAndNewlines)
                FileHandle.standardError.write(Data("tabsync-server admin: \(response.status): \(why)\n".utf8))
                throw ExitCode(response.status >= 500 ? 1 : 3)
            }
            if json {
                print(response.body, terminator: response.body.hasSuffix("\n") ? "" : "\n")
                return
            }
            let object = (try? JSONSerialization.jsonObject(with: Data(response.body.utf8))) as? [String: Any] ?? [:]
            print(table(object), terminator: "")
        }
    }

    static func pad(_ rows: [[String]]) -> String {
        guard let first = rows.first else { return "" }
        var widths = Array(repeating: 0, count: first.count)
        for row in rows { for (i, cell) in row.enumerated() where i < widths.count { widths[i] = max(widths[i], cell.count) } }
        return rows.map { row in
            row.enumerated().map { i, cell in i == row.count - 1 ? cell : cell.padding(toLength: widths[i], withPad: " ", startingAt: 0) }
                .joined(separator: "  ")
        }.joined(separator: "\n") + "\n"
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "ls", abstract: "List the workspaces (id, tabs, version, sessions here, holders).")
        @OptionGroup var common: Common
        @Option(help: "Start after this workspace id (the `next` of a previous page).") var after: String?
        @Option(help: "At most this many (1–1000).") var limit: Int = 100

        func run() throws {
            var path = "/v1/admin/workspaces?limit=\(limit)"
            if let after { path += "&after=\(after)" }
            try common.call("GET", path) { object in
                let workspaces = object["workspaces"] as? [[String: Any]] ?? []
                var rows = [["WORKSPACE", "TABS", "VERSION", "SESSIONS", "HOLDERS"]]
                for w in workspaces {
                    rows.append([
                        "\(w["id"] ?? "")", "\(w["tabs"] ?? 0)", "\(w["version"] ?? 0)", "\(w["sessions"] ?? 0)",
                        (w["holders"] as? [String] ?? []).joined(separator: ","),
                    ])
                }
                var text = AdminCommand.pad(rows)
                if let next = object["next"] as? String { text += "more: --after \(next)\n" }
                return text
            }
        }
    }

    struct Show: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "show", abstract: "List a workspace's sessions on the node that answers.")
        @OptionGroup var common: Common
        @Argument(help: "The workspace id.") var workspace: String

        func run() throws {
            try common.call("GET", "/v1/admin/workspaces/\(workspace)/sessions") { object in
                let sessions = object["sessions"] as? [[String: Any]] ?? []
                var rows = [["SESSION", "SUB", "NAME", "CLIENT", "SINCE", "PROTOCOL"]]
                for s in sessions {
                    rows.append([
                        "\(s["id"] ?? "")", "\(s["sub"] ?? "-")", "\(s["name"] ?? "")", "\(s["clientId"] ?? "")",
                        "\(s["since"] ?? "")", "\(s["protocol"] ?? "")",
                    ])
                }
                return AdminCommand.pad(rows)
            }
        }
    }

    struct Kick: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Close a session, or every session of a sub (4408, on every node); they may reconnect.")
        @OptionGroup var common: Common
        @Option(help: "A session id, as `show` lists it.") var session: String?
        @Option(help: "A token subject.") var sub: String?

        func validate() throws {
            guard (session == nil) != (sub == nil) else { throw ValidationError("give exactly one of --session or --sub") }
        }

        func run() throws {
            let body: [String: Any] = session.map { ["session": $0] } ?? ["sub": sub!]
            try common.call("POST", "/v1/admin/kick", body: body) { object in
                "kicked: \(object["closedHere"] ?? 0) session(s) closed on \(object["node"] ?? "?"); other nodes act within their poll\n"
            }
        }
    }

    struct Revoke: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Revoke one token (--jti) or every token of a sub issued before a time (--sub --before).")
        @OptionGroup var common: Common
        @Option(help: "The token's jti.") var jti: String?
        @Option(help: "A token subject.") var sub: String?
        @Option(help: "RFC 3339 time (e.g. 2026-11-27T18:00:00Z) or `now`: tokens of --sub issued before it.") var before: String?

        func validate() throws {
            guard (jti != nil) != (sub != nil) else { throw ValidationError("give --jti, or --sub with --before") }
            if sub != nil && before == nil { throw ValidationError("--sub needs --before TIME (or now)") }
            if jti != nil && before != nil { throw ValidationError("--before goes with --sub") }
        }

        func run() throws {
            var body: [String: Any]
            if let jti {
                body = ["jti": jti]
            } else {
                let time = before == "now" ? RFC3339.format(Date().timeIntervalSince1970) : before!
                body = ["sub": sub!, "issuedBefore": time]
            }
            try common.call("POST", "/v1/admin/revocations", body: body) { object in
                "revoked (entry \(object["number"] ?? "?")): \(object["closedHere"] ?? 0) session(s) closed on \(object["node"] ?? "?")\n"
            }
        }
    }

    struct Revocations: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the revocations in force.")
        @OptionGroup var common: Common

        func run() throws {
            try common.call("GET", "/v1/admin/revocations") { object in
                var rows = [["ENTRY", "AT", "WHAT"]]
                for r in object["revocations"] as? [[String: Any]] ?? [] {
                    let what = r["jti"].map { "jti \($0)" } ?? "sub \(r["sub"] ?? "") issued before \(r["issuedBefore"] ?? "")"
                    rows.append(["\(r["number"] ?? "")", "\(r["at"] ?? "")", what])
                }
                return AdminCommand.pad(rows)
            }
        }
    }

    struct Delete: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Delete a workspace: its sessions closed 4410, its history gone (it may be made again, under a new epoch).")
        @OptionGroup var common: Common
        @Argument(help: "The workspace id.") var workspace: String

        func run() throws {
            try common.call("DELETE", "/v1/admin/workspaces/\(workspace)") { _ in "deleted \(workspace)\n" }
        }
    }
}
