import Logging
import SwiftProtobuf
import TabsyncCore
import TabsyncProto
import TabsyncStore
import TabsyncTestSupport
@testable import TabsyncClient
@testable import TabsyncServerCore

/// The simulated network: FIFO links per connection, frames moving one at a time, drops and late
/// deliveries after a drop.
extension SimulatedWorld {
    enum Down: Equatable {
        case frame([UInt8])
        /// The server's close, after the frames before it.
        case close(UInt16)
        /// A keepalive ping (``ServerCore/Action/ping(_:)``); a client that answers puts a pong
        /// (an empty entry: no client message is empty) on its `up`, behind what it sent before.
        case ping
    }

    struct Link {
        let id: ConnectionID
        let client: Int
        let node: Int
        let format: WireFormat
        var up: [[UInt8]] = []
        var down: [Down] = []
        /// The client's end is gone (the network dropped it) but the server has not heard yet: it
        /// still reads what is left in `up`, its sends go nowhere, and it hears of the close once
        /// `up` is empty.
        var clientGone = false
        /// The version the session's Welcome brought it to: a broadcast `Applied` at or below it
        /// after the Welcome would be a Welcome ahead of an earlier `Applied`.
        var welcomedAt: UInt64?
        /// When the server last heard from it (connected, a frame or a pong read), on the world's
        /// clock: the core must close it once it is silent for the idle timeout, and never sooner.
        var lastHeard: Duration = .zero
        /// A peer that never answers pings (keepalive worlds).
        var silent = false
        /// Dropped without the server hearing of it: only the keepalive ends it at the server.
        var halfOpen = false
        /// The server closed it (the driver drops the socket): it hears of the close on the next tick.
        var serverClosed = false
    }

    mutating func deliverUp(_ id: ConnectionID) {
        guard let link = links[id], !link.up.isEmpty else { return }
        let frame = links[id]!.up.removeFirst()
        stats.delivered += 1
        if trace != nil, let m = try? link.format.decodeClientMessage(frame) { note("link \(id) c\(link.client) -> node \(link.node): \(m.textFormatString().replacingOccurrences(of: "\n", with: " "))") }
        if link.clientGone { stats.lateDelivered += 1 }
        links[id]!.lastHeard = elapsed
        if frame.isEmpty {
            stats.pongs += 1
            note("link \(id) c\(link.client) -> node \(link.node): pong")
            handle(link.node, .pong(id))
        } else {
            handle(link.node, .frame(id, frame, binary: !link.format.usesTextFrames))
        }
        if let link = links[id], link.clientGone, link.up.isEmpty { serverHearsClose(id) }
    }

    mutating func deliverDown(_ id: ConnectionID) {
        guard let link = links[id], !link.down.isEmpty, spend() else { return }
        let item = links[id]!.down.removeFirst()
        stats.delivered += 1
        if trace != nil {
            switch item {
            case .frame(let bytes):
                if let m = try? link.format.decodeServerMessage(bytes) { note("link \(id) node \(link.node) -> c\(link.client): \(m.textFormatString().replacingOccurrences(of: "\n", with: " ").prefix(300))") }
            case .close(let code): note("link \(id) node \(link.node) -> c\(link.client): close \(code)")
            case .ping: note("link \(id) node \(link.node) -> c\(link.client): ping\(link.silent ? " (not answered)" : "")")
            }
        }
        let c = link.client
        switch item {
        case .frame(let bytes):
            if let close = clients[c].session.received(bytes) {
                // The client closes: the server hears of it as a closed connection.
                endLink(id, ending: ConnectionEnding(kind: .closedLocally, code: close.code, reason: close.reason))
            } else {
                pumpClient(c)
            }
        case .close(let code):
            endLink(id, ending: ConnectionEnding(kind: .closedByServer, code: code))
        case .ping:
            if !link.silent { links[id]!.up.append([]) }  // the WebSocket stack answers, behind what it sent
        }
    }

    /// The network drops a connection: what the server had queued to the client is lost, and of
    /// what the client had sent, the tail is lost and sometimes a head of 1-3 frames still reaches
    /// the server later (``Options/lateDelivery``), maybe after the client reconnected. The client
    /// learns of the drop at once; the server when it has read that head.
    mutating func dropLink(_ id: ConnectionID) {
        stats.disconnects += 1
        if options.keepalive != nil, links[id] != nil, rng.chance(0.5) {
            // Half-open: nothing more crosses, and the server is never told; its keepalive must
            // find out (within the idle timeout + 10%, checked every tick).
            stats.halfOpen += 1
            links[id]!.up.removeAll()
            links[id]!.down.removeAll()
            links[id]!.clientGone = true
            links[id]!.halfOpen = true
            // A close the server already decided drops the socket all the same (next tick).
            if nodes[links[id]!.node].core.sessions[id]?.closing != nil { links[id]!.serverClosed = true }
            let c = links[id]!.client
            note("link \(id) c\(c) dropped half-open: the server is not told")
            if clients[c].link == id {
                clients[c].link = nil
                if case .stop = clients[c].session.closed(ConnectionEnding(kind: .lost)), !clients[c].revoked {
                    fail("c\(c) stopped for good after a lost connection")
                }
                pumpClient(c)
            }
            return
        }
        guard let link = links[id], !link.up.isEmpty, rng.chance(options.lateDelivery) else {
            return endLink(id, ending: ConnectionEnding(kind: .lost))
        }
        let keep = min(rng.int(1...3), link.up.count)
        links[id]!.up.removeSubrange(keep...)
        links[id]!.down.removeAll()
        links[id]!.clientGone = true
        note("link \(id) c\(link.client) node \(link.node) dropped; \(keep) sent frames still in flight to the server")
        let c = link.client
        if clients[c].link == id {
            clients[c].link = nil
            let next = clients[c].session.closed(ConnectionEnding(kind: .lost))
            // A revoked client may have read its UNAUTHORIZED before the connection was lost.
            if case .stop = next, !clients[c].revoked { fail("c\(c) stopped for good after a lost connection") }
            pumpClient(c)
        }
    }

    /// The server hears that a connection whose client end is gone has closed.
    mutating func serverHearsClose(_ id: ConnectionID) {
        guard let link = links.removeValue(forKey: id) else { return }
        note("link \(id) c\(link.client) node \(link.node): the server hears of the drop")
        handle(link.node, .disconnected(id))
    }

    mutating func endLink(_ id: ConnectionID, ending: ConnectionEnding) {
        guard let link = links.removeValue(forKey: id) else { return }
        note("link \(id) c\(link.client) node \(link.node) ends: \(ending)")
        let c = link.client
        if clients[c].link == id {
            clients[c].link = nil
            let next = clients[c].session.closed(ending)
            if ending.code == CloseReason.kicked.code {
                guard case .stop = next else { return fail("c\(c) was kicked and did not stop") }
                clients[c].kicked = true
            } else if ending.code == CloseReason.workspaceDeleted.code {
                guard deletes > 0 else { return fail("c\(c) was closed 4410, but no operator deleted the workspace") }
                guard case .stop = next else { return fail("c\(c)'s workspace was deleted and it did not stop") }
                clients[c].deleted = true
            } else if ending.code == 4401 {
                guard clients[c].revoked else { return fail("c\(c) was closed 4401, but its token was not revoked") }
                guard case .stop = next else { return fail("c\(c)'s token was revoked and it did not stop") }
            } else if case .stop = next, ending.code != 1001, !clients[c].revoked, !clients[c].deleted {
                fail("c\(c) stopped for good after \(ending)")
            }
            pumpClient(c)
        }
        handle(link.node, .disconnected(id))
    }
}
