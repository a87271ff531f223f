import TabsyncLoop
import Testing

/// ``OutBatch``: several server frames packed as complete WebSocket frames, one header per frame.
@Suite("Out batch")
struct OutBatchTests {
    @Test func aBatchHoldsCompleteFramesWithTheHeaderForEachLength() {
        var batch = OutBatch()
        defer { batch.deallocate() }
        let small = OutFrame(bytes: Array(repeating: 0x41, count: 5), isBinary: false)
        let medium = OutFrame(bytes: (0..<300).map { UInt8($0 & 0xFF) }, isBinary: true)
        let huge = OutFrame(bytes: Array(repeating: 7, count: 70_000), isBinary: true)
        #expect(batch.fits(small) && batch.fits(medium) && !batch.fits(huge))
        let appendedSmall = batch.append(small)
        let appendedMedium = batch.append(medium)
        let appendedHuge = batch.append(huge)
        #expect(appendedSmall && appendedMedium)
        #expect(!appendedHuge, "a frame over the capacity is refused, not cut")
        let bytes = Array(UnsafeBufferPointer(start: batch.payload, count: batch.count))
        #expect(bytes.count == 2 + 5 + 4 + 300)
        #expect(Array(bytes[0..<7]) == [0x81, 5, 0x41, 0x41, 0x41, 0x41, 0x41])
        #expect(Array(bytes[7..<11]) == [0x82, 126, 0x01, 0x2C])
        #expect(Array(bytes[11...]) == (0..<300).map { UInt8($0 & 0xFF) })
        batch.reset()
        #expect(batch.count == 0)
        #expect(OutBatch.headerSize(125) == 2 && OutBatch.headerSize(126) == 4)
        #expect(OutBatch.headerSize(65_535) == 4 && OutBatch.headerSize(65_536) == 10)
    }

    /// Every header length at its boundaries (RFC 6455 §5.2): 7-bit up to 125, 16-bit from 126 to
    /// 65,535, 64-bit from 65,536, each big-endian, in a batch large enough for all of them.
    @Test(arguments: [0, 1, 125, 126, 127, 65_535, 65_536, 70_000])
    func theHeaderCarriesTheLengthInItsShortestForm(length: Int) {
        var batch = OutBatch(capacity: 80_000)
        defer { batch.deallocate() }
        let payload = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let frame = OutFrame(bytes: payload, isBinary: length % 2 == 0)
        let appended = batch.append(frame)
        #expect(appended)
        let bytes = Array(UnsafeBufferPointer(start: batch.payload, count: batch.count))
        let expectedHeader: [UInt8]
        if length < 126 {
            expectedHeader = [UInt8(length)]
        } else if length <= 0xFFFF {
            expectedHeader = [126, UInt8(length >> 8), UInt8(length & 0xFF)]
        } else {
            expectedHeader = [127] + (0..<8).map { UInt8((UInt64(length) >> (8 * (7 - UInt64($0)))) & 0xFF) }
        }
        #expect(bytes[0] == (length % 2 == 0 ? 0x82 : 0x81), "FIN, then binary or text")
        #expect(Array(bytes[1..<(1 + expectedHeader.count)]) == expectedHeader)
        #expect(OutBatch.headerSize(length) == 1 + expectedHeader.count)
        #expect(Array(bytes[(1 + expectedHeader.count)...]) == payload)
    }

    /// A batch fills to exactly its capacity and refuses a frame one byte over, keeping what it held.
    @Test func aBatchFillsToItsCapacityAndNoFurther() {
        var batch = OutBatch(capacity: 2 + 10 + 2 + 5)
        defer { batch.deallocate() }
        let first = batch.append(OutFrame(bytes: Array(repeating: 1, count: 10), isBinary: true))
        let oneByteOver = batch.append(OutFrame(bytes: Array(repeating: 2, count: 6), isBinary: true))
        #expect(first && !oneByteOver)
        #expect(batch.count == 12)
        let exact = batch.append(OutFrame(bytes: Array(repeating: 3, count: 5), isBinary: true))
        #expect(exact)
        #expect(batch.count == batch.capacity)
    }

    /// A send queue counts each frame's cost (payload plus lws' headroom) until it is taken.
    @Test func aSendQueueCountsTheBytesOfTheFramesItHolds() {
        var queue = SendQueue()
        let a = OutFrame(bytes: Array(repeating: 1, count: 10), isBinary: true)
        let b = OutFrame(bytes: Array(repeating: 2, count: 20), isBinary: false)
        queue.append(a)
        queue.append(b)
        queue.append(a)
        #expect(queue.count == 3 && queue.bytes == 2 * a.queuedCost + b.queuedCost)
        #expect(a.queuedCost > a.count, "the headroom counts")
        #expect(queue.first === a)
        queue.removeFirst()
        #expect(queue.first === b && queue.bytes == a.queuedCost + b.queuedCost)
        queue.removeFirst()
        queue.removeFirst()
        #expect(queue.isEmpty && queue.bytes == 0 && queue.first == nil)
        for _ in 0..<200 { queue.append(b) }
        for _ in 0..<150 { queue.removeFirst() }
        #expect(queue.count == 50 && queue.bytes == 50 * b.queuedCost)
        queue.removeAll()
        #expect(queue.isEmpty && queue.bytes == 0)
    }
}
