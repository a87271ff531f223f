import Foundation
import SwiftProtobuf
import TabsyncCore
import TabsyncProto

/// `GET /v1/workspaces/{id}/events`: the workspace's change feed as Server-Sent Events
/// (docs/design.md, "The change feed").
///
/// Guarantees, for one stream: every event's `id:` is a version; an `op` event carries the
/// `Applied` of exactly that version, and a `snapshot` event the durable state at it; versions only
/// grow, each `op` is the one after the event before it (no gap, no repeat), and nothing is written
/// that is not durable. A resume (`Last-Event-ID`, or `?after=V`) continues from the version after it
/// when the log still holds every op since, else starts with a `snapshot`. On a shared store a node
/// behind the store (a reader resumes after a version another node wrote and this one has not read
/// yet) does not answer from what it holds: the stream waits for a catch-up read started after it
/// opened and continues from `after` once the node holds it; a `snapshot` below `after` is written
/// only when that read shows the store itself below it (another history). A silent stream gets a
/// comment line every `Settings.feedKeepAlive` (`--feed-keepalive`, 15 s). The stream ends (the
/// reader resumes) when its reader cannot keep up, its token expires or is revoked or its sub
/// kicked, the workspace is deleted, moves to another node or is read back at another history, and
/// when the server stops.
extension ServerCore {
    /// One open stream.
    struct Feed {
        var workspaceId: String
        /// The version of the last event written (an `op`'s, or a `snapshot`'s).
        var version: UInt64
        /// The token's grant, with access control on (what a revocation or a kick is matched with).
        var grant: AccessGrant?
        /// Set while the stream resumes after a version this node does not hold yet (`version` is
        /// then the reader's, above the node's durable one): the serial of the last catch-up read
        /// started before it opened. Only a read with a later serial shows whether the store holds
        /// `version` (``CatchUpState/readsStarted``).
        var awaitsReadAfter: UInt64? = nil
    }

    /// How a stream opens at `after` on a node whose durable state is at `durable`.
    enum Opening: Equatable {
        /// The ops after `after`, from the log (none when the reader is at `durable`).
        case ops
        /// The durable state: `after` is nil, older than the log, or above a store that is read.
        case snapshot
        /// The reader is past this node, which may be behind the store: read the store first.
        case catchUpFirst
    }

    /// The decision: `logHoldsAfter` says whether the log still holds every op after `after`,
    /// `sharedStore` whether other nodes write the store (this node's state may be behind it), and
    /// `storeRead` whether a catch-up read started after the reader asked has come back (the node
    /// then holds what the store held when the reader asked).
    static func opening(after: UInt64?, durable: UInt64, logHoldsAfter: Bool, sharedStore: Bool, storeRead: Bool) -> Opening {
        guard let after else { return .snapshot }
        if after > durable { return sharedStore && !storeRead ? .catchUpFirst : .snapshot }
        return logHoldsAfter ? .ops : .snapshot
    }

    /// The request, as the driver read it: the workspace id of the path, the version to resume
    /// after (`Last-Event-ID` first, else `?after=`; nil: from a snapshot) and the bearer token.
    mutating func feedRequested(_ requestId: RequestID, workspaceId id: String, after: UInt64?, bearerToken: String?) {
        guard shutdown == .running else { return emit(.respond(requestId, .draining)) }
        if settings.accessControl {
            guard let token = bearerToken else { return emit(.respond(requestId, .unauthorized)) }
            pendingHTTP[requestId] = PendingHTTP(workspaceId: id, authorizing: true, feed: FeedStart(after: after))
            emit(.verifyToken(.http(requestId), token))
            return
        }
        guard Validation.isValidWorkspaceId(id) else { return emit(.respond(requestId, .notFound)) }
        startFeed(requestId, id, FeedStart(after: after), grant: nil)
    }

    /// Opens the stream once the workspace is in memory (it loads first when it is not).
    mutating func startFeed(_ requestId: RequestID, _ id: String, _ start: FeedStart, grant: AccessGrant?) {
        guard !isBeingDeleted(id) else { return emit(.respond(requestId, .notFound)) }
        guard workspaces.hub(id) != nil else {
            pendingHTTP[requestId] = PendingHTTP(workspaceId: id, authorizing: false, feed: start, grant: grant)
            requestLoad(id)
            return
        }
        openFeed(requestId, id, start, grant: grant)
    }

