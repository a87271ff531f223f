"""`Http.write` (clients/python/tabsync_client/http.py): HTTP writes with an idempotency key
(shared/DESIGN.md, "Talking to it without a WebSocket"). Against a real server: a batch applied
once however often it is sent under its key (a repeat answered the same; the answers dropped by a
proxy on the way and the client trying again by itself), another body under a used key refused 422
with nothing applied, a viewer refused 403. The server side is built on another branch (httpw):
until it is merged, a server that answers 404 or 405 for POST /v1/workspaces/{id}/ops makes these
tests skip, and only then. The client's own retry rules (503 + Retry-After, an answer lost) are
also checked against a small HTTP server of this file that refuses on purpose, since a real one
gives a 503 only when its store fails."""
import http.server
import json
import os
import pathlib
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
from tabsync_client import Http, HttpError, KeyReused  # noqa: E402

BIN = pathlib.Path(os.environ.get("TABSYNC_SERVER_BIN", str(ROOT / ".build" / "debug" / "tabsync-server")))
SKIP = ("the server answers {status} for POST /v1/workspaces/{{id}}/ops: HTTP writes are not served by this "
        "build yet (the server side is on branch httpw); skipped only for a 404 or 405")


def add(n, prefix="h"):
    return {"add": {"tab": {"id": f"{prefix}{n}", "title": f"Tab {n}", "url": f"https://example.test/{n}"}}}


def require_writes(http):
    """Skips the test when the route is not served (404/405), and only then."""
    try:
        http.write("probe", [add(0, "probe")], key="probe-" + secrets.token_hex(4), deadline=10)
    except HttpError as refused:
        if refused.status in (404, 405):
            pytest.skip(SKIP.format(status=refused.status))
        raise


@pytest.fixture
def server(tmp_path):
    secret = secrets.token_hex(32)
    (tmp_path / "key").write_text(secret + "\n")
    s = Server(str(BIN), store="sqlite", scratch=str(tmp_path), args=["--auth-key-file", str(tmp_path / "key")])
    s.mint = lambda role, sub="hugo": jwt.encode({"sub": sub, "ws": "*", "role": role, "exp": int(time.time()) + 3600},
                                                 secret.encode(), algorithm="HS256")
    yield s
    s.stop()


def test_a_batch_is_applied_once_under_its_key_and_a_repeat_answers_the_same(server):
    http = Http(server.url, token=server.mint("editor"))
    require_writes(http)
    ops = [add(n) for n in range(3)]
    first = http.write("hw", ops, key="batch-1")
    assert [int(r["version"]) for r in first] == [1, 2, 3]
    assert first[0]["op"]["add"]["tab"]["id"] == "h0"
    assert http.write("hw", ops, key="batch-1") == first, "a repeat gets the same answer"
    with pytest.raises(KeyReused) as reused:
        http.write("hw", [add(9)], key="batch-1")
    assert reused.value.status == 422
    assert [o["op"]["add"]["tab"]["id"] for o in http.all_ops("hw")] == ["h0", "h1", "h2"]
    with pytest.raises(HttpError) as viewer:
        Http(server.url, token=server.mint("viewer", "vic")).write("hw", [add(7)])
    assert viewer.value.status == 403
    assert http.snapshot("hw")["version"] == "3"


class DroppingProxy:
    """A TCP proxy on 127.0.0.1 that passes each request to the server and, for the first `drop`
    connections, reads the server's answer and closes the client's connection without it."""

    def __init__(self, port, drop):
        self.target, self.drop, self.dropped = port, drop, 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client):
        upstream = socket.create_connection(("127.0.0.1", self.target))
        drop = self.dropped < self.drop
        if drop:
            self.dropped += 1
        threading.Thread(target=self._pipe, args=(client, upstream), daemon=True).start()
        answer = upstream.recv(65536)  # the server answered: the ops are stored
        if not drop:
            while answer:
                client.sendall(answer)
                answer = upstream.recv(65536)
        client.close()
        upstream.close()

    @staticmethod
    def _pipe(source, sink):
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass

    def close(self):
        self.listener.close()


