import Testing
@testable import TabsyncServer

/// What the core decides with follows the configuration: the commit linger and moves only with a
/// shared store (a local commit's fixed cost is the fsync group commit already shares).
struct ServerConfigurationCoreSettingsTests {
    @Test func theCommitLingerAppliesToASharedStoreOnly() {
        var configuration = Server.Configuration()
        #expect(configuration.coreSettings(storeEpoch: "e").commitLinger == .zero)
        configuration.sharedStore = .init(feed: nil)
        #expect(configuration.coreSettings(storeEpoch: "e").commitLinger == .milliseconds(5))
        configuration.sharedStore?.commitLinger = .zero
        #expect(configuration.coreSettings(storeEpoch: "e").commitLinger == .zero)
    }
}
