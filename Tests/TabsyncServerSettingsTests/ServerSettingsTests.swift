import ArgumentParser
import Foundation
import Logging
import TabsyncCore
import TabsyncServer
import TabsyncServerSettings
import TabsyncStore
import Testing

/// ``ServerSettings`` resolved in process, from arguments parsed as the executable parses them and
/// an environment given as a dictionary: defaults, a flag over its variable, a variable over the
/// default, empty variables, and refusals naming their source and what is expected.
/// A command made of ``ServerOptions`` alone, as `tabsync-server` is.
private struct Probe: ParsableCommand {
    @OptionGroup var options: ServerOptions
}

@Suite("Server settings")
struct ServerSettingsTests {
    /// The settings `arguments` and `environment` give.
    static func settings(_ arguments: [String] = [], _ environment: [String: String] = [:]) throws -> ServerSettings {
        try ServerSettings(options: ServerOptions.parse(arguments), environment: environment)
    }

    /// The refusal `arguments` and `environment` get (nil: none).
    static func refusal(_ arguments: [String] = [], _ environment: [String: String] = [:]) throws -> SettingError? {
        let options = try ServerOptions.parse(arguments)
        do throws(SettingError) {
            _ = try ServerSettings(options: options, environment: environment)
            return nil
        } catch {
            return error
        }
    }

    @Test func withNothingGivenEverySettingIsItsDefault() throws {
        let s = try Self.settings()
        #expect(s.host == "127.0.0.1")
        #expect(s.port == 7070)
        #expect(s.dataDir == "./data")
        #expect(!s.dataDirGiven)
        #expect(!s.memory)
        #expect(s.sync == .normal)
        #expect(s.idleUnload == .seconds(300))
        #expect(s.logLevel == .info)
        #expect(s.limits == Limits.default)
        #expect(s.limits.maxTabs == 500 && s.limits.maxFrameBytes == 1_048_576 && s.limits.maxOpsPerSecond == 100)
        #expect(s.limits.maxResumeOps == 1000 && s.limits.logRetention == 10_000 && s.limits.maxSendQueueBytes == 4_194_304)
        #expect(s.maxConnections == 10_000)
        #expect(s.helloTimeout == .seconds(10))
        #expect(s.idleTimeout == .seconds(60))
        #expect(s.eventLoop == .epoll)
        #expect(s.serveWeb)
        #expect(s.tlsCertificateFile == nil && s.tlsKeyFile == nil)
        #expect(s.allowedOrigins.isEmpty)
        #expect(!s.insecureNoAuth)
        #expect(s.maxConnectionsPerIP == nil && s.maxHandshakesPerSecondPerIP == nil)
        #expect(s.authKeyFiles.isEmpty)
        #expect(s.checkpoint == .background)
        #expect(s.walLimitBytes == 64 << 20)
        #expect(s.storeTrace == nil)
        #expect(s.storeURL == nil)
        #expect(s.storePollInterval == .milliseconds(1500))
        #expect(s.slowCloseGrace == .seconds(5))
        #expect(s.shutdownTimeout == .seconds(15))
        #expect(!s.diagnosticsEcho)
        #expect(s.maxPresencePeers == 128)

        let configuration = s.configuration
        #expect(configuration.perIPLimits == nil)
        #expect(configuration.sharedStore == nil)
        #expect(configuration.accessTokens == nil)
    }

    /// What `--help` says each default is (README's configuration table shows the same).
    @Test(arguments: [
        ("--host", "127.0.0.1"), ("--port", "7070"), ("--data-dir", "./data"), ("--sync", "normal"),
        ("--idle-unload", "5m"), ("--log-level", "info"), ("--max-tabs", "500"), ("--max-frame-bytes", "1048576"),
        ("--max-ops-per-second", "100"), ("--max-resume-ops", "1000"), ("--log-retention", "10000"),
        ("--max-send-queue-bytes", "4194304"), ("--max-connections", "10000"), ("--hello-timeout", "10.0"),
        ("--idle-timeout", "60.0"), ("--event-loop", "epoll"), ("--checkpoint", "background"), ("--wal-limit", "64M"),
        ("--store-trace", "none"), ("--store-poll-interval", "1.5s"), ("--store-commit-linger", "5ms"),
        ("--slow-close-grace", "5s"),
        ("--shutdown-timeout", "15s"), ("--max-presence-peers", "128"),
    ])
    func helpShowsEachDefault(option: String, shown: String) throws {
        let row = try #require(SettingTable.all.first { $0.option == option })
        #expect(row.shownDefault == shown)
    }

