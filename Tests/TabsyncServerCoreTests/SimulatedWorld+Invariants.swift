import Logging
import SwiftProtobuf
import TabsyncCore
import TabsyncProto
import TabsyncStore
import TabsyncTestSupport
@testable import TabsyncClient
@testable import TabsyncServerCore

/// What the world checks as it runs: every step, every holder check and move.
extension SimulatedWorld {
    /// A check for a newer holder goes at most once per ``Settings/moveCheckInterval`` per
    /// workspace while it stays loaded, and only from a timeout: after its random pause, never at
    /// the moment the other node's ops were taken.
    mutating func checkHolderCheck(_ n: Int, _ id: String) {
        // Decided at most once per interval, each going after a pause of up to holderCheckPause.
        if let last = nodes[n].lastCheck[id], elapsed - last < Self.moveCheckInterval - Self.holderCheckPause {
            fail("node \(n) (\(nodes[n].name)) checks the holders of \(id) at \(elapsed), again since \(last)")
        }
        nodes[n].lastCheck[id] = elapsed
        if case .timeout? = handling {} else {
            fail("node \(n) checks the holders of \(id) while handling \(handling.map { "\($0)".prefix(40) } ?? "nothing"), "
                + "not after its pause at a timeout")
        }
    }

    /// A session is closed "moved" only when the registry just answered that a newer holder of its
    /// workspace exists.
    mutating func checkMove(_ n: Int, _ id: ConnectionID) {
        if heldBefore.contains(id) { return }  // decided earlier; it waited for the session's answers
        guard case .holdersChecked(_, true)? = handling else {
            return fail("node \(n) closes session \(id) moved while handling \(handling.map { "\($0)".prefix(60) } ?? "nothing"), "
                + "not a registry answer that a newer holder exists")
        }
    }

    /// After every step: no session's deferred messages past their bound, no session the core
    /// holds for a connection that is gone at the core.
    mutating func checkStep() {
        for n in nodes.indices {
            for (id, session) in nodes[n].core.sessions where session.deferred.count > SessionMachine.maxDeferredMessages {
                fail("node \(n) session \(id) holds \(session.deferred.count) deferred messages")
            }
            let open = links.values.filter { $0.node == n }.count
            if nodes[n].core.sessions.count > open {
                fail("node \(n) holds \(nodes[n].core.sessions.count) sessions for \(open) connections")
            }
        }
    }

    /// Every connection the node's core still holds open was heard from within the idle timeout +
    /// 10% (and a tick, the world's clock step); a half-open one it closed goes now.
    mutating func checkKeepalive(_ n: Int) {
        guard let idle = options.keepalive else { return }
        for id in links.keys.sorted() where links[id]!.node == n {
            let link = links[id]!
            if link.serverClosed {
                serverHearsClose(id)
            } else if let session = nodes[n].core.sessions[id], session.closing == nil,
                      elapsed - link.lastHeard > idle * 1.1 + Self.tickLength {
                fail("node \(n) holds link \(id)\(link.halfOpen ? " (half-open)" : link.silent ? " (silent)" : "") open "
                    + "\(elapsed - link.lastHeard) after it last heard from it (idle timeout \(idle))")
            }
        }
    }
}
