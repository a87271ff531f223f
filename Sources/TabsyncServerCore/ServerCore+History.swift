import Foundation
import SwiftProtobuf
import TabsyncCore
import TabsyncProto
import TabsyncStore

/// History (docs/design.md, "History"): reads of past ops, states and closed tabs over HTTP and
/// over an open session, and the two ops that need one first (`restore`, `reopen`).
///
/// Guarantees:
/// - Every history read goes to the store off the loop (``Action/readHistory(_:)``) and shows only
///   what is durable.
/// - A `restore` or `reopen` is sequenced with its client's other ops in seq order: while its read
///   is out, the session's later Submits wait (``SessionMachine/historyHold``); it is then
///   sequenced as the op it resolved to (a restore with the state at its version, an `add` of the
///   closed tab), or refused for good with the read's refusal, or refused `UNAVAILABLE` (nothing
///   consumed) when the store could not be read, so the client's outbox sends it again.
extension ServerCore {
    /// One history read for the store, and who waits for it (kept in ``HistoryReads``).
    package struct HistoryCall: Sendable, Equatable {
        package var id: UInt64
        package var workspaceId: String
        package var read: HistoryRead
    }

    /// Who waits for a history read.
    enum HistoryAsker {
        /// An HTTP request.
        case http(RequestID)
        /// A session's `HistoryQuery`, answered with this id.
        case query(ConnectionID, queryId: UInt32)
        /// A session's restore or reopen, sequenced once resolved.
        case submit(ConnectionID, SubmitInput)
    }

    /// The history reads out at the store and who waits for each, numbered in the order asked.
    struct HistoryReads {
        private var waiting: [UInt64: HistoryAsker] = [:]
        private var last: UInt64 = 0

        /// Numbers a new read for `asker`.
        mutating func add(_ asker: HistoryAsker) -> UInt64 {
            last += 1
            waiting[last] = asker
            return last
        }

        /// Who waited for read `id`, now answered (nil: nobody any more).
        mutating func answered(_ id: UInt64) -> HistoryAsker? { waiting.removeValue(forKey: id) }

        /// An HTTP request went away: its read's answer goes nowhere.
        mutating func forgetRequest(_ request: RequestID) {
            for (id, asker) in waiting { if case .http(request) = asker { waiting[id] = nil } }
        }
    }

    /// Asks the store for a history read.
    mutating func readHistory(_ read: HistoryRead, of workspaceId: String, for asker: HistoryAsker) {
        let id = historyReads.add(asker)
        emit(.readHistory(HistoryCall(id: id, workspaceId: workspaceId, read: read)))
    }

    /// The store answered a history read.
    mutating func historyRead(_ call: HistoryCall, _ result: Result<HistoryResult, HistoryFailure>) {
        guard let asker = historyReads.answered(call.id) else { return }
        switch asker {
        case .http(let requestId):
            emit(.respond(requestId, httpHistoryResponse(call, result)))
        case .query(let id, let queryId):
            var answer = historyAnswer(call, result)
            answer.id = queryId
            send(Tabsync_V1_ServerMessage(history: answer), to: id)
        case .submit(let id, let input):
            resolved(input, from: id, call: call, result)
        }
    }

    // MARK: ops that need history

    /// A `restore` or `reopen` with a new seq: its read goes out and the session's later Submits
    /// wait for it. False when the op is to be sequenced as it is (a seq already consumed gets its
    /// answer again; an invalid one is refused by the sequencer).
    mutating func awaitHistory(_ input: SubmitInput, _ op: TabsyncCore.Operation, from id: ConnectionID, workspaceId: String) -> Bool {
        guard input.seq > 0, let live = workspaces.hub(workspaceId)?.live, input.seq > live.lastSeq(of: input.clientId) else {
            return false
        }
        let read: HistoryRead
        switch op {
        case .restore(let version, nil): read = .version(version)
        case .reopen(let tabId) where Validation.isValidTabId(tabId): read = .closedTab(tabId)
        default: return false
        }
        sessions[id]!.historyHold = true
        readHistory(read, of: workspaceId, for: .submit(id, input))
        return true
    }

    /// The read a restore or reopen waited for came back: sequence what it resolved to, then the
    /// session's Submits that waited behind it.
    private mutating func resolved(
        _ input: SubmitInput, from id: ConnectionID, call: HistoryCall, _ result: Result<HistoryResult, HistoryFailure>
    ) {
        guard sessions[id] != nil else { return }  // gone: its seq was not consumed; it comes again
        sessions[id]!.historyHold = false
        followUp(.deferredMessages(id))
        guard sessions[id]!.closing == nil, case .joined = sessions[id]!.phase,
              workspaces.phase(call.workspaceId) == .loaded, let live = workspaces.hub(call.workspaceId)?.live
        else {
            return reject(id, seq: input.seq, code: .unavailable, message: "the workspace is reloading; try again")
        }
        var input = input
        switch (call.read, result) {
        case (.version(let version), .success(.state(let state))):
            var restored = RestoredState(state)
            // Only a role that may set editable restores it (docs/security.md); others keep today's.
            if let access = sessions[id]!.access, !access.role.permits(.setEditable(Tabsync_V1_SetEditable())) {
                restored.editable = live.workspace.editable
            }
            input.request = .op(.restore(version: version, state: restored))
        case (.closedTab, .success(.closed(let tabs))) where !tabs.isEmpty:
            let closed = tabs[0]
            var tab = closed.tab
            tab.key = ""
            input.request = .op(.add(tab: tab, place: Self.reopenPlace(closed, in: live.workspace), activate: true))
        case (_, .failure(.store(let error))):
            logger.warning("history read failed", metadata: ["workspace": "\(call.workspaceId)", "error": "\(error)"])
            return reject(id, seq: input.seq, code: .unavailable, message: "the store could not read history; try again")
        case (_, .failure(let failure)):
            input.request = .refuse(failure.refusal ?? .invalidArgument("history gave no answer to this op"))
        default:
            input.request = .refuse(.invalidArgument("history gave no answer to this op"))
        }
        sequence(input, from: id, workspaceId: call.workspaceId)
        startCommitIfIdle()
    }