def test_answers_lost_on_the_way_are_asked_again_under_the_same_key_and_applied_once(server):
    direct = Http(server.url, token=server.mint("editor"))
    require_writes(direct)
    proxy = DroppingProxy(server.port, drop=2)
    try:
        through = Http(f"http://127.0.0.1:{proxy.port}", token=server.mint("editor"))
        results = through.write("lost", [add(n) for n in range(4)], key="lost-1", deadline=60)
        assert proxy.dropped == 2
        assert [int(r["version"]) for r in results] == [1, 2, 3, 4]
        assert [o["op"]["add"]["tab"]["id"] for o in direct.all_ops("lost")] == ["h0", "h1", "h2", "h3"]
    finally:
        proxy.close()


class Refusing(http.server.BaseHTTPRequestHandler):
    """Answers by the script in `server.script`: "503" or "429" (Retry-After: 0), "drop" (closes with
    no answer), "422", "400", or "ok"; records each request's key and body."""

    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.seen.append((self.path, self.headers.get("Idempotency-Key"), body,
                                 self.headers.get("Authorization")))
        step = self.server.script.pop(0)
        if step == "drop":
            self.close_connection = True
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        status, answer = {"503": (503, {"error": {"code": "UNAVAILABLE", "message": "store busy"}}),
                          "429": (429, {"error": {"code": "RATE_LIMITED", "message": "over 100 ops per second"}}),
                          "422": (422, {"error": {"code": "KEY_REUSED", "message": "another body under this key"}}),
                          "400": (400, {"error": {"code": "INVALID_ARGUMENT", "message": "ops must be a list"}}),
                          "ok": (200, {"results": [{"version": "1", "op": json.loads(body)["ops"][0]}]})}[step]
        data = json.dumps(answer).encode()
        self.send_response(status)
        if status in (503, 429):
            self.send_header("Retry-After", "0")
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def refusing():
    s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Refusing)
    s.seen, s.script = [], []
    threading.Thread(target=s.serve_forever, daemon=True).start()
    yield s
    s.shutdown()
    s.server_close()


def test_503_429_and_a_lost_answer_are_tried_again_with_the_same_key_and_body(refusing):
    refusing.script = ["503", "drop", "429", "503", "ok"]
    http = Http(f"http://127.0.0.1:{refusing.server_address[1]}", token="t0k")
    results = http.write("team/a b", [add(1)], deadline=30)
    assert results == [{"version": "1", "op": add(1)}]
    assert len(refusing.seen) == 5
    paths, keys, bodies, auths = zip(*refusing.seen)
    assert set(paths) == {"/v1/workspaces/team%2Fa%20b/ops"}
    assert len(set(keys)) == 1 and 1 <= len(keys[0]) <= 64, "one key for every try"
    assert set(bodies) == {b'{"ops":[' + json.dumps(add(1), separators=(",", ":")).encode() + b"]}"}
    assert set(auths) == {"Bearer t0k"}


def test_refusals_other_than_503_are_final(refusing):
    http = Http(f"http://127.0.0.1:{refusing.server_address[1]}")
    refusing.script = ["422"]
    with pytest.raises(KeyReused, match="another body"):
        http.write("w", [add(1)], key="k1")
    refusing.script = ["400"]
    with pytest.raises(HttpError, match="ops must be a list") as refused:
        http.write("w", [add(1)], key="k2")
    assert refused.value.status == 400 and not isinstance(refused.value, KeyReused)
    assert [k for _, k, _, _ in refusing.seen] == ["k1", "k2"], "each sent once"
    # A 503 that lasts past the deadline is raised, not retried for ever.
    refusing.script = ["503"] * 50
    with pytest.raises(HttpError) as busy:
        http.write("w", [add(1)], key="k3", deadline=1)
    assert busy.value.status == 503
