import CFuzzerDriver
import TabsyncCore

/// libFuzzer target `keys`: PositionKey on any two valid keys.
///
/// Input: two keys separated by the first space (`a0 a1`), then optional steps. A byte that is not a
/// key character is mapped onto one (so most inputs give valid keys); a key still invalid ends the
/// run. Properties, any violation traps: for valid `a < b`, `between(a, b)` is valid and strictly
/// between; `between(nil, b)` is valid and before `b`; `between(a, nil)` valid and after `a`. Then
/// each step byte narrows the interval to one side of the new key and checks again, so keys deep in
/// one place (long fractions, the integer ends) are reached.
@_cdecl("fuzz_keys_main")
public func main(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    tabsync_fuzz_run(argc, argv, fuzzKeys)
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzKeys(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data else { return 0 }
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let parts = bytes.split(separator: UInt8(ascii: " "), maxSplits: 2, omittingEmptySubsequences: false)
    guard parts.count >= 2 else { return 0 }
    let x = keyText(parts[0])
    let y = keyText(parts[1])
    guard PositionKey.isValid(x), PositionKey.isValid(y) else { return 0 }
    checkOpenEnds(x)
    checkOpenEnds(y)
    guard x != y else { return 0 }
    var lo = PositionKey.less(x, y) ? x : y
    var hi = PositionKey.less(x, y) ? y : x
    let steps = parts.count > 2 ? Array(parts[2].prefix(64)) : []
    var step = 0
    while true {
        let mid = PositionKey.between(lo, hi)
        check(PositionKey.isValid(mid), "between(\(lo), \(hi)) = \(mid) is not valid")
        check(PositionKey.less(lo, mid) && PositionKey.less(mid, hi), "between(\(lo), \(hi)) = \(mid) is not between")
        guard step < steps.count else { break }
        if steps[step] & 1 == 0 { lo = mid } else { hi = mid }
        step += 1
    }
    return 0
}

/// Keys on either open end of `key`.
func checkOpenEnds(_ key: String) {
    let before = PositionKey.between(nil, key)
    check(PositionKey.isValid(before) && PositionKey.less(before, key), "between(nil, \(key)) = \(before)")
    let after = PositionKey.between(key, nil)
    check(PositionKey.isValid(after) && PositionKey.less(key, after), "between(\(key), nil) = \(after)")
}

/// The key text for fuzz bytes: the head byte onto `a-zA-Z`, others onto base-62 digits; bytes already
/// in range stay, so readable seeds mean what they say.
func keyText(_ raw: ArraySlice<UInt8>) -> String {
    let letters = Array("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ".utf8)
    let digits = Array("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz".utf8)
    var out: [UInt8] = []
    for (i, b) in raw.prefix(200).enumerated() {
        if i == 0 {
            out.append(letters.contains(b) ? b : letters[Int(b) % letters.count])
        } else {
            out.append(digits.contains(b) ? b : digits[Int(b) % digits.count])
        }
    }
    return String(decoding: out, as: UTF8.self)
}

func check(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fatalError(message()) }
}
