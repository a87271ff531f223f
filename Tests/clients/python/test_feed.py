"""The Python package's feed reader (clients/python/tabsync_client/feed.py) against a real
tabsync-server (.build/debug): cut at random moments by another thread (its socket shut down, as a
network fault would), it resumes by Last-Event-ID and yields every version once, in order, while
two sessions write; a resume the log can no longer serve yields a snapshot; a refusal is final."""
import asyncio
import http.server
import json
import os
import pathlib
import random
import secrets
import socket
import sys
import threading
import time

import jwt
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "clients" / "python"))
sys.path.insert(0, str(ROOT / "scripts"))

from lib import Server  # noqa: E402
from tabsync_client import Feed, FeedUnreachable, HttpError, Session  # noqa: E402

BIN = pathlib.Path(os.environ.get("TABSYNC_SERVER_BIN", str(ROOT / ".build" / "debug" / "tabsync-server")))


def write(url, workspace, client, count):
    """`count` adds from one session, in a thread of its own; returns the thread."""
    def main():
        async def go():
            s = await Session(url, workspace, client_id=client).start()
            for n in range(count):
                await s.submit({"add": {"tab": {"id": f"{client}-{n}", "title": f"{client} {n}"}}})
            await s.close()
        asyncio.run(asyncio.wait_for(go(), 120))
    thread = threading.Thread(target=main)
    thread.start()
    return thread


def test_a_reader_cut_at_random_a_hundred_times_sees_every_version_once_in_order():
    server = Server(str(BIN), store="memory")
    try:
        url = server.url + "/"
        feed = Feed(url, "busy", after=0, backoff=(0.005, 0.05))
        writers = [write(url, "busy", f"w{i}", 150) for i in range(2)]
        stop = threading.Event()
        rng = random.Random(int(os.environ.get("TABSYNC_FEED_SEED", "4242")))

        def cutter():
            # Cuts at random moments (mid-event too) until all 300 versions are in and 100
            # resumes were made, or the deadline passes (then the assertions below fail).
            deadline = time.monotonic() + 120
            while not stop.is_set():
                if (feed.last == 300 and feed.resumes >= 100) or time.monotonic() > deadline:
                    feed.close()
                    return
                time.sleep(rng.uniform(0, 0.01))
                feed.cut()
        cut_thread = threading.Thread(target=cutter)
        cut_thread.start()
        events = []
        try:
            for event in feed:
                events.append(event)
        finally:
            stop.set()
            cut_thread.join()
            for w in writers:
                w.join()
        assert [e.kind for e in events] == ["op"] * len(events)
        assert [e.version for e in events] == list(range(1, 301)), "a gap or a repeat"
        assert [int(e.data["version"]) for e in events] == list(range(1, 301))
        assert feed.resumes >= 100, f"only {feed.resumes} resumes"
        ids = {e.data["op"]["add"]["tab"]["id"] for e in events}
        assert ids == {f"w{i}-{n}" for i in range(2) for n in range(150)}
    finally:
        server.stop()


def test_a_resume_the_log_cannot_serve_yields_a_snapshot_then_ops_again():
    server = Server(str(BIN), store="memory", args=["--log-retention", "20"])
    try:
        url = server.url + "/"
        write(url, "short", "a", 5).join()
        feed = Feed(url, "short", after=0)
        events = iter(feed)
        assert [next(events).version for _ in range(5)] == [1, 2, 3, 4, 5]
        feed.cut()  # nothing more was sent: the next read finds the cut and resumes from 5
        write(url, "short", "b", 50).join()  # 55 now; the log keeps the last 20
        snapshot = next(events)
        assert (snapshot.kind, snapshot.version) == ("snapshot", 55)
        assert snapshot.data["version"] == "55" and len(snapshot.data["tabs"]) == 55
        assert feed.resumes == 1
        write(url, "short", "c", 1).join()
        after = next(events)
        assert (after.kind, after.version) == ("op", 56) and after.data["op"]["add"]["tab"]["id"] == "c-0"
        feed.close()
        # A fresh reader with no `after` starts with a snapshot of now.
        first = next(iter(Feed(url, "short", timeout=10)))
        assert (first.kind, first.version) == ("snapshot", 56)
    finally:
        server.stop()


