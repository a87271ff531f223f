import Glibc
import TabsyncLoop
import Testing

@Suite("File limit")
struct FileLimitTests {
    /// Raising never lowers the soft limit, reaches the hard one (up to the ceiling) and reports
    /// what is in force.
    @Test func raisingReachesTheHardLimitUpToTheCeilingAndReportsIt() {
        var before = rlimit()
        #expect(getrlimit(Int32(RLIMIT_NOFILE.rawValue), &before) == 0)
        let reported = FileLimit.raise()
        var after = rlimit()
        #expect(getrlimit(Int32(RLIMIT_NOFILE.rawValue), &after) == 0)
        #expect(reported == Int(clamping: after.rlim_cur))
        #expect(after.rlim_cur >= before.rlim_cur)
        #expect(after.rlim_cur >= min(after.rlim_max, rlim_t(FileLimit.ceiling)))
        #expect(FileLimit.raise() == reported, "raising again changes nothing")
    }
}
