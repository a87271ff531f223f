import CFuzzerDriver

/// libFuzzer target `text`: the terminal text cleaner on any bytes (read as UTF-8, invalid
/// sequences repaired as a server's JSON decoder would not, so lone bytes are covered too).
///
/// Property: `TerminalText.clean` never lets through ESC (U+001B) or any other C0 control, DEL, a C1
/// control, a format character other than the zero-width joiner (bidi overrides and isolates among
/// them), a line or paragraph separator, or an unassigned code point; cleaning is idempotent and
/// `isClean` agrees with it. A violation traps, which libFuzzer reports as a crash.
@_cdecl("fuzz_text_main")
public func main(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    tabsync_fuzz_run(argc, argv, fuzzText)
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzText(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data else { return 0 }
    let text = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    let cleaned = TerminalText.clean(text)
    for scalar in cleaned.unicodeScalars {
        if let problem = unsafeScalarProblem(scalar) {
            fatalError("clean let through \(problem) U+\(String(scalar.value, radix: 16, uppercase: true))")
        }
    }
    if TerminalText.clean(cleaned) != cleaned { fatalError("clean is not idempotent") }
    if TerminalText.isClean(text) != (cleaned == text) { fatalError("isClean disagrees with clean") }
    if !TerminalText.isClean(cleaned) { fatalError("isClean refuses a cleaned text") }
    // Width and truncation must not trap on what clean returns.
    let width = TerminalText.width(cleaned)
    let cut = TerminalText.truncate(cleaned, toWidth: size % 40)
    if TerminalText.width(cut) > max(size % 40, 0) { fatalError("truncate overflows its width") }
    _ = TerminalText.fit(cleaned, toWidth: width % 50)
    return 0
}

/// What is wrong with `scalar` in cleaned text, or nil. Written from the guarantee, not from
/// the cleaner's code: by value ranges first, then by Unicode general category.
func unsafeScalarProblem(_ scalar: Unicode.Scalar) -> String? {
    let v = scalar.value
    if v == 0x1B { return "ESC" }
    if v <= 0x1F { return "a C0 control" }
    if v == 0x7F { return "DEL" }
    if (0x80...0x9F).contains(v) { return "a C1 control" }
    if (0x202A...0x202E).contains(v) || (0x2066...0x2069).contains(v) || v == 0x200E || v == 0x200F || v == 0x061C {
        return "a bidi control"
    }
    if v == 0x2028 || v == 0x2029 { return "a line or paragraph separator" }
    switch scalar.properties.generalCategory {
    case .format where v != 0x200D: return "a format character"
    case .control: return "a control"
    case .unassigned, .surrogate: return "an unassigned code point"
    case .lineSeparator, .paragraphSeparator: return "a line or paragraph separator"
    default: return nil
    }
}
