import CLibwebsockets

/// The client's write path: one `lws_write` per frame, the frame copied first into one reusable
/// buffer with `LWS_PRE` headroom.
///
/// A client cannot share a frame buffer the way the server does (``OutFrame``): lws masks a
/// client's payload in place, with a fresh mask per frame. The same rules as
/// ``BatchedWriter``'s hold for when to write: only while `lws_partial_buffered(wsi) == 0`
/// (``BatchedWriter/mayWrite(_:)``), else wait for `CLIENT_WRITEABLE`; lws keeps what the socket
/// does not take at once and sends it on POLLOUT.
///
/// Not `Sendable`; loop thread only. The buffer grows to the largest frame written and stays.
public final class ScratchWriter {
    private let pre = Int(clws_pre())
    private var buffer: UnsafeMutableRawPointer
    private var capacity: Int

    public init(capacity: Int = 16 << 10) {
        self.capacity = capacity
        buffer = .allocate(byteCount: pre + capacity, alignment: 16)
    }

    deinit { buffer.deallocate() }

    /// Writes `frame` as one text or binary message; returns `lws_write`'s result: the bytes lws
    /// took (all of them, buffering what the socket did not), or a negative value when it refused
    /// (the connection is broken).
    public func write(_ frame: [UInt8], binary: Bool, to wsi: OpaquePointer) -> Int {
        frame.withUnsafeBytes { write($0, binary: binary, to: wsi) }
    }

    /// As ``write(_:binary:to:)``, from raw bytes.
    public func write(_ frame: UnsafeRawBufferPointer, binary: Bool, to wsi: OpaquePointer) -> Int {
        if frame.count > capacity {
            buffer.deallocate()
            capacity = max(frame.count, capacity * 2)
            buffer = .allocate(byteCount: pre + capacity, alignment: 16)
        }
        let payload = buffer + pre
        if let base = frame.baseAddress, frame.count > 0 { payload.copyMemory(from: base, byteCount: frame.count) }
        let kind = binary ? LWS_WRITE_BINARY : LWS_WRITE_TEXT
        return Int(lws_write(wsi, payload.assumingMemoryBound(to: UInt8.self), frame.count, kind))
    }
}
