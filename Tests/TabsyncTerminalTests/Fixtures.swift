import TabsyncCore
@testable import TabsyncTerminal

/// A workspace with tabs titled as given (ids t1, t2, …), the first active unless told.
func workspace(_ titles: [String], active: Int = 0, editable: Bool = true, version: UInt64 = 1) -> Workspace {
    let keys = PositionKey.keys(count: titles.count)
    let tabs = titles.enumerated().map { i, title in Tab(id: "t\(i + 1)", title: title, key: keys[i]) }
    return Workspace(
        id: "default", version: version, epoch: "e1", tabs: tabs,
        activeTabId: tabs.isEmpty ? "" : tabs[active].id, editable: editable)
}

/// Applies `op` the way the client would (optimistically) and returns the new workspace.
func applying(_ op: Operation, to ws: Workspace) throws -> Workspace {
    var copy = ws
    _ = try copy.apply(op, limits: .default)
    return copy
}

func model(_ ws: Workspace, rows: Int = 20, cols: Int = 80, position: BarModel.Position = .top) -> BarModel {
    BarModel(server: "ws://127.0.0.1:7070", clientId: "me", workspace: ws, rows: rows, cols: cols,
             position: position, idPrefix: "zz")
}