def test_a_refusal_is_final_and_a_token_is_sent_as_a_bearer(tmp_path):
    secret = secrets.token_hex(32)
    (tmp_path / "key").write_text(secret + "\n")
    server = Server(str(BIN), store="memory", args=["--auth-key-file", str(tmp_path / "key")])
    try:
        url = server.url + "/"

        def token(ws):
            return jwt.encode({"sub": "vic", "ws": ws, "role": "viewer", "exp": int(time.time()) + 3600},
                              secret.encode(), algorithm="HS256")
        with pytest.raises(HttpError) as refused:
            next(iter(Feed(url, "locked", timeout=10)))
        assert refused.value.status == 401
        with pytest.raises(HttpError) as foreign:
            next(iter(Feed(url, "locked", token=token("other"), timeout=10)))
        assert foreign.value.status in (401, 403, 404)
        first = next(iter(Feed(url, "locked", token=token("locked"), timeout=10)))
        assert (first.kind, first.version) == ("snapshot", 0)
    finally:
        server.stop()


def wait_for(condition, what, seconds=60):
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"not within {seconds} s: {what}"
        time.sleep(0.02)


def test_a_stream_silent_past_the_timeout_is_taken_as_dead_and_resumed_losing_nothing():
    # Keep-alives every 30 s; the reader's timeout is 0.3 s: each silence ends in a resume.
    server = Server(str(BIN), store="memory", args=["--feed-keepalive", "30"])
    try:
        url = server.url + "/"
        feed = Feed(url, "silent", after=0, timeout=0.3)
        events = []
        reader = threading.Thread(target=lambda: events.extend(feed))
        reader.start()
        wait_for(lambda: feed.resumes >= 3, "three resumes after silences")
        write(url, "silent", "s", 2).join()
        wait_for(lambda: len(events) == 2, "the two ops")
        feed.close()
        reader.join(30)
        assert not reader.is_alive(), "close() did not end the loop"
        assert [(e.kind, e.version) for e in events] == [("op", 1), ("op", 2)]
    finally:
        server.stop()


class Scripted(http.server.BaseHTTPRequestHandler):
    """A stand-in for what a real server does only by chance or behind a proxy: each GET takes the
    next reply of `server.script` ("503", or raw stream bytes sent before the connection is
    closed) and records its Last-Event-ID."""

    def do_GET(self):
        self.server.asked.append(self.headers.get("Last-Event-ID"))
        reply = self.server.script.pop(0) if self.server.script else b""
        if reply == "503":
            self.send_response(503)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        self.wfile.write(reply)
        self.wfile.flush()
        self.close_connection = True

    def log_message(self, *args):
        pass


def op_event(version, title):
    data = json.dumps({"version": str(version), "op": {"add": {"tab": {"id": f"t{version}", "title": title}}}})
    return f"id: {version}\nevent: op\ndata: {data}\n\n".encode()


def test_a_503_is_tried_again_and_an_event_cut_halfway_is_dropped_and_read_again():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Scripted)
    server.asked = []
    whole = op_event(9, "whole")
    server.script = ["503", "503", b": hello\r\n\nretry: 10\n" + op_event(8, "eight") + whole[: len(whole) - 9],
                     op_event(9, "whole")]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        feed = Feed(f"http://127.0.0.1:{server.server_address[1]}", "w", after=7, timeout=10, backoff=(0.01, 0.05))
        events = iter(feed)
        got = [next(events), next(events)]
        feed.close()
        assert [(e.version, e.data["op"]["add"]["tab"]["title"]) for e in got] == [(8, "eight"), (9, "whole")]
        assert server.asked == ["7", "7", "7", "8"], "503s tried again from 7; the half event not taken"
        assert feed.resumes == 1
    finally:
        server.shutdown()
        server.server_close()


def test_a_server_unreachable_for_give_up_after_raises_feed_unreachable():
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(FeedUnreachable, match="no connection"):
        next(iter(Feed(f"http://127.0.0.1:{port}", "w", give_up_after=0.5, backoff=(0.05, 0.1))))