    /// Writes the headers and what the reader missed: nothing when it is at the durable version,
    /// the ops after its version when the log holds them all, else a snapshot.
    private mutating func openFeed(_ requestId: RequestID, _ id: String, _ start: FeedStart, grant: AccessGrant?) {
        guard let hub = workspaces.hub(id) else { return emit(.respond(requestId, .storeUnavailable)) }
        emit(.feedOpen(requestId))
        let durable = hub.durable
        var feed = Feed(workspaceId: id, version: durable.version, grant: grant)
        var bytes: [UInt8] = []
        let missed = start.after.flatMap { after in
            after <= durable.version ? hub.live.missed(after: after)?.prefix(while: { $0.version <= durable.version }) : nil
        }
        let logHoldsAfter = start.after.map { $0 <= durable.version && missed?.count == Int(durable.version - $0) } ?? false
        switch Self.opening(
            after: start.after, durable: durable.version, logHoldsAfter: logHoldsAfter,
            sharedStore: hub.stored != nil, storeRead: false)
        {
        case .ops:
            for applied in missed ?? [] { bytes += Self.feedEvent(applied) }
        case .snapshot:
            bytes = Self.feedSnapshot(durable)
        case .catchUpFirst:
            // Nothing yet: the ops up to `after` come with the catch-up and are not written (the
            // reader has them); those after it are, in order (``feedApplied``).
            feed.version = start.after!
            feed.awaitsReadAfter = catchUps.readsStarted
        }
        if !bytes.isEmpty { emit(.feedWrite(requestId, bytes)) }
        feeds[requestId] = feed
        feedsByWorkspace[id, default: []].insert(requestId)
        armFeed(requestId)
        metrics.feedsOpened += 1
        if feed.awaitsReadAfter != nil { heardOf(id, version: feed.version) }
    }

    /// A catch-up read of `id` (serial `serial`) is back and applied, or the workspace was read
    /// back whole. The streams it settles (those that waited for a read started after they
    /// opened): each still above the node's durable version is above the store too, and starts
    /// again from a `snapshot` of it (another history: docs/design.md, "The change feed"); the
    /// others already had every op after their version written. Those waiting on an older read ask
    /// for a new one. `failed`: the store could not say; they end, and their readers resume.
    mutating func settleFeeds(of id: String, readSerial serial: UInt64?, failed: Bool = false) {
        guard let ids = feedsByWorkspace[id], let hub = workspaces.hub(id) else { return }
        var readAgain: UInt64? = nil
        for requestId in ids.sorted() {
            guard var feed = feeds[requestId], let waited = feed.awaitsReadAfter else { continue }
            let storeRead = serial.map { $0 > waited } ?? false
            switch Self.opening(
                after: feed.version, durable: hub.durable.version, logHoldsAfter: true, sharedStore: true, storeRead: storeRead)
            {
            case .ops:
                // The node caught up: every op after the reader's version went out as it came.
                feeds[requestId]!.awaitsReadAfter = nil
                continue
            case .catchUpFirst:
                readAgain = max(readAgain ?? 0, feed.version)
                continue
            case .snapshot where failed:
                endFeed(requestId)
                continue
            case .snapshot:
                break
            }
            logger.info("feed reader is past the store: snapshot", metadata: [
                "workspace": "\(id)", "after": "\(feed.version)", "store": "\(hub.durable.version)",
            ])
            emit(.feedWrite(requestId, Self.feedSnapshot(hub.durable)))
            armFeed(requestId)
            feed.version = hub.durable.version
            feed.awaitsReadAfter = nil
            feeds[requestId] = feed
        }
        if let readAgain { heardOf(id, version: readAgain) }
    }

