import ArgumentParser
import TabsyncClient
import TabsyncCore
import TabsyncLock
import TabsyncProto
import TabsyncTerminal
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension BarModel.Position: ExpressibleByArgument {}

struct BarCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bar",
        abstract: "The live tab bar, full screen (press ? inside for the keys).",
        discussion: """
            Keys: ←/→ or h/l previous/next tab; Shift+←/→ or H/L move the tab; 1–9 go to a position; \
            n new tab; x close; r rename; b badge; k lock/unlock; e toggle editable; o overflow list; \
            g group the tab with the next one; G put it into a group by title; d ungroup it; t rename its \
            group; c/C cycle the group's colour; f follow/browse mode; ? help; q quit. Groups show as \
            their title in their colour before their tabs; with NO_COLOR set or --no-color, as \
            {title … }.
            """)

    @OptionGroup var connection: ConnectionOptions
    @Argument(help: "The workspace (overrides --workspace).") var workspaceName: String?
    @Option(help: "Where the bar goes: top or bottom.") var position: BarModel.Position = .top
    @Flag(help: "No colours: groups are marked {title … } (also when NO_COLOR is set and not empty).")
    var noColor = false

    func validate() throws {
        if let workspaceName, !ConnectionOptions.isValidWorkspace(workspaceName) {
            throw ValidationError("WORKSPACE must be 1–64 chars of [A-Za-z0-9._-]")
        }
    }

    func run() async throws {
        let terminal: Terminal
        let inbox: BarInbox
        do {
            terminal = try Terminal()
            inbox = try BarInbox()
        } catch {
            throw CommandError.failed("tabsync bar: \(error)")
        }
        var options = connection
        options.clientId = options.clientId ?? ClientIdentity.stableId()
        let tracker = OpTimer(clientId: options.clientId ?? "")
        let c = try await Connection.open(options, workspace: workspaceName) { event in
            for barEvent in BarCommand.translate(event, tracker: tracker) { inbox.post(barEvent) }
        }
        defer { c.close() }
        let state = c.client.state
        let size = terminal.size()
        var model = BarModel(
            server: c.server, clientId: c.client.configuration.clientId, workspace: state.optimistic,
            rows: size.rows, cols: size.cols, position: position, limits: state.limits ?? .default,
            idPrefix: ClientIdentity.randomId(prefix: "t-", count: 8),
            color: !noColor && (getenv("NO_COLOR").map { String(cString: $0) } ?? "").isEmpty)
        _ = model.handle(.link(BarCommand.link(state.connection)))
        _ = model.handle(.presence(state.peers))
        _ = model.handle(.othersCount(state.othersCount))
        c.client.focus(model.viewedTabId)

        do {
            try SignalPipe.install(BarLoop.signals)
            try terminal.enter()
        } catch {
            terminal.restore()
            throw CommandError.failed("tabsync bar: \(error)")
        }
        let exit = BarLoop.run(
            model: &model, terminal: terminal, inbox: inbox,
            tick: {
                let s = c.client.state
                var events: [BarEvent] = [.stats(
                    rttMillis: tracker.lastMillis, pending: s.pending.count + s.held.count + s.unsequenced)]
                if case .waiting(_, let delay) = s.connection, let left = tracker.secondsLeft(delay) {
                    events.append(.link(.reconnecting(seconds: left)))
                }
                return events
            },
            perform: { action in
                switch action {
                case .submit(let op):
                    let seq = c.client.submit(op)
                    tracker.started(seq)
                    inbox.post(.workspace(c.client.state.optimistic))
                case .focus(let tabId):
                    c.client.focus(tabId)
                case .loadClosed(let limit):
                    let client = c.client
                    Task {
                        do throws(ClientError) {
                            let closed = try await client.recentlyClosed(limit: UInt32(limit))
                            inbox.post(.closedTabs(closed.map { Tab($0.tab) }))
                        } catch {
                            inbox.post(.closedTabs(nil, error: "\(error)"))
                        }
                    }
                case .quit:
                    break
                }
                return nil
            })
        terminal.restore()
        SignalPipe.uninstall(BarLoop.signals)
        switch exit {
        case .quit, .inputClosed:
            return
        case .signal(let signo):
            c.close()
            Glibc.exit(128 + signo)
        case .stopped(let why):
            throw CommandError.failed(why)
        }
    }

    static func link(_ state: ConnectionState) -> LinkState {
        switch state {
        case .idle, .connecting, .awaitingWelcome: .connecting
        case .ready: .connected
        case .waiting(_, let delay): .reconnecting(seconds: max(0, Int((delay / .seconds(1)).rounded(.up))))
        case .closed: .offline("closed")
        }
    }

    /// The bar's events for one client event. Called on the client's thread with its lock held:
    /// only posts, never calls the client.
    static func translate(_ event: ClientEvent, tracker: OpTimer) -> [BarEvent] {
        switch event {
        case .connection(let state):
            if case .waiting = state { tracker.waitingStarted() }
            return [.link(link(state))]
        case .workspace(let ws):
            return [.workspace(ws)]
        case .applied(let applied):
            tracker.finished(applied.seq, clientId: applied.clientId)
            return [.applied(applied)]
        case .rejected(let rejection):
            tracker.finished(rejection.firstSeq, clientId: tracker.clientId)
            return [.rejected(code: rejection.code, message: rejection.message)]
        case .retrying(let rejection, let delay):
            // Held, still shown, sent again: a notice, not a refusal (nothing was rolled back).
            let code = rejection.code?.wireName ?? "?"
            return [.notice("retrying in \(max(1, Int((delay / .seconds(1)).rounded(.up)))) s: the server answered \(code)")]
        case .presence(let peers):
            return [.presence(peers)]
        case .othersCount(let count):
            return [.othersCount(count)]
        case .serverError(let code, let message):
            return [.notice("server error: " + (code.map { $0.wireName + ": " } ?? "") + message)]
        case .resync(let reason):
            return [.notice("resyncing: \(reason)")]
        case .historyReplaced(let replaced):
            // Not removals: the server's history was replaced (a store brought back from a backup).
            return [.notice("the server's history was replaced (version \(replaced.previousVersion) → \(replaced.version)): showing its state")]
        case .answerGone(let seq, _):
            tracker.finished(seq, clientId: tracker.clientId)
            return []
        case .history:
            return []
        case .disconnected(let ending):
            return [.notice("connection ended: \(ending)")]
        case .welcomed:
            return [.notice("")]
        }
    }
}

