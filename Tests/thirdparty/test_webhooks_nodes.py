"""Webhooks on several nodes (docs/design.md, "Webhooks", "Several nodes"): two real
tabsync-servers on one PostgreSQL. Each workspace's versions go out from the node holding it, each
exactly once while every node runs (per-node delivery counts on /metrics); after the sending node
is SIGKILLed mid-retry, the other node takes its cursor over once the lease has run out (at least
once: the version in flight may go again). Waits are on conditions with deadlines.
"""
import asyncio
import collections
import json
import os
import secrets
import signal
import subprocess
import sys

import pytest

from test_admin import SERVER, Session, call, mint
from test_webhooks_delivery import Receiver, metric, register, verify, wait_for

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import lib  # noqa: E402


class PgNode:
    """One tabsync-server on the shared PostgreSQL store, with the shared HS256 key."""

    def __init__(self, tmp, name, store, key, *extra):
        self.log = open(tmp / f"{name}.log", "wb")
        self.process = subprocess.Popen(
            [SERVER, "--port", "0", "--store", store, "--auth-key-file", str(key), "--webhook-allow-private", *extra],
            stdout=subprocess.PIPE, stderr=self.log)
        line = self.process.stdout.readline().decode()
        assert line.startswith("listening on ws://"), line
        port = int(line.strip().rsplit(":", 1)[1])
        self.ws, self.http = f"ws://127.0.0.1:{port}/", f"http://127.0.0.1:{port}"

    def delivered(self):
        status, text = call(self.http, "GET", "/metrics")
        assert status == 200
        return metric(text, 'tabsync_webhook_deliveries_total{result="delivered"}')

    def stop(self, sig=signal.SIGTERM):
        if self.process.poll() is None:
            self.process.send_signal(sig)
            self.process.wait(timeout=15)
        self.log.close()


@pytest.fixture
def store():
    url = os.environ.get("TABSYNC_TEST_POSTGRES_URL")
    pg = None
    if not url:
        pg = lib.Postgres()
        url = pg.url
    name = f"hooks{secrets.token_hex(4)}"
    subprocess.run(["psql", "-q", url, "-c", f"CREATE DATABASE {name}"], check=True, stdout=subprocess.DEVNULL)
    yield url.rsplit("/", 1)[0] + "/" + name
    subprocess.run(["psql", "-q", url, "-c", f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"], stdout=subprocess.DEVNULL)
    if pg:
        pg.destroy()


async def write_on(node, secret, workspace, first, count, client):
    s = await Session(node.ws, workspace, mint(secret, "w", role="editor"), client=client).open()
    for seq in range(1, count + 1):
        n = first + seq
        await s.ws.send(json.dumps({"submit": {"seq": str(seq), "op": {"add": {"tab": {"id": f"t{n}", "title": f"tab {n}"}}}}}))
    while sum("applied" in m for m in s.messages) < count:
        s.messages.append(json.loads(await asyncio.wait_for(s.ws.recv(), 20)))
    return s


def test_the_home_node_sends_each_version_once_and_a_killed_nodes_cursor_is_taken_over(tmp_path, store):
    key = tmp_path / "team.key"
    secret_key = secrets.token_hex(32)
    key.write_text(secret_key + "\n")
    receiver = Receiver()
    one = PgNode(tmp_path, "node1", store, key)
    two = PgNode(tmp_path, "node2", store, key)
    sessions = []
    try:
        one.admin = mint(secret_key, "root", role="admin")
        hook_secret = register(one, receiver.url, "nodes-*")

        async def phase1():
            sessions.append(await write_on(one, secret_key, "nodes-a", 0, 20, "ca"))
            sessions.append(await write_on(two, secret_key, "nodes-b", 0, 15, "cb"))
        asyncio.run(phase1())
        wanted = {f"nodes-a:{v}" for v in range(1, 21)} | {f"nodes-b:{v}" for v in range(1, 16)}
        wait_for(lambda: wanted <= {i for i, _, _ in receiver.taken()}, "every version of both workspaces", timeout=120)
        counts = collections.Counter(i for i, _, _ in receiver.taken())
        assert all(n == 1 for n in counts.values()), {i: n for i, n in counts.items() if n > 1}
        # Each workspace from the node that holds it (where its session wrote); a node counts a
        # delivery once it has read the receiver's 2xx, just after the receiver recorded it.
        wait_for(lambda: (one.delivered(), two.delivered()) == (20, 15), "each node counts what it sent")
        assert (one.delivered(), two.delivered()) == (20, 15)

        # Node 1 fails to deliver nodes-a:21..23 and is killed while retrying; node 2 takes over.
        with receiver.lock:
            receiver.fail = 10**9
        asyncio.run(write_on(one, secret_key, "nodes-a", 20, 3, "ca2"))
        wait_for(lambda: any(h["webhook-id"] == "nodes-a:21" for h, _, _ in list(receiver.requests)), "an attempt of nodes-a:21")
        one.stop(signal.SIGKILL)
        with receiver.lock:
            receiver.fail = 0
        wait_for(lambda: {"nodes-a:21", "nodes-a:22", "nodes-a:23"} <= {i for i, _, _ in receiver.taken()},
                 "node 2 sends what node 1 had left", timeout=180)
        # The receiver has answered 2xx before node 2 reads that answer and counts it: waited for.
        wait_for(lambda: two.delivered() >= 15 + 3, "node 2 counts the three it sent")
        taken = [i for i, _, _ in receiver.taken() if i.startswith("nodes-a:")]
        assert taken == [f"nodes-a:{v}" for v in range(1, 24)], taken
        for headers, body, _ in receiver.requests:
            assert verify(hook_secret, headers, body)
    finally:
        for s in sessions:
            try:
                asyncio.run(s.ws.close())
            except Exception:
                pass
        one.stop()
        two.stop()
        receiver.close()
