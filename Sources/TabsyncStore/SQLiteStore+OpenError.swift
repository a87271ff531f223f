extension SQLiteStore {
    /// Why a store could not be opened. Each case names the file or directory, and the file is left
    /// exactly as it was found: the server reports it and exits non-zero.
    public enum OpenError: Error, Sendable, Equatable, CustomStringConvertible {
        /// The data directory is missing and could not be created.
        case cannotCreateDirectory(path: String, reason: String)
        /// SQLite could not open the file (permissions, a directory in its place, …).
        case cannotOpen(path: String, reason: String)
        /// The file is not an SQLite database, or its pages are damaged.
        case corrupt(path: String, reason: String)
        /// The file is a valid SQLite database of another application.
        case foreign(path: String, reason: String)
        /// The file was written by a newer tabsync (a schema version this build does not know).
        case newerSchema(path: String, found: Int64, supported: Int64)
        /// A new store cannot be created because the file or its directory is read-only.
        case readOnly(path: String)

        /// The file or directory the error is about.
        public var path: String {
            switch self {
            case .cannotCreateDirectory(let path, _), .cannotOpen(let path, _), .corrupt(let path, _),
                .foreign(let path, _), .newerSchema(let path, _, _), .readOnly(let path):
                path
            }
        }

        public var description: String {
            switch self {
            case .cannotCreateDirectory(let path, let reason):
                "cannot create data directory \(path): \(reason)"
            case .cannotOpen(let path, let reason):
                "cannot open store \(path): \(reason)"
            case .corrupt(let path, let reason):
                "store \(path) is not a readable tabsync database (corrupt or not SQLite): \(reason); the file was not changed"
            case .foreign(let path, let reason):
                "store \(path) is another application's SQLite database: \(reason); the file was not changed"
            case .newerSchema(let path, let found, let supported):
                "store \(path) has schema version \(found), newer than this build's \(supported); the file was not changed"
            case .readOnly(let path):
                "cannot create store \(path): read-only"
            }
        }
    }
}
