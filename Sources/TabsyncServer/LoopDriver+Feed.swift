import CLibwebsockets
import TabsyncServerCore

/// The change feed's side of the driver (docs/design.md, "The change feed"; the rules are the
/// core's, ServerCore+Feed.swift): the streamed answer's head, its queue of whole events written in
/// pieces when the socket is writable, the bound on that queue (a reader that cannot keep up is
/// reported to the core, which ends its stream) and the end of the stream (the queue first).
extension LoopDriver {
    /// One open stream: its connection, the bytes not yet written, whether its head is out and
    /// whether it ends once the queue is empty.
    struct FeedStream {
        var wsi: OpaquePointer
        var queue: [UInt8] = []
        var started = false
        var ending = false
    }

    /// The largest piece written in one writable callback.
    static let feedPieceBytes = 16 * 1024

    /// Queues bytes to a stream; past `maxSendQueueBytes` the core hears that its reader is behind.
    func queueFeed(_ id: Int, _ bytes: [UInt8], raised: inout [ServerCore.Event]) {
        guard var stream = feedStreams[id], !stream.ending else { return }
        if stream.queue.count + bytes.count > configuration.limits.maxSendQueueBytes {
            // Cut, not buffered without bound: what is queued goes too (a half-written event is
            // dropped by the reader, which resumes from its last whole one).
            feedStreams[id]!.queue = []
            raised.append(.feedBacklogExceeded(id))
            return
        }
        stream.queue += bytes
        feedStreams[id] = stream
        lws_callback_on_writable(stream.wsi)
    }

    /// `HTTP_WRITEABLE` of a stream: the head first, then one piece of the queue; asks to be
    /// called again while bytes remain; closes the connection once an ending stream is flushed.
    func writeFeed(_ id: Int) -> Int32 {
        guard var stream = feedStreams[id] else { return 0 }
        if !stream.started {
            if clws_http_stream_start(stream.wsi, 200, "text/event-stream; charset=utf-8") != 0 { return -1 }
            stream.started = true
        } else if !stream.queue.isEmpty {
            let count = min(stream.queue.count, Self.feedPieceBytes)
            let failed = stream.queue.withUnsafeBufferPointer { clws_http_stream_write(stream.wsi, $0.baseAddress, count) }
            if failed != 0 { return -1 }
            stream.queue.removeFirst(count)
        }
        feedStreams[id] = stream
        if !stream.queue.isEmpty {
            lws_callback_on_writable(stream.wsi)
        } else if stream.ending {
            feedStreams[id] = nil
            return -1  // the stream ends with its connection; the reader resumes
        }
        return 0
    }

    /// Where a feed resumes: after a version, or from a snapshot (`nil`); `notAVersion` for a value
    /// that is not a whole number (answered 400).
    enum FeedResume: Equatable {
        case from(UInt64?)
        case notAVersion
    }

    /// `Last-Event-ID` first (as EventSource sends it when it reconnects), else `?after=V`.
    static func feedResume(_ wsi: OpaquePointer, query: String) -> FeedResume {
        if let header = lastEventId(wsi), !header.isEmpty {
            return UInt64(header).map { .from($0) } ?? .notAVersion
        }
        for pair in query.split(separator: "&") where pair.hasPrefix("after=") {
            return UInt64(pair.dropFirst("after=".count)).map { .from($0) } ?? .notAVersion
        }
        return .from(nil)
    }

    /// The `Last-Event-ID` header, if any.
    static func lastEventId(_ wsi: OpaquePointer) -> String? {
        customHeader(wsi, "last-event-id:", maxBytes: 64)
    }
}
