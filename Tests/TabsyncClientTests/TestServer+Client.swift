import TabsyncClient
import TabsyncCore
import TabsyncProto
import TabsyncTestServer

/// The harness's server as the client library sees it.
extension TestServer {
    /// A server for client tests: the op rate limit out of the way (these clients submit in bursts).
    static func forClients() throws -> TestServer {
        try TestServer { $0.limits.maxOpsPerSecond = 100_000 }
    }

    var url: ServerURL { ServerURL(usesTLS: false, host: "127.0.0.1", port: port) }

    /// A client of `workspace` on this server (not started), with a short back-off so reconnects
    /// after ``stop()`` and ``restart()`` come quickly.
    func client(
        _ clientId: String, workspace: String, format: WireFormat = .proto, loop: ClientLoop? = nil,
        onEvent: (@Sendable (ClientEvent) -> Void)? = nil
    ) throws -> TabsyncClient {
        try TabsyncClient(
            .init(url: url, workspace: workspace, clientId: clientId, clientName: clientId, format: format,
                  backoff: Backoff(initial: .milliseconds(20), maximum: .milliseconds(200)), onEvent: onEvent),
            loop: loop)
    }
}