    /// Where a reopened tab goes: just after its old left neighbour if that is still there, else
    /// just before its old right one, else at its old index.
    static func reopenPlace(_ closed: ClosedTab, in workspace: Workspace) -> Place {
        if let left = closed.leftId, let i = workspace.index(of: left) { return .index(UInt32(i + 1)) }
        if let right = closed.rightId, let i = workspace.index(of: right) { return .index(UInt32(i)) }
        return .index(UInt32(closed.index))
    }

    // MARK: queries over a session

    /// A `HistoryQuery` from a joined session: any role that may read the workspace may ask.
    mutating func historyQuery(_ query: Tabsync_V1_HistoryQuery, from id: ConnectionID, workspaceId: String) {
        func refuse(_ message: String) {
            var answer = Tabsync_V1_HistoryAnswer()
            answer.id = query.id
            answer.error.code = .invalidArgument
            answer.error.message = message
            send(Tabsync_V1_ServerMessage(history: answer), to: id)
        }
        switch HistoryQuery.read(query) {
        case .success(let read): readHistory(read, of: workspaceId, for: .query(id, queryId: query.id))
        case .failure(let problem): refuse(problem.message)
        }
    }

    /// The wire answer to a read.
    func historyAnswer(_ call: HistoryCall, _ result: Result<HistoryResult, HistoryFailure>) -> Tabsync_V1_HistoryAnswer {
        var answer = Tabsync_V1_HistoryAnswer()
        switch result {
        case .success(.ops(let entries)):
            answer.ops = entries.map(Self.wireEntry)
            if let next = HistoryQuery.next(after: entries) { answer.next = next }
        case .success(.state(let state)):
            answer.state = Tabsync_V1_Snapshot(state)
        case .success(.closed(let tabs)):
            answer.closed = tabs.map(Self.wireClosed)
        case .failure(.store(let error)):
            answer.error = Tabsync_V1_Error(code: ErrorCode.unavailable, message: "the store could not read history: \(error)")
        case .failure(let failure):
            let refusal = failure.refusal ?? .invalidArgument("\(failure)")  // a store failure is matched above
            answer.error = Tabsync_V1_Error(code: refusal.code, message: refusal.message)
        }
        return answer
    }

    /// A message as a 200 answer in the protobuf JSON mapping, one line.
    static func protobufJSON(_ message: some SwiftProtobuf.Message) -> HTTPResponse {
        guard let json: [UInt8] = try? message.jsonUTF8Bytes() else {
            return HTTPResponse(status: 500, body: "cannot encode \(type(of: message))\n")
        }
        return HTTPResponse(status: 200, contentType: "application/json", bytes: json + [0x0A])
    }

    static func wireEntry(_ entry: HistoryEntry) -> Tabsync_V1_HistoryEntry {
        var wire = Tabsync_V1_HistoryEntry()
        wire.version = entry.op.version
        wire.op = Tabsync_V1_Op(entry.op.op)
        wire.clientID = entry.op.clientId
        wire.seq = entry.op.seq
        wire.activeTabID = entry.op.activeTabId
        wire.author = entry.author
        wire.at = entry.committedAt.map { RFC3339.format($0.timeIntervalSince1970) } ?? ""
        wire.summary = entry.op.op.summary
        return wire
    }

    static func wireClosed(_ closed: ClosedTab) -> Tabsync_V1_ClosedTab {
        var wire = Tabsync_V1_ClosedTab()
        wire.tab = Tabsync_V1_Tab(closed.tab)
        wire.version = closed.version
        wire.at = closed.committedAt.map { RFC3339.format($0.timeIntervalSince1970) } ?? ""
        wire.author = closed.author
        return wire
    }

    // MARK: HTTP

    /// The HTTP answer to a read, in the protobuf JSON mapping the session uses (docs/design.md,
    /// "Reading history"): a page or the closed tabs as the session's `HistoryAnswer` (no `id`), a
    /// state as a `Snapshot`; a refusal is 400 with its message (404 when the workspace has no
    /// history), a store failure 503.
    func httpHistoryResponse(_ call: HistoryCall, _ result: Result<HistoryResult, HistoryFailure>) -> HTTPResponse {
        switch result {
        case .success(.ops), .success(.closed):
            return Self.protobufJSON(historyAnswer(call, result))
        case .success(.state(let state)):
            return Self.protobufJSON(Tabsync_V1_Snapshot(state))
        case .failure(.store(let error)):
            return AdminJSON.error(503, "store unavailable: \(error)")
        case .failure(let failure):
            let refusal = failure.refusal ?? .invalidArgument("\(failure)")  // a store failure is matched above
            if case .noHistory = failure { return AdminJSON.error(404, refusal.message) }
            return AdminJSON.error(400, refusal.message)
        }
    }
}
