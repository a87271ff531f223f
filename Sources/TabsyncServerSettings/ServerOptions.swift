import ArgumentParser

/// The server's flags as typed on the command line (nil, false or empty: not given). Each is the
/// property wrapper swift-argument-parser needs, named and documented by its ``SettingTable``
/// entry: its flag, help, `[env: …]` and `(default: …)` are stated there, not here.
/// ``ServerSettings/init(options:environment:)`` resolves them.
public struct ServerOptions: ParsableArguments {
    public init() {}

    @Option(name: .of(SettingTable.host), help: .of(SettingTable.host)) public var host: String?
    @Option(name: .of(SettingTable.port), help: .of(SettingTable.port)) public var port: String?
    @Option(name: .of(SettingTable.dataDir), help: .of(SettingTable.dataDir)) public var dataDir: String?
    @Flag(name: .of(SettingTable.memory), help: .of(SettingTable.memory)) public var memory = false
    @Option(name: .of(SettingTable.sync), help: .of(SettingTable.sync)) public var sync: String?
    @Option(name: .of(SettingTable.idleUnload), help: .of(SettingTable.idleUnload)) public var idleUnload: String?
    @Option(name: .of(SettingTable.logLevel), help: .of(SettingTable.logLevel)) public var logLevel: String?
    @Option(name: .of(SettingTable.maxTabs), help: .of(SettingTable.maxTabs)) public var maxTabs: String?
    @Option(name: .of(SettingTable.maxFrameBytes), help: .of(SettingTable.maxFrameBytes)) public var maxFrameBytes: String?
    @Option(name: .of(SettingTable.maxOpsPerSecond), help: .of(SettingTable.maxOpsPerSecond))
    public var maxOpsPerSecond: String?
    @Option(name: .of(SettingTable.maxResumeOps), help: .of(SettingTable.maxResumeOps)) public var maxResumeOps: String?
    @Option(name: .of(SettingTable.logRetention), help: .of(SettingTable.logRetention)) public var logRetention: String?
    @Option(name: .of(SettingTable.maxSendQueueBytes), help: .of(SettingTable.maxSendQueueBytes))
    public var maxSendQueueBytes: String?
    @Option(name: .of(SettingTable.maxConnections), help: .of(SettingTable.maxConnections))
    public var maxConnections: String?
    @Option(name: .of(SettingTable.helloTimeout), help: .of(SettingTable.helloTimeout)) public var helloTimeout: String?
    @Option(name: .of(SettingTable.idleTimeout), help: .of(SettingTable.idleTimeout)) public var idleTimeout: String?
    @Option(name: .of(SettingTable.eventLoop), help: .of(SettingTable.eventLoop)) public var eventLoop: String?
    @Flag(name: .of(SettingTable.noWeb), help: .of(SettingTable.noWeb)) public var noWeb = false

    // MARK: transport security (TLS, origins, per-address limits, the refusal to run open)

    @Option(name: .of(SettingTable.tlsCert), help: .of(SettingTable.tlsCert)) public var tlsCert: String?
    @Option(name: .of(SettingTable.tlsKey), help: .of(SettingTable.tlsKey)) public var tlsKey: String?
    @Option(name: .of(SettingTable.allowOrigin), help: .of(SettingTable.allowOrigin)) public var allowOrigin: [String] = []
    @Flag(name: .of(SettingTable.insecureNoAuth), help: .of(SettingTable.insecureNoAuth)) public var insecureNoAuth = false
    @Option(name: .of(SettingTable.maxConnectionsPerIP), help: .of(SettingTable.maxConnectionsPerIP))
    public var maxConnectionsPerIP: String?
    @Option(name: .of(SettingTable.maxHandshakesPerSecondPerIP), help: .of(SettingTable.maxHandshakesPerSecondPerIP))
    public var maxHandshakesPerSecondPerIP: String?

    // MARK: access control (tokens)

    @Option(name: .of(SettingTable.authKeyFile), help: .of(SettingTable.authKeyFile)) public var authKeyFile: [String] = []

    // MARK: the SQLite store's checkpoints

    @Option(name: .of(SettingTable.checkpoint), help: .of(SettingTable.checkpoint)) public var checkpoint: String?
    @Option(name: .of(SettingTable.walLimit), help: .of(SettingTable.walLimit)) public var walLimit: String?
    @Option(name: .of(SettingTable.storeTrace), help: .of(SettingTable.storeTrace)) public var storeTrace: String?

    // MARK: several nodes on one PostgreSQL

    @Option(name: .of(SettingTable.store), help: .of(SettingTable.store)) public var store: String?
    @Option(name: .of(SettingTable.storePollInterval), help: .of(SettingTable.storePollInterval))
    public var storePollInterval: String?

    // MARK: slow readers and diagnostics

    @Option(name: .of(SettingTable.slowCloseGrace), help: .of(SettingTable.slowCloseGrace))
    public var slowCloseGrace: String?
    @Option(name: .of(SettingTable.shutdownTimeout), help: .of(SettingTable.shutdownTimeout))
    public var shutdownTimeout: String?
    @Flag(name: .of(SettingTable.diagnosticsEcho), help: .of(SettingTable.diagnosticsEcho)) public var diagnosticsEcho = false

    // MARK: presence

    @Option(name: .of(SettingTable.maxPresencePeers), help: .of(SettingTable.maxPresencePeers))
    public var maxPresencePeers: String?
}

extension NameSpecification {
    /// A setting's long flag.
    static func of<Value>(_ setting: Setting<Value>) -> NameSpecification { .customLong(setting.flag) }
}

extension ArgumentHelp {
    /// A setting's whole `--help` text and value name.
    static func of<Value>(_ setting: Setting<Value>) -> ArgumentHelp {
        ArgumentHelp(setting.help, valueName: setting.valueName)
    }
}
