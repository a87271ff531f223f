import CLibwebsockets

/// The server's write path: sends the head of a connection's ``SendQueue`` through `lws_write`,
/// one frame as it is or several packed into one raw send (``OutBatch``), while lws holds nothing
/// back for the connection.
///
/// Invariants (lws 4.1.6):
/// - **When a write is allowed at all:** only while `lws_partial_buffered(wsi) == 0`. Non-zero
///   means lws still holds unsent bytes of an earlier write for this connection (the kernel did
///   not take them all); lws sends them when the socket drains and then raises `WRITEABLE`.
///   Writing meanwhile would pile bytes up inside lws, outside the send queue's byte bound (or be
///   refused, depending on the lws version); so ``write(_:to:ownsConnection:maxWrites:)`` checks it
///   before every send and stops, and the caller asks `lws_callback_on_writable` for the rest.
///   A write from outside `WRITEABLE` is fine under the same check (lws' "one write per callback"
///   rule exists for HTTP/2, see below).
/// - **When a raw (batched) write is allowed:** only on a connection the session owns
///   (`ownsConnection`, ``ownsConnection(_:)``: `lws_get_network_wsi(wsi) == wsi`), never on a
///   stream muxed on HTTP/2, whose bytes lws must wrap in DATA frames; only for server frames
///   (unmasked) with no extension negotiated (the server's context offers none); and only whole
///   frames, so lws' own framing state (`inside_frame`) is never mid-frame. Any other connection
///   gets one `LWS_WRITE_TEXT`/`LWS_WRITE_BINARY` write per frame.
/// - **The flags:** `LWS_WRITE_TEXT` / `LWS_WRITE_BINARY` make lws write the frame header into the
///   `LWS_PRE` headroom before the payload (the same bytes for every receiver of a shared
///   ``OutFrame``); `LWS_WRITE_HTTP` makes lws send the bytes as they are: the batch is already
///   framed. Either way lws keeps what the socket does not take (see `lws_partial_buffered`).
///
/// Not `Sendable`; event loop thread only. One per loop: its batch buffer is reused for every write.
public final class BatchedWriter {
    /// What one ``write(_:to:ownsConnection:maxWrites:)`` did, for the caller's counters.
    public struct Written: Equatable {
        /// `lws_write` calls made.
        public var writes = 0
        /// Frames taken off the queue (and handed to lws).
        public var frames = 0
        /// Their payload bytes.
        public var bytes = 0
        /// lws refused a write: the connection is broken; close it.
        public var failed = false

        public init(writes: Int = 0, frames: Int = 0, bytes: Int = 0, failed: Bool = false) {
            self.writes = writes
            self.frames = frames
            self.bytes = bytes
            self.failed = failed
        }
    }

    private var batch: OutBatch

    public init(batchCapacity: Int = OutBatch.defaultCapacity) {
        batch = OutBatch(capacity: batchCapacity)
    }

    deinit { batch.deallocate() }

    /// Whether `wsi` is its own network connection (HTTP/1 WebSocket), not a stream muxed on
    /// HTTP/2: only then may frames go out as one raw write.
    public static func ownsConnection(_ wsi: OpaquePointer) -> Bool {
        lws_get_network_wsi(wsi) == wsi
    }

    /// Whether lws holds nothing back for `wsi`, so a write may go out now.
    @inlinable
    public static func mayWrite(_ wsi: OpaquePointer) -> Bool {
        lws_partial_buffered(wsi) == 0
    }

    /// Writes the head of `queue` while lws holds nothing back, at most `maxWrites` sends: each
    /// send is one frame (a single frame queued, a connection not owned, a frame over the batch
    /// capacity) or as many whole frames as fit a batch. Stops at the first refused write.
    public func write(
        _ queue: inout SendQueue, to wsi: OpaquePointer, ownsConnection: Bool, maxWrites: Int
    ) -> Written {
        var written = Written()
        while written.writes < maxWrites, !queue.isEmpty, lws_partial_buffered(wsi) == 0 {
            if !writeHead(&queue, to: wsi, ownsConnection: ownsConnection, into: &written) {
                written.failed = true
                break
            }
        }
        return written
    }

    /// One send from the head of the queue. Counts a batch's frames even when lws refuses it (they
    /// left the queue); a refused single frame stays queued and is not counted.
    private func writeHead(
        _ queue: inout SendQueue, to wsi: OpaquePointer, ownsConnection: Bool, into written: inout Written
    ) -> Bool {
        guard let first = queue.first else { return true }
        if queue.count == 1 || !ownsConnection || !batch.fits(first) {
            let n = lws_write(wsi, first.payload, first.count, first.isBinary ? LWS_WRITE_BINARY : LWS_WRITE_TEXT)
            guard n >= 0 else { return false }
            queue.removeFirst()
            written.writes += 1
            written.frames += 1
            written.bytes += first.count
            return true
        }
        batch.reset()
        while let frame = queue.first, batch.append(frame) {
            queue.removeFirst()
            written.frames += 1
            written.bytes += frame.count
        }
        written.writes += 1
        // Already framed: lws sends the bytes as they are (and keeps what the socket does not take).
        return lws_write(wsi, batch.payload, batch.count, LWS_WRITE_HTTP) >= 0
    }
}
