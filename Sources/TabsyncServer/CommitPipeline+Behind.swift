import Logging
import TabsyncCore
import TabsyncProto
import TabsyncStore

extension Server.Loop {
    /// The store refused batch `flight` whole because other nodes committed to some of its
    /// workspaces first (`reads`: what each of those missed, read on the store thread). Puts the
    /// batch back in front of the pipeline, brings each behind workspace up to the stored state
    /// (broadcasting the other nodes' ops), and re-sequences its unacknowledged entries against it
    /// (see ``CommitPipeline``, "Behind"). The caller sends the next batch.
    func commitBehind(_ flight: CommitPipeline.InFlight, _ reads: [String: CatchUpRead]) {
        metrics.commitsRetried += 1
        logger.debug("another node committed first; catching up and re-sequencing", metadata: [
            "workspaces": "\(reads.keys.sorted().joined(separator: ","))", "records": "\(flight.recordCount)",
        ])
        commits.requeue(flight)
        let entries = commits.take(workspaces: Set(reads.keys))
        for (id, read) in reads.sorted(by: { $0.key < $1.key }) {
            let mine = entries[id] ?? []
            guard case .loaded(let hub)? = workspaces[id], let stored = hub.stored else {
                refuseBehind(id, mine, .writeFailed("the workspace is being read back"))
                continue
            }
            switch read {
            case .caughtUp(let missed) where missed.from == stored.workspace.version:
                do throws(OpError) {
                    try takeStored(missed, into: hub, live: false)
                } catch {
                    refuseBehind(id, mine, .readFailed("the ops other nodes stored do not follow: \(error)"))
                    continue
                }
                resequence(mine, in: hub)
            case .caughtUp:
                refuseBehind(id, mine, .readFailed("the catch-up read does not start at this node's version"))
            case .compacted:
                refuseBehind(id, mine, .readFailed("the log no longer holds what this node missed"))
                if let hub = workspaces[id]?.hub {
                    for session in hub.sessions.values { close(session, code: 1013, reason: "behind the store: resume") }
                }
            case .failed(let error):
                refuseBehind(id, mine, error)
            }
        }
    }

    /// A behind workspace that cannot be caught up op by op takes the failure path: read back whole,
    /// its entries refused `UNAVAILABLE` (never acknowledged, so their clients send them again).
    private func refuseBehind(_ id: String, _ entries: [CommitPipeline.Entry], _ error: StoreError) {
        logger.error("cannot catch up after another node's commit", metadata: ["workspace": "\(id)", "error": "\(error)"])
        reload(id)
        for entry in entries { refuseUnavailable(entry.effect, error) }
    }

    /// Starts the hub's live state again from its stored state and runs its unacknowledged
    /// entries through the sequencer again, in order: each Submit as received (it may now be
    /// refused, placed elsewhere, translated through another node's rekey, or answered from
    /// dedup), each waiting `Welcome` made again from the live state at its place.
    private func resequence(_ entries: [CommitPipeline.Entry], in hub: WorkspaceHub) {
        hub.live = hub.stored!
        for entry in entries {
            if let input = entry.input {
                sequence(input, from: entry.effect.session, hub: hub)
            } else if case .welcome(_, let sessionId, _) = entry.effect {
                guard let session = sessions[sessionId], session.closing == nil, case .loading(let hello) = session.phase,
                      hub.welcoming.contains(sessionId)
                else {
                    hub.welcoming.remove(sessionId)
                    continue
                }
                commits.append(nil, .welcome(workspaceId: hub.id, session: sessionId, welcome: makeWelcome(session, hello, hub: hub)))
            } else {
                // Not made by a Submit nor a Hello: nothing left that could go out.
                logger.error("an entry without its Submit was dropped while re-sequencing", metadata: ["workspace": "\(hub.id)"])
            }
        }
    }
}
