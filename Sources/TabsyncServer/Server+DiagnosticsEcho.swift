import TabsyncLoop
import TabsyncProto

/// The diagnostics echo (`Configuration.diagnosticsEcho`, `--diagnostics-echo`; off by default):
/// subprotocol `tabsync.echo` on path `/`, the target of WebSocket conformance suites
/// (`scripts/autobahn` runs the Autobahn testsuite's fuzzing client against it).
///
/// Guarantees: a session on it never says Hello, never joins a workspace and never gets a tabsync
/// message; each message it sends (all its fragments) comes back whole as one frame with the same
/// opcode, in order, and nothing else does. It goes through the same receive and send paths as any
/// session, so the same limits hold: a message over `maxFrameBytes` is closed 1009, a queue over
/// `maxSendQueueBytes` 1013. lws itself answers pings, answers and checks close frames, and
/// checks the UTF-8 of text messages (close 1007). When the flag is off the name is not in lws'
/// protocol list, and an upgrade asking for it is refused like any unknown subprotocol (400).
///
/// One difference from tabsync sessions: an echo session's frames are written only from
/// `SERVER_WRITEABLE`, never at the end of the loop iteration (``flushQueued()``). lws sends a
/// pending pong before it raises `SERVER_WRITEABLE`, so a ping that arrived before a message was
/// complete is answered before the echo (Autobahn 5.6, 5.19, 5.20 check that order). Tabsync
/// sessions keep the end-of-iteration write, which batches broadcasts; there a pong may follow the
/// data queued in the same iteration, which RFC 6455 allows ("as soon as practical").
extension Server.Loop {
    /// The subprotocol's name.
    static let echoSubprotocol = "tabsync.echo"
    /// Its index in the context's protocol list: after `http` and the wire formats.
    static var echoProtocol: Int { 1 + WireFormat.allCases.count }

    /// Sends `message` back to the echo session as it came.
    func echo(_ session: Session, _ message: [UInt8], binary: Bool) {
        send(OutFrame(bytes: message, isBinary: binary), to: session)
    }
}
