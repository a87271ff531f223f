import CLibwebsockets
import Foundation
import Logging
import TabsyncServerCore

extension LoopDriver {
    /// What the loop knows to admit or refuse a connection: the per-address limits (at accept,
    /// before any TLS work), the origin policy (at the WebSocket upgrade), and which address each
    /// admitted connection came from, to give its slot back when it goes.
    ///
    /// Event loop thread only (a field of ``Server/Loop``).
    struct Admission {
        var control: AdmissionControl
        let origins: OriginPolicy
        /// The address of each admitted connection, by its wsi (only while a limit applies).
        var peers: [OpaquePointer: String] = [:]
        /// Admitted at `FILTER_NETWORK_CONNECTION`, not yet bound to its wsi: lws creates the wsi
        /// (`WSI_CREATE`) right after, on the same thread.
        var pending: String?
        var lastLogged: [ConnectionRefusal: ContinuousClock.Instant] = [:]
        var lastPrune = ContinuousClock.now

        init(configuration: Server.Configuration, loopbackBind: Bool) {
            control = AdmissionControl(limits: configuration.perIPLimits ?? (loopbackBind ? .unlimited : .exposed))
            origins = OriginPolicy(
                allowed: configuration.allowedOrigins, authEnabled: configuration.authEnabled,
                loopbackBind: loopbackBind)
        }
    }
}

extension LoopDriver {
    /// `FILTER_NETWORK_CONNECTION` (after the server-wide checks): the peer address's limits.
    /// `args` is lws's `lws_filter_network_conn_args`. True: go on.
    func admitPeer(_ args: UnsafeMutableRawPointer?) -> Bool {
        if let stale = admission.pending {
            // The previous admitted socket never became a wsi (lws failed to adopt it).
            admission.control.release(stale)
            admission.pending = nil
        }
        guard admission.control.isActive, let args else { return true }
        let address = Self.address(of: args.assumingMemoryBound(to: lws_filter_network_conn_args.self))
        let now = clock.now
        if now - admission.lastPrune > .seconds(10) {
            admission.control.prune(now: now)
            admission.lastPrune = now
        }
        if let refusal = admission.control.admit(address, now: now) {
            countRefusal(refusal, peer: address)
            return false
        }
        admission.pending = address
        return true
    }

    /// `WSI_CREATE`: binds the connection just admitted to its wsi.
    func peerConnectionCreated(_ wsi: OpaquePointer) {
        guard let address = admission.pending else { return }
        admission.pending = nil
        admission.peers[wsi] = address
    }

    /// `WSI_DESTROY`: gives the connection's slot back.
    func peerConnectionDestroyed(_ wsi: OpaquePointer) {
        guard let address = admission.peers.removeValue(forKey: wsi) else { return }
        admission.control.release(address)
    }

    /// At the WebSocket upgrade: the 403 answer when the page's `Origin` is not allowed, else nil.
    func originRefusal(_ wsi: OpaquePointer) -> HTTPResponse? {
        let length = Int(lws_hdr_total_length(wsi, WSI_TOKEN_ORIGIN))
        var origin: String?
        if length > 0 {
            var buffer = [CChar](repeating: 0, count: min(length, 4096) + 1)
            origin = lws_hdr_copy(wsi, &buffer, Int32(buffer.count), WSI_TOKEN_ORIGIN) >= 0
                ? String(nulTerminated: buffer) : ""
        }
        guard !admission.origins.allows(origin) else { return nil }
        countRefusal(.origin, peer: String((origin ?? "").prefix(128)))
        return HTTPResponse(status: 403, body: "origin not allowed\n")
    }

    /// Counts a refusal in `/metrics` and logs it, at most once per reason every 10 s.
    func countRefusal(_ refusal: ConnectionRefusal, peer: String) {
        metrics.connectionsRefused[refusal, default: 0] += 1
        let now = clock.now
        if admission.lastLogged[refusal].map({ now - $0 > .seconds(10) }) ?? true {
            admission.lastLogged[refusal] = now
            logger.warning("connection refused", metadata: [
                "reason": "\(refusal.rawValue)", refusal == .origin ? "origin" : "peer": "\(peer)",
            ])
        }
    }

    /// The peer's address as text (IPv4 dotted, IPv6 without brackets; a v4-mapped IPv6 address
    /// as its IPv4 form, so one host counts once).
    static func address(of args: UnsafeMutablePointer<lws_filter_network_conn_args>) -> String {
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        let family = Int32(args.pointee.cli_addr.ss_family)
        return withUnsafePointer(to: &args.pointee.cli_addr) { storage -> String in
            let raw = UnsafeRawPointer(storage)
            if family == AF_INET6 {
                var a = raw.assumingMemoryBound(to: sockaddr_in6.self).pointee.sin6_addr
                let bytes = withUnsafeBytes(of: a) { Array($0) }
                if bytes[0..<10].allSatisfy({ $0 == 0 }) && bytes[10] == 0xFF && bytes[11] == 0xFF {
                    return bytes[12...].map(String.init).joined(separator: ".")
                }
                inet_ntop(AF_INET6, &a, &buffer, socklen_t(buffer.count))
            } else {
                var a = raw.assumingMemoryBound(to: sockaddr_in.self).pointee.sin_addr
                inet_ntop(AF_INET, &a, &buffer, socklen_t(buffer.count))
            }
            return String(nulTerminated: buffer)
        }
    }
}
