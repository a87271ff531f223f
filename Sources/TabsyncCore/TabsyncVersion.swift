/// tabsync's version: what `tabsync --version` and `tabsync-server --version` print.
///
/// Semantic versioning. CHANGELOG.md's newest release heading names the same version
/// (`TabsyncVersionTests` checks it), so a release changes both in one commit.
public enum TabsyncVersion {
    public static let current = "0.1.0"
}
