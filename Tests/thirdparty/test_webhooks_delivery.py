"""Webhook deliveries as a receiver sees them (docs/design.md, "Webhooks"): a real tabsync-server on
SQLite POSTs to a Python `http.server` on 127.0.0.1 (allowed by --webhook-allow-private); every
signature is checked with Python's own `hmac` (the Standard Webhooks rule, written here again), the
versions of each workspace arrive in order, a receiver that fails is retried, and without the flag
the loopback receiver is never reached. Waits are on conditions with deadlines, never sleeps.
"""
import asyncio
import base64
import hashlib
import hmac
import http.server
import json
import os
import re
import secrets
import subprocess
import threading
import time

import pytest

from test_admin import SERVER, Node, Session, call, mint


class Receiver:
    """A webhook receiver on 127.0.0.1: answers 500 to the first `fail` requests, then 204. With
    `tls` (an `ssl.SSLContext` of the server side) it serves HTTPS, its URL naming `host`."""

    def __init__(self, fail=0, tls=None, host="127.0.0.1"):
        self.requests = []
        self.fail = fail
        self.lock = threading.Lock()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                with receiver.lock:
                    failing = receiver.fail > 0
                    receiver.fail -= 1 if failing else 0
                    receiver.requests.append((dict((k.lower(), v) for k, v in self.headers.items()), body, failing))
                self.send_response(500 if failing else 204)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if tls is not None:  # a failed handshake ends in accept() and is dropped by serve_forever
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        scheme = "https" if tls is not None else "http"
        self.url = f"{scheme}://{host}:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def taken(self):
        """(webhook-id, headers, body) of every request answered 204, in arrival order."""
        with self.lock:
            return [(h["webhook-id"], h, b) for h, b, failed in self.requests if not failed]

    def close(self):
        self.server.shutdown()


def wait_for(condition, what, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)  # a poll interval, not a wait for time to pass: the condition decides
    raise AssertionError(f"not within {timeout} s: {what}")


def verify(secret, headers, body):
    """The Standard Webhooks check, independent of the server's code."""
    key = base64.b64decode(secret.removeprefix("whsec_"))
    signed = f'{headers["webhook-id"]}.{headers["webhook-timestamp"]}.'.encode() + body
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    return any(hmac.compare_digest(part.removeprefix("v1,"), expected)
               for part in headers["webhook-signature"].split() if part.startswith("v1,"))


async def write(node, workspace, count, client, first=0):
    """`count` adds of tabs t{first+1}... from a new session of `client`, until each is applied."""
    s = await Session(node.ws, workspace, mint(node.secret, "w", role="editor"), client=client).open()
    for seq in range(1, count + 1):
        n = first + seq
        await s.ws.send(json.dumps({"submit": {"seq": str(seq), "op": {"add": {"tab": {"id": f"t{n}", "title": f"tab {n}"}}}}}))
    while sum("applied" in m for m in s.messages) < count:
        s.messages.append(json.loads(await asyncio.wait_for(s.ws.recv(), 10)))
    await s.ws.close()


def register(node, url, workspaces):
    secret = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
    status, text = call(node.http, "POST", "/v1/admin/webhooks", node.admin, {"url": url, "workspaces": workspaces, "secret": secret})
    assert status == 201, text
    return secret


