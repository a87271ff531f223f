#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The stable client id: kept in `$XDG_CONFIG_HOME/tabsync/client-id` (or `~/.config/tabsync/client-id`),
/// made on first use, so reconnects and later runs dedupe their ops.
///
/// Two tabsync processes must never share a client id at the same time (their seqs would collide),
/// so each running process holds a lock on one slot: the first free slot uses the id as stored, the
/// n-th concurrent process `ID.n`. A later run takes the lowest free slot again, so one bar or one
/// command run after another keeps the same id. When the config folder cannot be written, the id
/// is a fresh random one for this run.
enum ClientIdentity {
    // nonisolated(unsafe): set once by `stableId()` on the main thread before any other thread
    // starts; the descriptor is only kept open so the lock lives as long as the process.
    nonisolated(unsafe) private static var lockFD: Int32 = -1

    static func configDirectory() -> String? {
        if let xdg = getenv("XDG_CONFIG_HOME").map({ String(cString: $0) }), !xdg.isEmpty {
            return xdg + "/tabsync"
        }
        if let home = getenv("HOME").map({ String(cString: $0) }), !home.isEmpty {
            return home + "/.config/tabsync"
        }
        return nil
    }

    /// A random id of `count` base-62 chars, prefixed.
    static func randomId(prefix: String = "c-", count: Int = 16) -> String {
        let alphabet = Array("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
        var rng = SystemRandomNumberGenerator()
        return prefix + String((0..<count).map { _ in alphabet[Int(rng.next() % UInt64(alphabet.count))] })
    }

    static func stableId() -> String {
        guard let dir = configDirectory(), makeDirectories(dir) else { return randomId() }
        let path = dir + "/client-id"
        var base = readFile(path)?.split(whereSeparator: { $0 == "\n" || $0 == " " }).first.map(String.init) ?? ""
        if base.isEmpty || !isValidId(base) {
            base = randomId()
            guard writeFile(path, base + "\n") else { return randomId() }
        }
        for slot in 1...64 {
            let fd = open(dir + "/client-id.\(slot).lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
            if fd < 0 { break }
            if flock(fd, LOCK_EX | LOCK_NB) == 0 {
                lockFD = fd
                return slot == 1 ? base : "\(base).\(slot)"
            }
            close(fd)
        }
        return randomId()
    }

    static func isValidId(_ id: String) -> Bool {
        (1...60).contains(id.unicodeScalars.count) && id.unicodeScalars.allSatisfy {
            ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0)
                || $0 == "." || $0 == "_" || $0 == ":" || $0 == "-"
        }
    }

    private static func makeDirectories(_ path: String) -> Bool {
        var built = ""
        for part in path.split(separator: "/") {
            built += "/" + part
            if mkdir(built, 0o700) != 0 && errno != EEXIST { return false }
        }
        return true
    }

    static func readFile(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = read(fd, &buffer, buffer.count)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            bytes += buffer[0..<n]
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    private static func writeFile(_ path: String, _ text: String) -> Bool {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        let bytes = Array(text.utf8)
        return bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) } == bytes.count
    }
}