    /// A default shown by `--help`, given as the flag, is the default itself: what help says is
    /// what the server runs with.
    @Test func eachShownDefaultReadsBackAsTheDefault() throws {
        func check<Value: Equatable>(_ setting: Setting<Value>) throws {
            let shown = try #require(setting.shownDefault, "\(setting.option)")
            #expect(try setting.resolve(flag: shown, environment: [:]) == setting.defaultValue, "\(setting.option)")
        }
        let t = SettingTable.self
        try check(t.host); try check(t.port); try check(t.dataDir); try check(t.sync); try check(t.idleUnload)
        try check(t.logLevel); try check(t.maxTabs); try check(t.maxGroups); try check(t.maxFrameBytes); try check(t.maxOpsPerSecond)
        try check(t.maxResumeOps); try check(t.logRetention); try check(t.maxSendQueueBytes)
        try check(t.maxConnections); try check(t.helloTimeout); try check(t.idleTimeout); try check(t.eventLoop)
        try check(t.checkpoint); try check(t.walLimit); try check(t.storePollInterval); try check(t.slowCloseGrace)
        try check(t.shutdownTimeout); try check(t.maxPresencePeers)
    }

    @Test func aFlagWinsAndItsVariableIsNotReadEvenWhenBad() throws {
        let s = try Self.settings(
            ["--port", "8080", "--max-tabs", "7", "--idle-unload", "1h", "--memory", "--allow-origin", "https://a.example"],
            ["TABSYNC_PORT": "abc", "TABSYNC_MAX_TABS": "9", "TABSYNC_IDLE_UNLOAD": "soon", "TABSYNC_MEMORY": "maybe",
             "TABSYNC_ALLOW_ORIGIN": "ftp://b.example"])
        #expect(s.port == 8080)
        #expect(s.limits.maxTabs == 7)
        #expect(s.idleUnload == .seconds(3600))
        #expect(s.memory)
        #expect(s.allowedOrigins == ["https://a.example"])
    }

