"""The server's stop signals reach it (Sources/tabsync-server/TabsyncServerCommand.swift,
`blockStopSignals`): SIGINT, SIGTERM and SIGHUP are taken only by libdispatch's signal sources,
which read them with signalfd, so every thread of the process must block them. A thread that did
not could be handed the signal by the kernel, and libdispatch's handler, which does nothing, would
eat it: a first SIGTERM was lost now and then on a loaded machine (a test's teardown waited 10 s
for a server that had never seen it). This reads every thread's mask from /proc after the server
has made all its threads (a session, an HTTP request, a feed, a webhook), then stops it with one
SIGTERM."""
import os
import signal
import time

from test_admin import Node, Session, call

import asyncio

STOP_SIGNALS = {"SIGHUP": signal.SIGHUP, "SIGINT": signal.SIGINT, "SIGTERM": signal.SIGTERM}


def masks(pid):
    """{thread id: (name, blocked signal mask)} of every thread of `pid`."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                name = f.read().strip()
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                blocked = next(int(line.split()[1], 16) for line in f if line.startswith("SigBlk:"))
        except (FileNotFoundError, ProcessLookupError):
            continue  # a thread that ended meanwhile
        out[tid] = (name, blocked)
    return out


def test_every_thread_blocks_the_stop_signals_and_one_sigterm_stops_the_server(tmp_path):
    node = Node(tmp_path, "--webhook-allow-private")
    try:
        async def use():
            s = await Session(node.ws, "team", node.admin).open()
            await s.ws.close()
        asyncio.run(use())
        status, _ = call(node.http, "POST", "/v1/admin/webhooks", node.admin,
                         {"url": "http://127.0.0.1:9/hook", "workspaces": "*", "secret": "whsec_" + "A" * 32})
        assert status == 201
        status, _ = call(node.http, "GET", "/v1/workspaces/team", node.admin)
        assert status in (200, 404)
        threads = masks(node.process.pid)
        assert len(threads) >= 3, threads
        unblocked = {tid: (name, sorted(n for n, number in STOP_SIGNALS.items() if not blocked >> (number - 1) & 1))
                     for tid, (name, blocked) in threads.items()
                     if any(not blocked >> (number - 1) & 1 for number in STOP_SIGNALS.values())}
        assert not unblocked, f"threads that would take a stop signal and lose it: {unblocked}"
        started = time.monotonic()
        node.process.send_signal(signal.SIGTERM)
        assert node.process.wait(timeout=30) == 0
        assert time.monotonic() - started < 30
        with open(tmp_path / "server.log") as f:
            assert "signal received" in f.read()
    finally:
        node.stop()
