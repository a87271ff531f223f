import Foundation
import Testing
import TabsyncCore
@testable import TabsyncClient

/// A localhost TCP port nobody listens on: bound to find a free one, then closed.
func closedLocalPort() -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    precondition(fd >= 0)
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    withUnsafeMutablePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { raw in
            precondition(bind(fd, raw, length) == 0)
            precondition(getsockname(fd, raw, &length) == 0)
        }
    }
    return Int(UInt16(bigEndian: address.sin_port))
}

@Suite struct ClientLoopTests {
    @Test func connectingToAClosedPortReportsFailureAndRetriesWithBackoff() async throws {
        let port = closedLocalPort()
        let loop = try ClientLoop()
        defer { loop.shutdown() }
        let client = try TabsyncClient(
            .init(url: ServerURL(usesTLS: false, host: "127.0.0.1", port: port), workspace: "w", clientId: "c1",
                  backoff: Backoff(initial: .milliseconds(20), maximum: .milliseconds(80), jitter: 0.2)),
            loop: loop)
        let events = client.events()
        client.start()
        let state = try await client.waitUntil(timeout: .seconds(10)) { state in
            if case .waiting(let attempt, _) = state.connection { return attempt >= 4 }
            return false
        }
        #expect(state.lastEnding?.kind == .failedToConnect)
        #expect(state.welcomes == 0)

        // Submitting while it cannot connect keeps the op (it has no seq before a Welcome).
        #expect(client.submit(.add(tab: Tab(id: "t1"), place: .end, activate: true)) == nil)
        #expect(client.state.unsequenced == 1)

        client.close()
        try await client.waitUntil { $0.connection == .closed }

        var attempts: [Int] = []
        var delays: [Duration] = []
        var failures = 0
        for await event in events {
            switch event {
            case .connection(.connecting(let attempt)): attempts.append(attempt)
            case .connection(.waiting(_, let delay)): delays.append(delay)
            case .disconnected(let ending) where ending.kind == .failedToConnect: failures += 1
            default: break
            }
        }
        #expect(Array(attempts.prefix(4)) == [0, 1, 2, 3])
        #expect(failures >= 4)
        // 20, 40, 80, 80 ms nominal, each cut by at most 20 % jitter.
        let nominal: [Duration] = [.milliseconds(20), .milliseconds(40), .milliseconds(80), .milliseconds(80)]
        for (delay, expected) in zip(delays, nominal) {
            #expect(delay <= expected && delay >= expected * 0.8)
        }
    }

    @Test func manyClientsShareOneLoopAndCloseCleanly() async throws {
        let port = closedLocalPort()
        let loop = try ClientLoop()
        var clients: [TabsyncClient] = []
        for index in 0..<200 {
            let client = try TabsyncClient(
                .init(url: ServerURL(usesTLS: false, host: "127.0.0.1", port: port), workspace: "w",
                      clientId: "c\(index)", backoff: Backoff(initial: .milliseconds(50), maximum: .seconds(1))),
                loop: loop)
            client.start()
            clients.append(client)
        }
        for client in clients {
            try await client.waitUntil { $0.lastEnding?.kind == .failedToConnect }
        }
        loop.shutdown()
        for client in clients {
            #expect(client.state.connection == .closed)
        }
    }

    @Test func aClientOnAStoppedLoopIsClosedAtOnce() async throws {
        let loop = try ClientLoop()
        loop.shutdown()
        let client = try TabsyncClient(
            .init(url: ServerURL(usesTLS: false, host: "127.0.0.1", port: closedLocalPort()), workspace: "w",
                  clientId: "c1"),
            loop: loop)
        client.start()
        #expect(client.state.connection == .closed)
        await #expect(throws: ClientError.closed) { try await client.waitUntil(timeout: .seconds(1)) { _ in false } }
    }
}
