/// When a bench run does what, on one monotonic clock (nanoseconds). The load generator asks it at
/// every tick (each millisecond) what is due; it does no I/O itself.
///
/// - Connecting: connection i is due at `runStart + i / ramp` (the first at once). The phase ends
///   when every connection is ready or failed, or at the connect deadline (the ramp's length + 20 s).
/// - Load, open loop: op n (n ≥ 1) is due at `loadStart + n / rate`, its *intended send time*, and
///   goes to the workspaces in turn.
///   Latencies count from it, whenever the op really leaves, so a generator or server that falls
///   behind shows as latency, never as a slower sender. Ops intended in the warm-up are sent but not
///   measured; the measured window is `measureStart ..< measureEnd` (`warmup` after `loadStart`,
///   `duration` long), and no op is intended at or after `measureEnd`.
/// - Draining: up to `drainLimit` (`--drain-timeout`, 5 s) for the answers to the measured ops.
/// - Closing: up to ``closeLimit`` for the close handshakes.
/// - `--time-limit`: once it has passed since `runStart`, connecting, load or draining ends at once
///   (the measured window is cut there) and ``timeUp`` stays set.
/// - `--max` (the closed loop): ``RateSearch`` picks each trial's rate from the trials before it.
struct Schedule {
    enum Phase { case connecting, idle, load, draining, closing, done }

    static let connectGraceSeconds = 20.0
    static let defaultDrainSeconds = 5.0
    static let closeLimit: UInt64 = 1_000_000_000

    /// Connections opened per second.
    let ramp: Double
    /// Seconds the whole run may take.
    let timeLimit: Double?
    /// How long draining waits for the measured ops' answers (ns).
    let drainLimit: UInt64

    var phase = Phase.connecting
    /// Set once `--time-limit` has passed: every phase ends at once and no trial follows.
    private(set) var timeUp = false
    /// When connecting started: the run's start.
    private(set) var runStart: UInt64 = 0
    /// When connecting ended.
    private(set) var connectEnd: UInt64 = 0
    private var connectDeadline: UInt64 = 0
    private var nextToOpen = 0
    /// Ops per second of the current load; 0 sends nothing.
    private(set) var rate = 0.0
    private(set) var loadStart: UInt64 = 0
    private(set) var measureStart: UInt64 = 0
    private(set) var measureEnd: UInt64 = 0
    /// Ops intended so far in this load.
    private var scheduled: UInt64 = 0
    /// Ops intended in the whole run (they go to the workspaces in turn).
    private var roundRobin = 0
    private var windowOpenedSignalled = false
    /// When draining or closing gives up.
    private var phaseDeadline: UInt64 = 0

    init(ramp: Double, timeLimit: Double?, drainSeconds: Double = Schedule.defaultDrainSeconds) {
        self.ramp = ramp
        self.timeLimit = timeLimit
        drainLimit = UInt64(drainSeconds * 1e9)
    }

    // MARK: connecting

    mutating func startConnecting(now: UInt64, connections: Int) {
        runStart = now
        connectDeadline = now + UInt64((Double(connections) / ramp + Self.connectGraceSeconds) * 1e9)
        phase = .connecting
    }

    /// The connections due to open by `now` that were not handed out yet (each is handed out once).
    mutating func connectionsToOpen(now: UInt64, of total: Int) -> Range<Int> {
        let due = min(total, Int(Double(now - runStart) / 1e9 * ramp) + 1)
        guard nextToOpen < due else { return nextToOpen..<nextToOpen }
        defer { nextToOpen = due }
        return nextToOpen..<due
    }

    func connectDeadlinePassed(now: UInt64) -> Bool { now >= connectDeadline }

    mutating func connectingEnded(now: UInt64) { connectEnd = now }

    var connectSeconds: Double { Double(connectEnd - runStart) / 1e9 }

    // MARK: load (open loop)

    /// A load at `rate` ops/s from `now`: `warmup` seconds, then the measured `duration`.
    mutating func startLoad(rate: Double, warmup: Double, duration: Double, now: UInt64) {
        self.rate = rate
        loadStart = now
        scheduled = 0
        measureStart = loadStart + UInt64(warmup * 1e9)
        measureEnd = measureStart + UInt64(duration * 1e9)
        windowOpenedSignalled = false
        phase = .load
    }

    /// No load (the time limit has passed): an empty measured window at `now`.
    mutating func skipLoad(now: UInt64) {
        measureStart = now
        measureEnd = now
    }