def test_every_version_arrives_signed_and_in_order_per_workspace_after_failures(tmp_path):
    receiver = Receiver(fail=3)
    node = Node(tmp_path, "--webhook-allow-private")
    try:
        secret = register(node, receiver.url, "hook-*")
        asyncio.run(write(node, "hook-a", 8, "ca"))
        asyncio.run(write(node, "hook-b", 5, "cb"))
        asyncio.run(write(node, "other", 2, "co"))
        wanted = {f"hook-a:{v}" for v in range(1, 9)} | {f"hook-b:{v}" for v in range(1, 6)}
        wait_for(lambda: wanted <= {i for i, _, _ in receiver.taken()}, "every version of hook-a and hook-b taken")

        with receiver.lock:
            everything = list(receiver.requests)
        assert sum(failed for _, _, failed in everything) == 3
        for headers, body, _ in everything:
            assert verify(secret, headers, body), headers
            assert abs(int(headers["webhook-timestamp"]) - time.time()) < 300
            assert headers["content-type"] == "application/json"
        for workspace, last in [("hook-a", 8), ("hook-b", 5)]:
            # Taken in version order, each at least once; a repeat only of the one in flight.
            versions = [int(i.split(":")[1]) for i, _, _ in receiver.taken() if i.startswith(workspace + ":")]
            assert versions == sorted(versions) and set(versions) == set(range(1, last + 1)), versions
            attempts = [int(h["webhook-id"].split(":")[1]) for h, _, _ in everything if h["webhook-id"].startswith(workspace + ":")]
            assert attempts == sorted(attempts), attempts
        for webhook_id, _, body in receiver.taken():
            event = json.loads(body)
            assert event["type"] == "op" and f'{event["workspace"]}:{event["applied"]["version"]}' == webhook_id
        assert not any(i.startswith("other:") for i, _, _ in receiver.taken())
        for n, (headers, _, failed) in enumerate(everything):
            if failed:  # the next request for its workspace is the same version again
                workspace = headers["webhook-id"].split(":")[0]
                after = next(h for h, _, _ in everything[n + 1:] if h["webhook-id"].startswith(workspace + ":"))
                assert after["webhook-id"] == headers["webhook-id"], (headers["webhook-id"], after["webhook-id"])
    finally:
        node.stop()
        receiver.close()


def test_a_restarted_server_goes_on_from_its_cursor(tmp_path):
    receiver = Receiver()
    node = Node(tmp_path, "--webhook-allow-private")
    try:
        register(node, receiver.url, "*")
        asyncio.run(write(node, "again", 3, "c1"))
        wait_for(lambda: {i for i, _, _ in receiver.taken()} >= {"again:1", "again:2", "again:3"}, "the first three")
    finally:
        node.stop()
    node = Node(tmp_path, "--webhook-allow-private")
    try:
        async def more():
            s = await Session(node.ws, "again", mint(node.secret, "w", role="editor"), client="c2").open()
            await s.ws.send(json.dumps({"submit": {"seq": "1", "op": {"add": {"tab": {"id": "t9", "title": "nine"}}}}}))
            while not any("applied" in m for m in s.messages):
                s.messages.append(json.loads(await asyncio.wait_for(s.ws.recv(), 10)))
            await s.ws.close()
        asyncio.run(more())
        wait_for(lambda: "again:4" in {i for i, _, _ in receiver.taken()}, "version 4 after the restart")
        ids = [i for i, _, _ in receiver.taken()]
        assert ids == ["again:1", "again:2", "again:3", "again:4"], ids
    finally:
        node.stop()
        receiver.close()


@pytest.mark.parametrize("history", ["0", "30d,365d"])
def test_a_receiver_down_for_more_than_the_log_gets_every_op_not_a_snapshot(tmp_path, history):
    """Compaction keeps what an enabled hook has not delivered (docs/design.md, "Webhooks",
    "Compaction and cursors"): with a log of 5 ops, a receiver down while 40 more are committed
    gets each of them as an `op` delivery, in order, once it is back; no `snapshot` delivery.
    Without history the retention alone would trim them (the floor keeps them); with history (the
    default) they are kept anyway, and the deliverer must read them from the log, not through a
    load of the retention's window."""
    receiver = Receiver(fail=10**9)
    node = Node(tmp_path, "--webhook-allow-private", "--log-retention", "5", "--history-retention", history)
    try:
        secret = register(node, receiver.url, "down-*")
        asyncio.run(write(node, "down-a", 1, "c1"))
        # Two failed attempts: the deliverer has stored its cursor (at 0) with the first.
        wait_for(lambda: len(receiver.requests) >= 2, "two failed attempts of down-a:1", timeout=60)
        asyncio.run(write(node, "down-a", 40, "c2", first=1))
        with receiver.lock:
            receiver.fail = 0
        wanted = {f"down-a:{v}" for v in range(1, 42)}

        def all_ops():
            taken = receiver.taken()
            snapshots = [i for i, _, body in taken if json.loads(body)["type"] == "snapshot"]
            assert not snapshots, f"a snapshot delivery: {snapshots} (the log lost ops the hook had not delivered)"
            return wanted <= {i for i, _, _ in taken}
        wait_for(all_ops, "all 41 versions", timeout=120)
        taken = receiver.taken()
        assert [i for i, _, _ in taken] == [f"down-a:{v}" for v in range(1, 42)]
        for webhook_id, headers, body in taken:
            event = json.loads(body)
            assert event["type"] == "op", (webhook_id, event["type"])
            assert verify(secret, headers, body)
    finally:
        node.stop()
        receiver.close()


