/// The phases the runner calls, and the tick that drives them every millisecond by the
/// ``Schedule``. Each phase runs the event loop until the schedule leaves it.
extension LoadGenerator {
    /// Opens every connection at the ramp rate; returns once each is ready or has failed (or the
    /// connect deadline passed).
    func connectAll() {
        schedule.startConnecting(now: monotonicNanos(), connections: connections.count)
        armTick()
        service { schedule.phase != .connecting }
        schedule.connectingEnded(now: monotonicNanos())
    }

    /// Sends at `rate` for `warmup` seconds, then measures for `duration`, then waits for the answers.
    func load(rate: Double, warmup: Double, duration: Double) {
        measurement.resetWindow(workspaces: configuration.workspaces)
        // Ops of an earlier phase no longer count.
        for connection in connections { connection.forgetMeasured() }
        guard !schedule.timeUp else {
            schedule.skipLoad(now: monotonicNanos())
            return
        }
        let now = monotonicNanos()
        schedule.startLoad(rate: rate, warmup: warmup, duration: duration, now: now)
        if schedule.windowOpened(now: now) { measureStartHook?() }
        service { schedule.phase != .load }
        measureEndHook?()
        schedule.startDraining(now: monotonicNanos())
        service { schedule.phase != .draining }
    }

    /// Closes every connection (1000) and waits up to a second for the close handshakes.
    func closeAll() {
        schedule.startClosing(now: monotonicNanos())
        for connection in connections where connection.hasSocket && connection.state != .closed {
            requestClose(connection)
        }
        service { schedule.phase != .closing }
        schedule.phase = .done
    }

    /// The measured window's length in seconds.
    var measuredSeconds: Double { schedule.measuredSeconds }

    /// Deliveries the measured ops should have made: every other client of the workspace that is
    /// still connected receives each applied op.
    var expectedDeliveries: Int {
        var readyPerWorkspace = Array(repeating: 0, count: configuration.workspaces)
        for connection in connections where connection.state == .ready { readyPerWorkspace[connection.workspace] += 1 }
        return zip(readyPerWorkspace, measurement.appliedPerWorkspace).reduce(0) { $0 + max(0, $1.0 - 1) * $1.1 }
    }

    // MARK: the tick (every millisecond)

    func tick() {
        let now = monotonicNanos()
        if schedule.stopIfTimeUp(now: now) == .connecting {
            for connection in connections where connection.state == .connecting || connection.state == .open || connection.state == .idle {
                measurement.connectFailures["not ready before --time-limit", default: 0] += 1
                connection.closing = true
                connection.state = .closed
                abandon(connection)
            }
        }
        switch schedule.phase {
        case .connecting:
            for index in schedule.connectionsToOpen(now: now, of: connections.count) {
                open(connections[index], now: now)
            }
            let pending = connections.contains { $0.state == .connecting || $0.state == .open || $0.state == .idle }
            if !pending || schedule.connectDeadlinePassed(now: now) {
                schedule.phase = .idle  // leaves the connect service loop
                for connection in connections where connection.state == .connecting || connection.state == .open {
                    measurement.connectFailures["no answer before the connect deadline", default: 0] += 1
                    connection.closing = true
                    abandon(connection)
                }
            }
        case .idle:
            break
        case .load:
            if schedule.windowOpened(now: now) { measureStartHook?() }
            while let intended = schedule.nextSend(now: now) {
                submitNext(intended: intended, now: now)
            }
            if schedule.loadEnded(now: now) { schedule.phase = .draining }
        case .draining:
            let answered = measurement.outstanding <= 0
            let delivered = configuration.mode == .mirror || measurement.deliveries >= expectedDeliveries
            if (answered && delivered) || schedule.phaseDeadlinePassed(now: now) { schedule.phase = .idle }
        case .closing:
            if schedule.phaseDeadlinePassed(now: now) || !connections.contains(where: { $0.hasSocket }) {
                schedule.phase = .done
            }
        case .done:
            return
        }
        if let progress, let reading = meter.reading(
            now: now, schedule: schedule, measurement: measurement, target: connections.count) {
            progress(reading)
        }
        armTick()
    }
}