    @Test func aVariableIsUsedWhenItsFlagIsAbsent() throws {
        let s = try Self.settings([], [
            "TABSYNC_HOST": "0.0.0.0", "TABSYNC_PORT": "9000", "TABSYNC_DATA_DIR": "/var/lib/tabsync",
            "TABSYNC_MEMORY": "yes", "TABSYNC_SYNC": "FULL", "TABSYNC_IDLE_UNLOAD": "500ms", "TABSYNC_LOG_LEVEL": "debug",
            "TABSYNC_MAX_TABS": "7", "TABSYNC_MAX_GROUPS": "3", "TABSYNC_MAX_FRAME_BYTES": "2048", "TABSYNC_MAX_OPS_PER_SECOND": "5",
            "TABSYNC_MAX_RESUME_OPS": "6", "TABSYNC_LOG_RETENTION": "8", "TABSYNC_MAX_SEND_QUEUE_BYTES": "4096",
            "TABSYNC_MAX_CONNECTIONS": "3", "TABSYNC_HELLO_TIMEOUT": "0.5", "TABSYNC_IDLE_TIMEOUT": "2",
            "TABSYNC_EVENT_LOOP": "poll", "TABSYNC_NO_WEB": "on", "TABSYNC_TLS_CERT": "/c.pem", "TABSYNC_TLS_KEY": "/k.pem",
            "TABSYNC_ALLOW_ORIGIN": " https://a.example, ,chrome-extension://abcdefghijklmnopabcdefghijklmnop ", "TABSYNC_INSECURE_NO_AUTH": "true",
            "TABSYNC_MAX_CONNECTIONS_PER_IP": "0", "TABSYNC_MAX_HANDSHAKES_PER_SECOND_PER_IP": "2.5",
            "TABSYNC_AUTH_KEY_FILE": "/a.key,/b.key", "TABSYNC_CHECKPOINT": "inline", "TABSYNC_WAL_LIMIT": "2MiB",
            "TABSYNC_STORE_TRACE": "/trace", "TABSYNC_SLOW_CLOSE_GRACE": "250ms", "TABSYNC_SHUTDOWN_TIMEOUT": "1m",
            "TABSYNC_DIAGNOSTICS_ECHO": "1", "TABSYNC_MAX_PRESENCE_PEERS": "4",
        ])
        #expect(s.host == "0.0.0.0" && s.port == 9000 && s.dataDir == "/var/lib/tabsync" && s.dataDirGiven)
        #expect(s.memory && s.sync == .full && s.idleUnload == .milliseconds(500) && s.logLevel == .debug)
        #expect(s.limits == Limits(
            maxTabs: 7, maxGroups: 3, maxFrameBytes: 2048, maxOpsPerSecond: 5, maxResumeOps: 6, logRetention: 8,
            maxSendQueueBytes: 4096))
        #expect(s.maxConnections == 3 && s.helloTimeout == .milliseconds(500) && s.idleTimeout == .seconds(2))
        #expect(s.eventLoop == .poll && !s.serveWeb)
        #expect(s.tlsCertificateFile == "/c.pem" && s.tlsKeyFile == "/k.pem")
        #expect(s.allowedOrigins == ["https://a.example", "chrome-extension://abcdefghijklmnopabcdefghijklmnop"])
        #expect(s.insecureNoAuth && s.maxConnectionsPerIP == 0 && s.maxHandshakesPerSecondPerIP == 2.5)
        #expect(s.authKeyFiles == ["/a.key", "/b.key"])
        #expect(s.checkpoint == .inline && s.walLimitBytes == 2 << 20 && s.storeTrace == "/trace")
        #expect(s.slowCloseGrace == .milliseconds(250) && s.shutdownTimeout == .seconds(60))
        #expect(s.diagnosticsEcho && s.maxPresencePeers == 4)

        let perIP = try #require(s.configuration.perIPLimits)
        #expect(perIP == .init(maxConnections: 0, handshakesPerSecond: 2.5, handshakeBurst: 5))

        let shared = try Self.settings(
            ["--store-commit-linger", "2ms"], ["TABSYNC_STORE": "postgres://u@db/tabsync", "TABSYNC_STORE_POLL_INTERVAL": "0"])
        #expect(shared.storeURL == "postgres://u@db/tabsync")
        #expect(shared.configuration.sharedStore?.pollInterval == .zero)
        #expect(shared.configuration.sharedStore?.commitLinger == .milliseconds(2))
    }

    /// `--log-retention` bounds the log each store loads (a resume from before it gets a snapshot:
    /// `ResumeRuleTests`) as well as the log the server keeps.
    @Test func theLogRetentionIsEachStoresLoadWindow() throws {
        let s = try Self.settings(["--log-retention", "10"])
        #expect(s.configuration.limits.logRetention == 10)
        #expect(s.sqliteOptions.loadWindow == 10 && s.postgresOptions.loadWindow == 10)
    }

    @Test func anEmptyVariableCountsAsUnset() throws {
        let empty = Dictionary(uniqueKeysWithValues: SettingTable.all.map { ($0.variable, "") })
        let s = try Self.settings([], empty)
        let defaults = try Self.settings()
        #expect(s.configuration.limits == defaults.configuration.limits)
        #expect(s.host == defaults.host && s.port == defaults.port && s.dataDir == defaults.dataDir && !s.dataDirGiven)
        #expect(s.idleUnload == defaults.idleUnload && s.shutdownTimeout == defaults.shutdownTimeout)
        #expect(s.allowedOrigins.isEmpty && s.authKeyFiles.isEmpty && s.storeURL == nil && s.tlsCertificateFile == nil)
        #expect(!s.memory && s.serveWeb && !s.insecureNoAuth && !s.diagnosticsEcho)
    }

    /// A bad value, as a flag and as its variable: refused, naming where it came from, the value,
    /// and what is expected.
    @Test(arguments: [
        ("--port", "70000", "an integer from 0 to 65535"), ("--port", "abc", "an integer from 0 to 65535"),
        ("--host", "", "a host name or address"), ("--data-dir", "", "a directory path"),
        ("--max-tabs", "0", "an integer of 1 or more"), ("--max-frame-bytes", "1.5", "an integer of 1 or more"),
        ("--max-ops-per-second", "-3", "an integer of 1 or more"), ("--max-resume-ops", "x", "an integer of 1 or more"),
        ("--log-retention", "0", "an integer of 1 or more"), ("--max-send-queue-bytes", "4MB", "an integer of 1 or more"),
        ("--max-connections", "many", "an integer of 1 or more"), ("--max-presence-peers", "0", "an integer of 1 or more"),
        ("--sync", "sometimes", "normal or full"), ("--log-level", "loud", "trace, debug, info"),
        ("--idle-unload", "soon", "seconds or a duration"), ("--hello-timeout", "0", "seconds, more than 0"),
        ("--hello-timeout", "1e300", "seconds, more than 0"), ("--idle-timeout", "1", "seconds, 2 or more"),
        ("--event-loop", "select", "epoll or poll"), ("--allow-origin", "tabs.example.com", "scheme://host[:port]"),
        ("--max-connections-per-ip", "-1", "an integer of 0 or more"),
        ("--max-handshakes-per-second-per-ip", "fast", "a number of 0 or more"), ("--auth-key-file", " ", "a file path"),
        ("--checkpoint", "never", "background or inline"), ("--wal-limit", "100K", "at least 1M"),
        ("--store-poll-interval", "-1s", "seconds or a duration"), ("--slow-close-grace", "0", "more than 0"),
        ("--store-commit-linger", "2s", "from 0 to 1s"), ("--store-commit-linger", "-5ms", "from 0 to 1s"),
        ("--shutdown-timeout", "4s", "at least 5s"), ("--tls-cert", "", "a file path"), ("--store-trace", "", "a file path"),
        // Once spawned per value by EnvironmentVariableTests / ServerExecutableTests:
        ("--max-tabs", "-1", "an integer of 1 or more"), ("--event-loop", "xyz", "epoll or poll"),
        ("--max-connections-per-ip", "lots", "an integer of 0 or more"),
        ("--max-handshakes-per-second-per-ip", "-0.5", "a number of 0 or more"),
        ("--checkpoint", "sometimes", "background or inline"), ("--wal-limit", "big", "at least 1M"),
        ("--wal-limit", "0", "at least 1M"), ("--slow-close-grace", "soon", "more than 0"),
        ("--shutdown-timeout", "1s", "at least 5s"),
    ])
    func aBadValueNamesItsSourceAndTheExpectedRange(option: String, value: String, expected: String) throws {
        // `--option=value` when the value starts with a dash (it would read as a flag otherwise).
        let arguments = value.hasPrefix("-") ? ["\(option)=\(value)"] : [option, value]
        let fromFlag = try #require(try Self.refusal(arguments), "\(option) \(value)")
        #expect(fromFlag.source == option && fromFlag.value == value)
        #expect(fromFlag.expected.contains(expected))
        #expect(fromFlag.description == "invalid \(option) \"\(value)\": expected \(fromFlag.expected)")

        let variable = try #require(SettingTable.all.first { $0.option == option }).variable
        guard !value.trimmingCharacters(in: .whitespaces).isEmpty else { return }  // empty or blank: unset
        let fromVariable = try #require(try Self.refusal([], [variable: value]), "\(variable)=\(value)")
        #expect(fromVariable.source == variable && fromVariable.value == value)
        #expect(fromVariable.expected == fromFlag.expected)
        #expect(fromVariable.description == "invalid \(variable)=\"\(value)\": expected \(fromFlag.expected)")
    }

    @Test(arguments: ["TABSYNC_MEMORY", "TABSYNC_NO_WEB", "TABSYNC_INSECURE_NO_AUTH", "TABSYNC_DIAGNOSTICS_ECHO"])
    func aSwitchVariableTakesOnlyOnOrOffWords(variable: String) throws {
        let error = try #require(try Self.refusal([], [variable: "maybe"]))
        #expect(error.source == variable && error.expected == "1, true, yes, on or 0, false, no, off")
        for off in ["0", "false", "NO", "Off"] {
            #expect(try Self.refusal([], [variable: off]) == nil)
        }
    }

    @Test func aBadListVariableNamesTheWholeValue() throws {
        let value = "https://a.example, ftp://b.example"
        let error = try #require(try Self.refusal([], ["TABSYNC_ALLOW_ORIGIN": value]))
        #expect(error.source == "TABSYNC_ALLOW_ORIGIN" && error.value == value)
        #expect(try Self.refusal([], ["TABSYNC_AUTH_KEY_FILE": " , "])?.source == "TABSYNC_AUTH_KEY_FILE")
    }

    @Test func aStoreURLIsRefusedWithoutItsPassword() throws {
        let error = try #require(try Self.refusal(["--store", "mysql://tabsync:secret@db/tabsync?sslpassword=x"]))
        #expect(error.source == "--store" && error.value == "mysql://tabsync@db/tabsync")
        #expect(!error.description.contains("secret"))
        let both = try #require(try Self.refusal(["--memory"], ["TABSYNC_STORE": "postgres://u:secret@db/t"]))
        #expect(both.source == "TABSYNC_STORE" && both.value == "postgres://u@db/t")
        #expect(both.expected == "either --store or --memory (TABSYNC_MEMORY), not both")
    }

    @Test func aCertificateWithoutItsKeyIsNamedWhereItCameFrom() throws {
        let flag = try #require(try Self.refusal(["--tls-cert", "/c.pem"]))
        #expect(flag.source == "--tls-cert" && flag.expected == "--tls-key (or TABSYNC_TLS_KEY) with it")
        let variable = try #require(try Self.refusal([], ["TABSYNC_TLS_KEY": "/k.pem"]))
        #expect(variable.source == "TABSYNC_TLS_KEY" && variable.expected == "--tls-cert (or TABSYNC_TLS_CERT) with it")
        let certificate = try #require(try Self.refusal([], ["TABSYNC_TLS_CERT": "/nowhere/cert.pem"]))
        #expect(certificate.source == "TABSYNC_TLS_CERT" && certificate.value == "/nowhere/cert.pem")
        #expect(certificate.description.contains("TABSYNC_TLS_CERT=\"/nowhere/cert.pem\""))
    }

    /// An unknown flag is a usage error, as a bad value is: the executable exits 2 for both
    /// (`ServerExecutableTests` spawns it once), with the flag named.
    @Test func anUnknownFlagIsAUsageErrorNamingIt() throws {
        do {
            _ = try Probe.parseAsRoot(["--no-such-flag"])
            Issue.record("--no-such-flag was taken")
        } catch {
            #expect(Probe.exitCode(for: error) == .validationFailure)
            #expect(Probe.fullMessage(for: error).contains("--no-such-flag"))
        }
    }

    /// The Docker image's environment: the host beyond loopback, two key files (comma-separated,
    /// blanks trimmed), the insecure switch empty (unset). A key-file flag wins over the variable,
    /// even one naming a missing file; a key file that cannot be read is named by its path (the
    /// executable's exit-1 line). The spawned end-to-end test is `EnvironmentVariableTests`.
    @Test func theKeyFileVariableAndItsFlag() throws {
        let docker = try Self.settings([], [
            "TABSYNC_HOST": "0.0.0.0", "TABSYNC_AUTH_KEY_FILE": "/keys/team.key, /keys/next.key", "TABSYNC_INSECURE_NO_AUTH": "",
        ])
        #expect(docker.host == "0.0.0.0" && !docker.insecureNoAuth)
        #expect(docker.authKeyFiles == ["/keys/team.key", "/keys/next.key"])
        let flag = try Self.settings(["--auth-key-file", "/keys/team.key"], ["TABSYNC_AUTH_KEY_FILE": "/nowhere/team.key"])
        #expect(flag.authKeyFiles == ["/keys/team.key"])
        #expect(try Self.settings([], ["TABSYNC_AUTH_KEY_FILE": "/nowhere/team.key"]).authKeyFiles == ["/nowhere/team.key"])
        #expect(throws: AuthKeyError.self) { _ = try AuthKey.load(file: "/nowhere/team.key") }
        do throws(AuthKeyError) {
            _ = try AuthKey.load(file: "/nowhere/team.key")
        } catch {
            #expect(error.description == "cannot read key file /nowhere/team.key")
        }
    }

    /// The arguments `--experimental-dump-help` describes (README's configuration table is written
    /// from it) for a command made of ``ServerOptions``, as the executable is.
    static func dumpedArguments() throws -> [[String: Any]] {
        var message = ""
        do {
            _ = try Probe.parseAsRoot(["--experimental-dump-help"])
        } catch {
            message = Probe.fullMessage(for: error)
        }
        let json = try #require(try JSONSerialization.jsonObject(with: Data(message.utf8)) as? [String: Any])
        let command = try #require(json["command"] as? [String: Any])
        return try #require(command["arguments"] as? [[String: Any]])
    }

    @Test func everySettingIsInTheHelpWithItsVariableAndDefault() throws {
        var help: [String: String] = [:]
        for argument in try Self.dumpedArguments() {
            let names = (argument["names"] as? [[String: Any]] ?? []).filter { $0["kind"] as? String == "long" }
            guard let name = names.first?["name"] as? String, name != "help", name != "version" else { continue }
            help["--" + name] = argument["abstract"] as? String ?? ""
        }
        #expect(Set(help.keys) == Set(SettingTable.all.map(\.option)), "every flag is a setting and every setting a flag")
        for row in SettingTable.all {
            let abstract = try #require(help[row.option], "\(row.option) is not in --help")
            #expect(abstract == row.help)
            #expect(abstract.contains("[env: \(row.variableNote)]"))
            #expect(row.variableNote.hasPrefix(row.variable))
            if let shown = row.shownDefault { #expect(abstract.hasSuffix("(default: \(shown))")) }
        }
        #expect(Set(SettingTable.all.map(\.variable)).count == SettingTable.all.count)
    }
}