/// Round-trip times of this terminal's ops (submit to its `Applied` or `Rejected`) and the start of
/// the current reconnect wait. Any thread.
final class OpTimer: Sendable {
    private struct State {
        var started: [UInt64: ContinuousClock.Instant] = [:]
        var lastMillis: Int?
        var waitingSince: ContinuousClock.Instant?
    }
    private let state = Lock(State())
    let clientId: String

    init(clientId: String) { self.clientId = clientId }

    func started(_ seq: UInt64?) {
        guard let seq else { return }
        state.withLock { $0.started[seq] = .now }
    }

    /// An answer to `seq` of `clientId` arrived; only this terminal's own ops count.
    func finished(_ seq: UInt64, clientId: String) {
        guard clientId == self.clientId else { return }
        state.withLock { s in
            guard let start = s.started.removeValue(forKey: seq) else { return }
            let elapsed = ContinuousClock.now - start
            s.lastMillis = Int(elapsed / .milliseconds(1))
        }
    }

    var lastMillis: Int? { state.withLock { $0.lastMillis } }

    func waitingStarted() { state.withLock { $0.waitingSince = .now } }

    /// Whole seconds left of a reconnect wait of `delay` that started at the last `waitingStarted`.
    func secondsLeft(_ delay: Duration) -> Int? {
        state.withLock { s in
            guard let since = s.waitingSince else { return nil }
            let left = delay - (ContinuousClock.now - since)
            return max(0, Int((left / .seconds(1)).rounded(.up)))
        }
    }
}
