import TabsyncCore

// Builders for the envelopes and their pieces, so sessions never assemble proto fields by hand.

// MARK: client → server

extension Tabsync_V1_Hello {
    public init(
        workspace: String, clientId: String, clientName: String = "", token: String = "",
        lastVersion: UInt64 = 0, epoch: String = "", presenceDeltas: Bool = false
    ) {
        self.init()
        self.presenceDeltas = presenceDeltas
        self.workspace = workspace
        self.clientID = clientId
        self.clientName = clientName
        self.token = token
        self.lastVersion = lastVersion
        self.epoch = epoch
    }
}

extension Tabsync_V1_Submit {
    public init(seq: UInt64, baseVersion: UInt64 = 0, op: Operation) {
        self.init()
        self.seq = seq
        self.baseVersion = baseVersion
        self.op = Tabsync_V1_Op(op)
    }
}

extension Tabsync_V1_Focus {
    public init(tabId: String) {
        self.init()
        self.tabID = tabId
    }
}

extension Tabsync_V1_ClientMessage {
    public init(hello: Tabsync_V1_Hello) {
        self.init()
        message = .hello(hello)
    }

    public init(submit: Tabsync_V1_Submit) {
        self.init()
        message = .submit(submit)
    }

    public init(focus: Tabsync_V1_Focus) {
        self.init()
        message = .focus(focus)
    }
}

// MARK: server → client

extension Tabsync_V1_Welcome {
    /// A welcome carrying a full snapshot (`recovered: false`); its epoch is the snapshot's.
    public init(sessionId: String, clientId: String, lastSeq: UInt64, limits: Limits, snapshot: Workspace) {
        self.init()
        sessionID = sessionId
        clientID = clientId
        epoch = snapshot.epoch
        recovered = false
        self.snapshot = Tabsync_V1_Snapshot(snapshot)
        self.lastSeq = lastSeq
        self.limits = Tabsync_V1_Limits(limits)
    }

    /// A welcome for a resume that the log could serve (`recovered: true`): only the missed ops.
    public init(
        sessionId: String, clientId: String, lastSeq: UInt64, limits: Limits, epoch: String,
        missed: [AppliedOp]
    ) {
        self.init()
        sessionID = sessionId
        clientID = clientId
        self.epoch = epoch
        recovered = true
        self.missed = missed.map(Tabsync_V1_Applied.init)
        self.lastSeq = lastSeq
        self.limits = Tabsync_V1_Limits(limits)
    }

    /// The missed ops in core form, in order.
    /// - Throws: ``ConversionError`` when one names no operation (a broken stream: resync).
    public func missedOps() throws(ConversionError) -> [AppliedOp] {
        var ops: [AppliedOp] = []
        ops.reserveCapacity(missed.count)
        for applied in missed { ops.append(try AppliedOp(applied)) }
        return ops
    }
}

extension Tabsync_V1_Peer {
    public init(sessionId: String, clientId: String, name: String, focusTabId: String) {
        self.init()
        sessionID = sessionId
        clientID = clientId
        self.name = name
        self.focusTabID = focusTabId
    }
}

extension Tabsync_V1_ServerMessage {
    public init(welcome: Tabsync_V1_Welcome) {
        self.init()
        message = .welcome(welcome)
    }

    public init(applied: AppliedOp) {
        self.init()
        message = .applied(Tabsync_V1_Applied(applied))
    }

    public init(rejected: Tabsync_V1_Rejected) {
        self.init()
        message = .rejected(rejected)
    }

    public init(peers: [Tabsync_V1_Peer]) {
        self.init()
        var presence = Tabsync_V1_Presence()
        presence.peers = peers
        message = .presence(presence)
    }

    public init(error: Tabsync_V1_Error) {
        self.init()
        message = .error(error)
    }

    public init(presence: Tabsync_V1_Presence) {
        self.init()
        message = .presence(presence)
    }

    public init(history: Tabsync_V1_HistoryAnswer) {
        self.init()
        message = .history(history)
    }
}
