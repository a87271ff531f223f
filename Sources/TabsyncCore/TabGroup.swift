/// A tab group of a workspace, as Chrome's and Firefox's (docs/design.md, "Tab groups").
///
/// A `TabGroup` value is just data; ``Validation/checkGroup(_:)`` checks its fields: `id` as a tab
/// id, `title` ≤ 256 chars (may be empty), `color` one of ``colors``. In a workspace a group has at
/// least one tab and its tabs are contiguous in display order. `collapsed` is each viewer's own and
/// is not part of it.
public struct TabGroup: Sendable, Hashable {
    public var id: String
    public var title: String
    public var color: String

    /// The browsers' nine group colours; `grey` is the one a new group gets when none is asked for.
    public static let colors = ["grey", "blue", "red", "yellow", "green", "pink", "purple", "cyan", "orange"]
    public static let defaultColor = "grey"

    public init(id: String, title: String = "", color: String = TabGroup.defaultColor) {
        self.id = id
        self.title = title
        self.color = color
    }
}
