/// What one rekey did — every tab's old and new key, in display order — so that a key a client
/// computed before it can be translated (docs/design.md rule 7).
///
/// Guarantee: a key that sat strictly between the old keys of neighbours L and R translates to a key
/// strictly between the new keys of L and R; a key equal to tab T's old key becomes T's new key.
/// So translation never changes which neighbours a key sat between.
public struct RekeyRecord: Sendable, Equatable {
    /// The version at which the rekey was applied.
    public let version: UInt64
    /// Old keys, ascending.
    public let oldKeys: [String]
    /// New keys, ascending, one per old key.
    public let newKeys: [String]

    public init(version: UInt64, oldKeys: [String], newKeys: [String]) {
        precondition(oldKeys.count == newKeys.count, "a rekey maps every key")
        self.version = version
        self.oldKeys = oldKeys
        self.newKeys = newKeys
    }

    /// Records the rekey `op` applied to `before` (the workspace just before it) at `version`.
    public init(version: UInt64, before: Workspace, rekey keys: [TabKey]) {
        self.init(version: version, oldKeys: before.tabs.map(\.key), newKeys: keys.map(\.key))
    }

    /// The key `key` (valid) translated through this rekey.
    public func translate(_ key: String) -> String {
        var lo = 0
        var hi = oldKeys.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if PositionKey.less(oldKeys[mid], key) { lo = mid + 1 } else { hi = mid }
        }
        if lo < oldKeys.count && oldKeys[lo] == key { return newKeys[lo] }
        return PositionKey.between(lo > 0 ? newKeys[lo - 1] : nil, lo < newKeys.count ? newKeys[lo] : nil)
    }
}
