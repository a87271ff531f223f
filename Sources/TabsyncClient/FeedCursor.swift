/// One item of a workspace's change feed (docs/design.md, "The change feed"): the JSON of its
/// event as the server wrote it, and the version that is its event id.
public enum FeedItem: Sendable, Equatable {
    /// The durable state at `version` (protobuf JSON of `Snapshot`): what the reader starts from.
    case snapshot(version: UInt64, json: String)
    /// The op that made `version` (protobuf JSON of `Applied`).
    case op(version: UInt64, json: String)

    public var version: UInt64 {
        switch self {
        case .snapshot(let version, _), .op(let version, _): version
        }
    }
}

/// Where a change-feed reader stands, and the rule that keeps what it hands on gap-free and
/// repeat-free across reconnects.
///
/// Guarantees: ``accept(_:)`` returns an item only when it follows what was accepted before: a
/// `snapshot` at any version (the server starts again from the state), an `op` only at
/// ``version`` + 1 (or at any version before anything was accepted and no `after` was given).
/// An `op` at or below ``version`` is a repeat and is dropped (nil); one past ``version`` + 1 is a
/// gap and throws, so the reader reconnects from ``version`` instead of skipping ops. Events of
/// another type, or without data, are ignored. ``version`` is what a reconnect sends as
/// `Last-Event-ID`.
public struct FeedCursor: Sendable, Equatable {
    /// The version of the last item accepted (or the `after` the reader started from); nil before
    /// anything (the server then starts with a snapshot).
    public private(set) var version: UInt64?

    public init(after: UInt64? = nil) {
        version = after
    }

    /// Why an event cannot be handed on.
    public enum Violation: Error, Sendable, Equatable, CustomStringConvertible {
        /// An `op` or `snapshot` event whose id is not a version.
        case notAVersion(String?)
        /// An `op` after `expected - 1` skipped versions: it was `got`.
        case gap(expected: UInt64, got: UInt64)

        public var description: String {
            switch self {
            case .notAVersion(let id): "a feed event whose id is not a version: \(id ?? "none")"
            case .gap(let expected, let got): "the feed skipped from version \(expected - 1) to \(got)"
            }
        }
    }

    /// The item `event` is, when it follows; nil for a repeat or an event of another type.
    public mutating func accept(_ event: ServerSentEvent) throws(Violation) -> FeedItem? {
        guard event.event == "op" || event.event == "snapshot" else { return nil }
        guard let text = event.id, let version = UInt64(text) else { throw .notAVersion(event.id) }
        if event.event == "snapshot" {
            self.version = version
            return .snapshot(version: version, json: event.data)
        }
        if let current = self.version {
            if version <= current { return nil }
            if version != current + 1 { throw .gap(expected: current + 1, got: version) }
        }
        self.version = version
        return .op(version: version, json: event.data)
    }
}