def test_a_loopback_receiver_is_refused_without_the_flag(tmp_path):
    receiver = Receiver()
    node = Node(tmp_path)
    try:
        register(node, receiver.url, "*")
        asyncio.run(write(node, "private", 2, "c1"))
        log = tmp_path / "server.log"
        wait_for(lambda: "private:1" in log.read_text() and "loopback" in log.read_text(), "the refusal logged")
        assert receiver.requests == []
    finally:
        node.stop()
        receiver.close()


def metric(text, name):
    """The value of one sample of a /metrics text (name with its labels), None when absent."""
    match = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
    return float(match.group(1)) if match else None


def test_a_hook_failing_past_the_give_up_is_disabled_counted_and_enabled_again_from_its_cursor(tmp_path):
    receiver = Receiver(fail=10**9)  # every request answered 500 until told otherwise
    node = Node(tmp_path, "--webhook-allow-private", "--webhook-give-up-after", "3s")

    def admin(*args):
        environment = dict(os.environ, TABSYNC_ADMIN_TOKEN=node.admin, TABSYNC_ADMIN_URL=node.http)
        return subprocess.run([SERVER, "admin", "webhooks", *args], env=environment, capture_output=True, text=True, timeout=30)

    def hooks():
        status, text = call(node.http, "GET", "/v1/admin/webhooks", node.admin)
        assert status == 200, text
        return json.loads(text)["webhooks"]

    try:
        secret = register(node, receiver.url, "give-*")
        asyncio.run(write(node, "give-a", 3, "c1"))
        disabled = wait_for(lambda: next((h for h in hooks() if not h["enabled"]), None), "the hook disabled", timeout=120)
        assert "HTTP 500" in disabled["disabledReason"] and "give-a:1" in disabled["disabledReason"], disabled
        assert "failing since" in disabled["disabledReason"] and disabled["disabledAt"].endswith("Z"), disabled
        with receiver.lock:
            tried = [h["webhook-id"] for h, _, _ in receiver.requests]
        assert tried and set(tried) == {"give-a:1"}, tried  # never past the version that fails

        status, text = call(node.http, "GET", "/metrics")
        assert status == 200
        assert metric(text, "tabsync_webhooks_disabled_total") == 1
        assert metric(text, 'tabsync_webhooks{state="disabled"}') == 1
        assert metric(text, 'tabsync_webhooks{state="enabled"}') == 0
        assert metric(text, 'tabsync_webhook_deliveries_total{result="failed"}') == len(tried)
        assert metric(text, "tabsync_webhook_oldest_pending_seconds") == 0  # a disabled hook waits for nothing
        assert secret.removeprefix("whsec_") not in text and receiver.url not in text
        assert str(receiver.server.server_address[1]) not in text

        listed = admin("ls")
        assert listed.returncode == 0, listed.stderr
        assert "no (since " in listed.stdout and "HTTP 500" in listed.stdout, listed.stdout

        asyncio.run(write(node, "give-b", 1, "c2"))  # a disabled hook sends nothing of it, yet
        with receiver.lock:
            receiver.fail = 0
        enabled = admin("enable", disabled["id"])
        assert enabled.returncode == 0 and f"enabled {disabled['id']}" in enabled.stdout, (enabled.stdout, enabled.stderr)
        assert all(h["enabled"] for h in hooks())
        wanted = {"give-a:1", "give-a:2", "give-a:3", "give-b:1"}
        wait_for(lambda: wanted <= {i for i, _, _ in receiver.taken()}, "every version after the hook was enabled")
        taken = [i for i, _, _ in receiver.taken()]
        assert [i for i in taken if i.startswith("give-a:")] == ["give-a:1", "give-a:2", "give-a:3"], taken
        for headers, body, _ in receiver.requests:
            assert verify(secret, headers, body)
        _, text = call(node.http, "GET", "/metrics")
        assert metric(text, 'tabsync_webhook_deliveries_total{result="delivered"}') == 4
        assert metric(text, 'tabsync_webhooks{state="enabled"}') == 1
    finally:
        node.stop()
        receiver.close()
