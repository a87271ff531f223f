import TabsyncCore

extension Tabsync_V1_Applied {
    /// The wire form of an applied op (what the server broadcasts and `Welcome.missed` holds).
    public init(_ applied: AppliedOp) {
        self.init()
        version = applied.version
        op = Tabsync_V1_Op(applied.op)
        clientID = applied.clientId
        seq = applied.seq
        activeTabID = applied.activeTabId
    }
}

extension AppliedOp {
    /// The core form of a received `Applied`.
    /// - Throws: ``ConversionError`` when its op names no operation (a broken stream: resync).
    public init(_ applied: Tabsync_V1_Applied) throws(ConversionError) {
        self.init(
            version: applied.version, op: try Operation(applied.op), clientId: applied.clientID,
            seq: applied.seq, activeTabId: applied.activeTabID)
    }
}

extension Tabsync_V1_Rejected {
    /// The refusal of the op submitted with `seq`.
    public init(seq: UInt64, code: ErrorCode, message: String) {
        self.init()
        self.seq = seq
        self.code = Tabsync_V1_ErrorCode(code)
        self.message = message
    }

    /// The refusal of the op submitted with `seq`, from core's error.
    public init(seq: UInt64, error: OpError) {
        self.init(seq: seq, code: error.code, message: error.message)
    }

    /// The refusal of the op submitted with `seq` for a message that named no operation.
    public init(seq: UInt64, error: ConversionError) {
        self.init(seq: seq, code: error.code, message: error.message)
    }
}

extension Tabsync_V1_Error {
    /// A connection-level error (sent before a close, e.g. `PROTOCOL_ERROR`, `UNAUTHORIZED`).
    public init(code: ErrorCode, message: String) {
        self.init()
        self.code = Tabsync_V1_ErrorCode(code)
        self.message = message
    }
}