    /// Durable ops of a workspace, in version order: written to each of its streams.
    mutating func feedApplied(_ ops: some Sequence<AppliedOp>, of workspaceId: String) {
        guard let ids = feedsByWorkspace[workspaceId], !ids.isEmpty else { return }
        var events: [(version: UInt64, bytes: [UInt8])] = []
        for applied in ops { events.append((applied.version, Self.feedEvent(applied))) }
        guard !events.isEmpty else { return }
        for requestId in ids.sorted() {
            guard var feed = feeds[requestId] else { continue }
            var bytes: [UInt8] = []
            for event in events where event.version > feed.version {
                guard event.version == feed.version + 1 else {
                    // Not the next version: this stream cannot continue without a gap.
                    logger.warning("feed gap", metadata: ["workspace": "\(workspaceId)", "at": "\(feed.version)"])
                    endFeed(requestId)
                    bytes = []
                    break
                }
                bytes += event.bytes
                feed.version = event.version
            }
            guard feeds[requestId] != nil else { continue }
            if !bytes.isEmpty {
                emit(.feedWrite(requestId, bytes))
                armFeed(requestId)
            }
            feeds[requestId] = feed
        }
    }

    /// The feed's deadline came: its token's `exp` (the stream ends, as a session is closed then),
    /// else a comment line (readers ignore it, proxies see traffic).
    mutating func feedKeepAliveDue(_ requestId: RequestID) {
        guard let feed = feeds[requestId] else { return }
        if let grant = feed.grant, grant.isExpired(at: wallNow) {
            logger.info("feed ended: token expired", metadata: ["workspace": "\(feed.workspaceId)"])
            return endFeed(requestId)
        }
        emit(.feedWrite(requestId, Array(": keep-alive\n\n".utf8)))
        armFeed(requestId)
    }

    /// The feed's next deadline: a keep-alive after `Settings.feedKeepAlive` of silence, or its
    /// token's `exp` when that comes first.
    private mutating func armFeed(_ requestId: RequestID) {
        var at = now + settings.feedKeepAlive
        if let expiresAt = feeds[requestId]?.grant?.expiresAt {
            let seconds = max(0, min(expiresAt.timeIntervalSince(wallNow), 3_153_600_000))
            at = min(at, now + .milliseconds(Int64(seconds * 1000) + 1))
        }
        deadlines.set(requestId, .feed, at, grain: .milliseconds(100))
    }

    /// Ends a stream: the driver closes it (the reader resumes from its last id).
    mutating func endFeed(_ requestId: RequestID, tellDriver: Bool = true) {
        guard let feed = feeds.removeValue(forKey: requestId) else { return }
        feedsByWorkspace[feed.workspaceId]?.remove(requestId)
        if feedsByWorkspace[feed.workspaceId]?.isEmpty == true { feedsByWorkspace[feed.workspaceId] = nil }
        deadlines.removeAll(requestId)
        if tellDriver { emit(.feedClose(requestId)) }
        unloadIfIdle(feed.workspaceId)
    }

    /// Ends every stream of a workspace (deleted, moved, read back at another history).
    mutating func endFeeds(of workspaceId: String) {
        for requestId in (feedsByWorkspace[workspaceId] ?? []).sorted() { endFeed(requestId) }
    }

    /// Ends the streams whose grant `matches` (a revocation, a kick).
    mutating func endFeeds(where matches: (AccessGrant, String) -> Bool) {
        let ended = feeds.filter { _, feed in feed.grant.map { matches($0, feed.workspaceId) } ?? false }.keys.sorted()
        for requestId in ended { endFeed(requestId) }
    }

    /// True when a stream follows the workspace (it stays loaded).
    func hasFeeds(_ workspaceId: String) -> Bool {
        !(feedsByWorkspace[workspaceId]?.isEmpty ?? true)
    }

    // MARK: the wire form

    /// `id: V`, `event: op`, `data:` the `Applied` as protobuf JSON (one line: JSON holds no raw
    /// newline), and the blank line that ends an event.
    static func feedEvent(_ applied: AppliedOp) -> [UInt8] {
        event("op", version: applied.version, Tabsync_V1_Applied(applied))
    }

    /// The durable state as a `snapshot` event at its version.
    static func feedSnapshot(_ workspace: Workspace) -> [UInt8] {
        event("snapshot", version: workspace.version, Tabsync_V1_Snapshot(workspace))
    }

    private static func event(_ name: String, version: UInt64, _ message: some SwiftProtobuf.Message) -> [UInt8] {
        let json = (try? message.jsonUTF8Bytes()) ?? Array("{}".utf8)
        return Array("id: \(version)\nevent: \(name)\ndata: ".utf8) + json + Array("\n\n".utf8)
    }
}

/// How a stream starts: the version the reader has (nil: none, a snapshot first).
struct FeedStart: Equatable {
    var after: UInt64?
}
