/// One session of a workspace, as presence tells it: who is connected and which tab each views.
/// Not part of the workspace: never stored, never an op.
public struct Peer: Sendable, Hashable {
    public var sessionId: String
    public var clientId: String
    public var name: String
    /// The tab that session views; "" when it named none.
    public var focusTabId: String

    public init(sessionId: String, clientId: String, name: String, focusTabId: String) {
        self.sessionId = sessionId
        self.clientId = clientId
        self.name = name
        self.focusTabId = focusTabId
    }
}