    /// True at the first call at or after the measured window opens, once per load.
    mutating func windowOpened(now: UInt64) -> Bool {
        guard !windowOpenedSignalled, now >= measureStart else { return false }
        windowOpenedSignalled = true
        return true
    }

    /// The intended send time of the next op due by `now`, or nil once every op due is handed out.
    mutating func nextSend(now: UInt64) -> UInt64? {
        guard rate > 0 else { return nil }
        let until = min(now, measureEnd)
        let due = UInt64(Double(until - loadStart) / 1e9 * rate)
        guard scheduled < due else { return nil }
        scheduled += 1
        return loadStart + UInt64(Double(scheduled) / rate * 1e9)
    }

    /// The workspace of the next op: each in turn, over the whole run.
    mutating func nextWorkspace(of workspaces: Int) -> Int {
        defer { roundRobin &+= 1 }
        return roundRobin % workspaces
    }

    /// Whether an op intended at `intended` belongs to the measured window.
    func isMeasured(_ intended: UInt64) -> Bool { intended >= measureStart && intended < measureEnd }

    func loadEnded(now: UInt64) -> Bool { now >= measureEnd }

    /// The measured window's length in seconds (at least a millisecond, so rates stay finite).
    var measuredSeconds: Double { max(0.001, Double(Int64(measureEnd) - Int64(measureStart)) / 1e9) }

    // MARK: draining and closing

    mutating func startDraining(now: UInt64) { phaseDeadline = now + drainLimit }

    mutating func startClosing(now: UInt64) {
        phase = .closing
        phaseDeadline = now + Self.closeLimit
    }

    func phaseDeadlinePassed(now: UInt64) -> Bool { now >= phaseDeadline }

    // MARK: the time limit

    /// When `--time-limit` has just passed during connecting, load or draining: sets ``timeUp``,
    /// cuts the measured window at `now`, goes idle and returns the phase it stopped. Nil otherwise.
    mutating func stopIfTimeUp(now: UInt64) -> Phase? {
        guard let timeLimit, !timeUp, runStart > 0, now - runStart >= UInt64(timeLimit * 1e9),
              phase == .connecting || phase == .load || phase == .draining
        else { return nil }
        timeUp = true
        let stopped = phase
        if phase == .load { measureEnd = min(measureEnd, now) }
        phase = .idle
        return stopped
    }

    /// What the progress line calls the phase at `now`.
    func phaseName(now: UInt64) -> String {
        switch phase {
        case .connecting: "connecting"
        case .idle: "idle"
        case .load: now < measureStart ? "warmup" : "measuring"
        case .draining: "draining"
        case .closing, .done: "closing"
        }
    }
}

extension Schedule {
    /// The closed loop of `--max`: open-loop trials on the same connections, each at a rate chosen
    /// from the verdicts of the ones before. The rate doubles while trials pass, then bisects between
    /// the best pass and the lowest failure; the search ends when they are within 10% of each other
    /// or the rate falls under 1 op/s, and after ``maxTrials`` trials at most. A trial that misses
    /// only the p99 bound is run once more at the same rate before it counts as failed (on a shared
    /// machine one stall of a few tens of ms decides a short trial's p99).
    struct RateSearch: Equatable {
        static let maxTrials = 16

        enum Verdict: Equatable {
            case passed
            /// Over the p99 bound, with enough applied and nothing unanswered.
            case missedOnlyTheBound
            case failed
        }

        /// The rate of the next trial.
        private(set) var rate: Double
        /// The highest rate that passed (0 before any did).
        private(set) var low = 0.0
        /// The lowest rate that failed since the last pass below it.
        private(set) var high: Double?
        private var retried = false

        init(start: Double) { rate = start }

        /// Takes the verdict of the trial just run at ``rate``, sets the next rate, and returns
        /// whether another trial should run.
        mutating func record(_ verdict: Verdict) -> Bool {
            if verdict == .missedOnlyTheBound && !retried {
                retried = true
                return true
            }
            retried = false
            if verdict == .passed {
                low = rate
                rate = high.map { (low + $0) / 2 } ?? rate * 2
            } else {
                high = rate
                rate = low == 0 ? rate / 2 : (low + rate) / 2
            }
            if let high, low > 0, (high - low) / high < 0.1 { return false }
            return rate >= 1
        }
    }
}
