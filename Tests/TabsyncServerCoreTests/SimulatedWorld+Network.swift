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
    }

    mutating func deliverUp(_ id: ConnectionID) {
        guard let link = links[id], !link.up.isEmpty else { return }
        let frame = links[id]!.up.removeFirst()
        stats.delivered += 1
        if trace != nil, let m = try? link.format.decodeClientMessage(frame) { note("link \(id) c\(link.client) -> node \(link.node): \(m.textFormatString().replacingOccurrences(of: "\n", with: " "))") }
        if link.clientGone { stats.lateDelivered += 1 }
        handle(link.node, .frame(id, frame, binary: !link.format.usesTextFrames))
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
        }
    }

    /// The network drops a connection: what the server had queued to the client is lost, and of
    /// what the client had sent, the tail is lost and sometimes a head of 1-3 frames still reaches
    /// the server later (``Options/lateDelivery``), maybe after the client reconnected. The client
    /// learns of the drop at once; the server when it has read that head.
    mutating func dropLink(_ id: ConnectionID) {
        stats.disconnects += 1
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
