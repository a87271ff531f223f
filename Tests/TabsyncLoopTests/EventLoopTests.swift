import CLibwebsockets
import TabsyncLoop
import Testing

@Suite("Event loop")
struct EventLoopTests {
    /// The backend asked is the one in use when it can be made (the libev plugin is installed
    /// wherever the suite runs: scripts/lib.sh installs it).
    @Test(arguments: [EventLoop.Backend.epoll, .poll])
    func theBackendAskedIsTheBackendInUse(backend: EventLoop.Backend) throws {
        let probe = try LoopProbe(backend: backend)
        #expect(probe.loop.backend == backend)
    }

    /// A context lws refuses to make is a typed error, whether or not poll() may stand in.
    @Test(arguments: [(EventLoop.Backend.epoll, false), (.epoll, true), (.poll, false)])
    func aContextLwsRefusesIsContextFailed(backend: EventLoop.Backend, fallback: Bool) {
        var info = lws_context_creation_info()
        info.port = 0
        // A vhost that needs a certificate file which does not exist: lws cannot make it.
        info.options = clws_option_ssl_global_init()
        let missing = strdup("/nonexistent/tabsync-loop-test.pem")
        defer { free(missing) }
        info.ssl_cert_filepath = UnsafePointer(missing)
        info.ssl_private_key_filepath = UnsafePointer(missing)
        #expect(throws: EventLoop.Error.contextFailed) {
            _ = try EventLoop(info, backend: backend, fallbackToPoll: fallback)
        }
    }

    /// Destroying twice is harmless, and the loop says it is gone.
    @Test func destroyIsIdempotent() throws {
        let probe = try LoopProbe(backend: .epoll)
        probe.loop.destroy()
        probe.loop.destroy()
        #expect(probe.loop.isDestroyed)
    }
}
