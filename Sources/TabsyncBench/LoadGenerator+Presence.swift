import Foundation
import TabsyncProto

/// `--check-presence`: each connection keeps its peer view as a client library would (the full
/// list once, then deltas), by session id only, and after connecting the bench checks every view
/// against the sessions that actually connected. Without the flag, presence is only counted (the
/// bench asks for deltas either way, so it never receives whole lists again).
extension LoadGenerator {
    /// Applies one `Presence` to the connection's view.
    func receivedPresence(_ connection: BenchConnection, _ bytes: UnsafeRawBufferPointer) {
        guard let format, let message = try? format.decodeServerMessage(Array(bytes)),
              case .presence(let presence)? = message.message else { return }
        if presence.delta {
            guard connection.namedPeers != nil else { return }  // a delta before the full list: not applied
            for id in presence.left { if let id = UInt64(id) { connection.namedPeers?.remove(id) } }
            for peer in presence.peers { if let id = UInt64(peer.sessionID) { connection.namedPeers?.insert(id) } }
        } else {
            connection.namedPeers = Set(presence.peers.compactMap { UInt64($0.sessionID) })
        }
        connection.othersCount = Int(presence.othersCount)
    }

    /// Services the loop until every ready connection's view is correct or `timeout` seconds
    /// passed; returns how many were.
    func checkPresence(timeout: Double) -> BenchReport.PresenceCheck {
        let start = monotonicNanos()
        let deadline = start + UInt64(timeout * 1e9)
        var lastScan: UInt64 = 0
        var result = BenchReport.PresenceCheck()
        service {
            let now = monotonicNanos()
            // A scan costs every view: at most every 20 ms.
            guard now >= lastScan + 20_000_000 || now >= deadline else { return false }
            lastScan = now
            result = presenceViews()
            return result.correct == result.checked || now >= deadline
        }
        result.seconds = Double(monotonicNanos() - start) / 1e9
        result.messages = measurement.presenceMessages
        return result
    }

    /// Every ready connection's view against its workspace's connected sessions.
    private func presenceViews() -> BenchReport.PresenceCheck {
        var result = BenchReport.PresenceCheck()
        var sessions = Array(repeating: Set<UInt64>(), count: configuration.workspaces)
        for connection in connections where connection.state == .ready {
            sessions[connection.workspace].insert(connection.sessionId)
        }
        var reference: [Set<UInt64>?] = Array(repeating: nil, count: configuration.workspaces)
        for connection in connections where connection.state == .ready {
            result.checked += 1
            guard let named = connection.namedPeers else { continue }
            result.namedMax = max(result.namedMax, named.count)
            let workspace = connection.workspace
            if reference[workspace] == nil { reference[workspace] = named }
            if named.count + connection.othersCount == sessions[workspace].count,
               named == reference[workspace], named.isSubset(of: sessions[workspace]) {
                result.correct += 1
            }
        }
        return result
    }
}
