import Foundation
import TabsyncLoop
import Testing

/// ``LoopInbox``: other threads' tasks reach the loop thread, in order, and wake it.
@Suite("Loop inbox")
struct LoopInboxTests {
    /// 1,000 posts from another thread, while the loop blocks in its wait, all arrive in order; the
    /// loop is woken per batch, not per post.
    @Test(arguments: [EventLoop.Backend.epoll, .poll])
    func postsFromAnotherThreadWakeTheLoopAndArriveInOrder(backend: EventLoop.Backend) throws {
        let probe = try LoopProbe(backend: backend)
        let inbox = probe.inbox
        let count = 1_000
        let poster = Thread {
            for i in 0..<count { inbox.post(i) }
        }
        poster.start()
        let arrived = probe.run(for: .seconds(20)) { probe.received.count == count }
        #expect(arrived, "only \(probe.received.count) of \(count) tasks arrived")
        #expect(probe.received == Array(0..<count))
        #expect(probe.wakeups >= 1)
    }

    /// Tasks posted before the loop exists wake it as soon as the inbox is attached.
    @Test(arguments: [EventLoop.Backend.epoll, .poll])
    func tasksPostedBeforeAttachWakeTheLoopAtAttach(backend: EventLoop.Backend) throws {
        let inbox = LoopInbox<Int>()
        #expect(inbox.post(1) && inbox.post(2) && inbox.post(3))
        let probe = try LoopProbe(backend: backend, inbox: inbox)
        let arrived = probe.run(for: .seconds(20)) { probe.received.count == 3 }
        #expect(arrived)
        #expect(probe.received == [1, 2, 3])
    }

    /// A final post is accepted once; later posts are refused, the final task still arrives last.
    @Test func afterAFinalPostEveryPostIsRefused() {
        let inbox = LoopInbox<Int>()
        #expect(inbox.post(1))
        #expect(inbox.postFinal(99))
        #expect(!inbox.post(2))
        #expect(!inbox.postFinal(100))
        var taken: [Int] = []
        inbox.take(into: &taken)
        #expect(taken == [1, 99])
    }

    /// After close, posts are refused and what was queued is dropped.
    @Test func afterCloseEveryPostIsRefused() {
        let inbox = LoopInbox<Int>()
        #expect(inbox.post(1))
        inbox.close()
        #expect(!inbox.post(2))
        #expect(!inbox.postFinal(3))
        var taken: [Int] = []
        inbox.take(into: &taken)
        #expect(taken.isEmpty)
    }

    /// Taking into a buffer that still holds tasks appends, oldest first.
    @Test func takingIntoANonEmptyBufferAppends() {
        let inbox = LoopInbox<Int>()
        inbox.post(3)
        inbox.post(4)
        var taken = [1, 2]
        inbox.take(into: &taken)
        #expect(taken == [1, 2, 3, 4])
        inbox.take(into: &taken)
        #expect(taken == [1, 2, 3, 4])
    }
}
