import ArgumentParser

/// The server's flags as typed on the command line (nil, false or empty: not given). Each is the
/// property wrapper swift-argument-parser needs, made from its ``SettingTable`` entry: its flag,
/// help, `[env: …]` and `(default: …)` are stated there, not here.
/// ``ServerSettings/init(options:environment:)`` resolves them.
public struct ServerOptions: ParsableArguments {
    public init() {}

    @Option(SettingTable.host) public var host: String?
    @Option(SettingTable.port) public var port: String?
    @Option(SettingTable.dataDir) public var dataDir: String?
    @Flag(SettingTable.memory) public var memory = false
    @Option(SettingTable.sync) public var sync: String?
    @Option(SettingTable.idleUnload) public var idleUnload: String?
    @Option(SettingTable.logLevel) public var logLevel: String?
    @Option(SettingTable.maxTabs) public var maxTabs: String?
    @Option(SettingTable.maxGroups) public var maxGroups: String?
    @Option(SettingTable.maxFrameBytes) public var maxFrameBytes: String?
    @Option(SettingTable.maxOpsPerSecond) public var maxOpsPerSecond: String?
    @Option(SettingTable.maxResumeOps) public var maxResumeOps: String?
    @Option(SettingTable.logRetention) public var logRetention: String?
    @Option(SettingTable.maxSendQueueBytes) public var maxSendQueueBytes: String?
    @Option(SettingTable.maxConnections) public var maxConnections: String?
    @Option(SettingTable.helloTimeout) public var helloTimeout: String?
    @Option(SettingTable.idleTimeout) public var idleTimeout: String?
    @Option(SettingTable.eventLoop) public var eventLoop: String?
    @Flag(SettingTable.noWeb) public var noWeb = false

    // MARK: transport security (TLS, origins, per-address limits, the refusal to run open)

    @Option(SettingTable.tlsCert) public var tlsCert: String?
    @Option(SettingTable.tlsKey) public var tlsKey: String?
    @Option(SettingTable.allowOrigin) public var allowOrigin: [String] = []
    @Flag(SettingTable.insecureNoAuth) public var insecureNoAuth = false
    @Option(SettingTable.maxConnectionsPerIP) public var maxConnectionsPerIP: String?
    @Option(SettingTable.maxConnectionsPerSub) public var maxConnectionsPerSub: String?
    @Option(SettingTable.maxOpsPerSecondPerSub) public var maxOpsPerSecondPerSub: String?
    @Option(SettingTable.maxConnectionsPerWorkspace) public var maxConnectionsPerWorkspace: String?
    @Option(SettingTable.maxHandshakesPerSecondPerIP) public var maxHandshakesPerSecondPerIP: String?

    // MARK: access control (tokens)

    @Option(SettingTable.authKeyFile) public var authKeyFile: [String] = []

    // MARK: the SQLite store's checkpoints

    @Option(SettingTable.checkpoint) public var checkpoint: String?
    @Option(SettingTable.walLimit) public var walLimit: String?
    @Option(SettingTable.storeTrace) public var storeTrace: String?
    @Option(SettingTable.historyRetention) public var historyRetention: String?

    // MARK: several nodes on one PostgreSQL

    @Option(SettingTable.store) public var store: String?
    @Option(SettingTable.storePollInterval) public var storePollInterval: String?
    @Option(SettingTable.storeCommitLinger) public var storeCommitLinger: String?

    // MARK: slow readers and diagnostics

    @Option(SettingTable.slowCloseGrace) public var slowCloseGrace: String?
    @Option(SettingTable.shutdownTimeout) public var shutdownTimeout: String?
    @Flag(SettingTable.diagnosticsEcho) public var diagnosticsEcho = false

    // MARK: presence

    @Option(SettingTable.maxPresencePeers) public var maxPresencePeers: String?
    @Option(SettingTable.feedKeepAlive) public var feedKeepAlive: String?

    // MARK: webhooks

    @Flag(SettingTable.webhookAllowPrivate) public var webhookAllowPrivate = false
    @Option(SettingTable.webhookCAFile) public var webhookCAFile: String?
    @Option(SettingTable.webhookGiveUpAfter) public var webhookGiveUpAfter: String?
}

extension Option where Value == String? {
    /// A one-value setting's flag, as typed: named and documented by its table entry.
    init<Resolved>(_ setting: Setting<Resolved>) {
        self.init(name: .customLong(setting.flag), help: ArgumentHelp(setting.help, valueName: setting.valueName))
    }
}

extension Option where Value == [String] {
    /// A repeatable setting's flag: every value given, in order.
    init(wrappedValue: [String], _ setting: Setting<[String]>) {
        self.init(
            wrappedValue: wrappedValue, name: .customLong(setting.flag),
            help: ArgumentHelp(setting.help, valueName: setting.valueName))
    }
}

extension Flag where Value == Bool {
    /// A switch's flag.
    init(wrappedValue: Bool, _ setting: Setting<Bool>) {
        self.init(wrappedValue: wrappedValue, name: .customLong(setting.flag), help: ArgumentHelp(setting.help))
    }
}
