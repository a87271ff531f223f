/// Liveness (docs/design.md, "Liveness"): the core, not libwebsockets, decides when a session is
/// pinged and when a silent one is dropped. Each session has one keepalive deadline in the
/// ``DeadlineTable``; hearing from the session (a frame, ``Event/frame(_:_:binary:)``, or a pong,
/// ``Event/pong(_:)``) only notes the instant, and the deadline moves when it comes: to the ping
/// the session is then due, or to its hangup once the ping went out.
///
/// Guarantees (with ``Settings/idleTimeout`` set; nil turns keepalive off):
/// - A session heard from within the last idle timeout is never closed for silence.
/// - A session heard nothing from (no frame, no pong) for the idle timeout is closed
///   ``CloseReason/idleTimeout`` (no close frame: a silent peer is most likely gone) at most one
///   ``keepaliveGrain(_:)`` after it.
/// - After ``SessionMachine/pingAfter`` of silence (``pingWindow``, 0.75 to 0.9 of the idle timeout,
///   fixed per session from ``Settings/jitterSeed`` and its id, so sessions opened together ping
///   apart) the session is pinged (``Action/ping(_:)``), once per silence; it has the rest of the
///   idle timeout (at least a tenth, 6 s by default) to answer.
/// - Hearing from a session costs one store of the instant; only the first answer after a ping
///   moves its deadline (to its next ping, O(1) in the ``DeadlineTable``). A keepalive deadline
///   comes at most twice per silence (its ping, its hangup), and once per ping while the session
///   answers pings.
extension ServerCore {
    /// Keepalive deadlines are rounded up to this (a hundredth of the idle timeout, at most
    /// 100 ms), so sessions share buckets of the ``DeadlineTable``.
    static func keepaliveGrain(_ idleTimeout: Duration) -> Duration {
        max(.milliseconds(1), min(.milliseconds(100), idleTimeout / 100))
    }

    /// Where in the idle timeout a silent session is pinged. Late, so a session answering pings
    /// costs one ping per 0.8 of the idle timeout rather than one per half of it (an idle server's
    /// CPU is mostly pings: BENCHMARKS.md section 7), yet early enough that a ping's answer has a
    /// tenth of the timeout to come back.
    static let pingWindow = 0.75...0.9

    /// How long a session may be silent before its ping: in ``pingWindow`` of the idle timeout,
    /// the same for the same seed and session.
    static func pingAfter(_ idleTimeout: Duration, seed: UInt64, id: ConnectionID) -> Duration {
        var jitter = Jitter(seed: seed ^ UInt64(truncatingIfNeeded: id) &* 0x2545_F491_4F6C_DD1D)
        let width = pingWindow.upperBound - pingWindow.lowerBound
        let fraction = pingWindow.lowerBound + width * Double(jitter.next() % 1_000_000) / 1_000_000
        return idleTimeout * fraction
    }

    /// A session opened: it counts as heard from now.
    mutating func startKeepalive(_ id: ConnectionID) {
        guard let idle = settings.idleTimeout, idle > .zero, sessions[id] != nil else { return }
        let pingAfter = Self.pingAfter(idle, seed: settings.jitterSeed, id: id)
        sessions[id]!.pingAfter = pingAfter
        let at = now
        sessions[id]!.lastHeard = at
        deadlines.set(id, .keepalive, at + pingAfter, grain: Self.keepaliveGrain(idle))
    }

    /// The session sent something (a frame or a pong): its silence starts again. No deadline moves,
    /// but for the first answer after a ping: its deadline (then the hangup) moves to the next ping,
    /// so a session that answers pings costs one deadline per ping. Returns the deadline set, if any.
    @discardableResult
    mutating func heard(_ id: ConnectionID) -> Instant? {
        let at = now
        sessions[id]?.lastHeard = at
        guard let idle = settings.idleTimeout, let session = sessions[id], session.pinged else { return nil }
        sessions[id]!.pinged = false
        deadlines.set(id, .keepalive, at + session.pingAfter, grain: Self.keepaliveGrain(idle))
        return deadlines.deadline(id, .keepalive)
    }

    /// The session's keepalive deadline came: hang up on a silence of the idle timeout, ping a
    /// silence of ``SessionMachine/pingAfter``, or move the deadline to where the silence now ends.
    mutating func keepaliveDue(_ id: ConnectionID) {
        guard let idle = settings.idleTimeout, let session = sessions[id], session.closing == nil else { return }
        let grain = Self.keepaliveGrain(idle)
        let hangupAt = session.lastHeard + idle
        if now >= hangupAt {
            metrics.idleTimeouts += 1
            logger.info("session silent for the idle timeout", metadata: [
                "session": "\(id)", "silent_for": "\(session.lastHeard.duration(to: now))",
            ])
            close(id, .idleTimeout, grace: .seconds(1))
            return
        }
        let pingAt = session.lastHeard + session.pingAfter
        guard now >= pingAt else {
            deadlines.set(id, .keepalive, pingAt, grain: grain)  // heard from since: the next ping
            return
        }
        // Silent since its ping was due: ping it, and come back at its hangup (a ping once per
        // silence: only hearing from it again brings the deadline back before the hangup).
        metrics.pingsSent += 1
        sessions[id]!.pinged = true
        emit(.ping(id))
        deadlines.set(id, .keepalive, hangupAt, grain: grain)
    }
}
