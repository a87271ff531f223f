"""The admin API as an operator and a stranger's client see it (docs/operating.md, "The admin API"):
tokens minted by PyJWT with `jti` and `iat`, sessions held by Python `websockets`, admin calls made
with `urllib`. One node on SQLite for the rules; three nodes on PostgreSQL (scripts/cluster) for
what one node's call does on another. The times from a revocation or kick to the session's close
are printed (medians of 20), never asserted: a benchmark figure, not a test.
"""
import asyncio
import json
import os
import pathlib
import secrets
import shutil
import statistics
import subprocess
import time
import urllib.error
import urllib.request

import jwt
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = pathlib.Path(os.environ.get("TABSYNC_SERVER_BIN", str(ROOT / ".build" / "debug" / "tabsync-server"))).parent
SERVER = str(BIN / "tabsync-server")


def mint(secret, sub, ws="*", role="editor", jti=None, iat=None, exp_in=3600):
    claims = {"sub": sub, "ws": ws, "role": role, "exp": int(time.time()) + exp_in}
    if jti:
        claims["jti"] = jti
    if iat is not None:
        claims["iat"] = int(iat)
    return jwt.encode(claims, secret.encode(), algorithm="HS256")


def call(base, method, path, token=None, body=None):
    """(status, text) of one admin call."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(base + path, data=data, method=method)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


class Session:
    """One WebSocket session (JSON subprotocol) held open until the server closes it."""

    def __init__(self, url, workspace, token, client="py"):
        self.url, self.workspace, self.token, self.client = url, workspace, token, client
        self.ws = None
        self.messages = []
        self.code = None
        self.closed_at = None

    async def open(self):
        self.ws = await connect(self.url, subprotocols=["tabsync.v1.json"])
        await self.ws.send(json.dumps({"hello": {"workspace": self.workspace, "clientId": self.client, "token": self.token}}))
        first = json.loads(await asyncio.wait_for(self.ws.recv(), 10))
        self.messages.append(first)
        return self

    async def wait_closed(self, timeout=10):
        """Reads until the server closes; returns the close code (None: still open at the deadline)."""
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                self.messages.append(json.loads(await asyncio.wait_for(self.ws.recv(), deadline - time.monotonic())))
        except ConnectionClosed as closed:
            self.closed_at = time.monotonic()
            self.code = closed.rcvd.code if closed.rcvd else None
            return self.code
        except asyncio.TimeoutError:
            return None
        return None

    def errors(self):
        return [m["error"] for m in self.messages if "error" in m]


async def refused(url, workspace, token):
    """(Error messages, close code) of a session refused at its Hello."""
    s = Session(url, workspace, token)
    try:
        await s.open()
    except ConnectionClosed as closed:
        return [], closed.rcvd.code if closed.rcvd else None
    await s.wait_closed(5)
    return s.errors(), s.code


class Node:
    """One tabsync-server on SQLite with an HS256 key (and any extra flags)."""

    def __init__(self, tmp, *flags):
        self.secret = secrets.token_hex(32)
        key = tmp / "team.key"
        key.write_text(self.secret + "\n")
        self.log = open(tmp / "server.log", "wb")
        self.process = subprocess.Popen(
            [SERVER, "--port", "0", "--data-dir", str(tmp / "data"), "--auth-key-file", str(key), *flags],
            stdout=subprocess.PIPE, stderr=self.log)
        line = self.process.stdout.readline().decode()
        assert line.startswith("listening on ws://"), line
        port = int(line.strip().rsplit(":", 1)[1])
        self.ws = f"ws://127.0.0.1:{port}/"
        self.http = f"http://127.0.0.1:{port}"
        self.admin = mint(self.secret, "root", role="admin")

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)
        self.log.close()


@pytest.fixture
def node(tmp_path):
    n = Node(tmp_path, "--max-connections-per-sub", "3")
    yield n
    n.stop()


def test_a_revoked_tokens_session_is_closed_at_once_and_its_reconnect_refused(node):
    async def main():
        closes = []
        for i in range(20):
            token = mint(node.secret, "alice", jti=f"alice-{i}", iat=time.time())
            other = await Session(node.ws, "team", mint(node.secret, "alice", jti=f"keep-{i}")).open()
            s = await Session(node.ws, "team", token).open()
            assert "welcome" in s.messages[0]
            started = time.monotonic()
            status, body = call(node.http, "POST", "/v1/admin/revocations", node.admin, {"jti": f"alice-{i}"})
            assert status == 201, body
            assert json.loads(body)["closedHere"] == 1
            assert await s.wait_closed() == 4401
            closes.append(s.closed_at - started)
            assert any(e["code"] == "UNAUTHORIZED" and "revoked" in e["message"] for e in s.errors()), s.messages
            assert await other.wait_closed(0.2) is None, "another token of the same sub stays"
            await other.ws.close()
            errors, code = await refused(node.ws, "team", token)
            assert code == 4401 and "revoked" in errors[0]["message"]
        print(f"\nrevocation -> close on the node that took it: median {statistics.median(closes) * 1000:.1f} ms "
              f"(p90 {sorted(closes)[17] * 1000:.1f} ms) over {len(closes)}")
        status, body = call(node.http, "GET", "/v1/admin/revocations", node.admin)
        assert status == 200 and len(json.loads(body)["revocations"]) == 20
    asyncio.run(main())


def test_a_subjects_revocation_spares_tokens_issued_after_it(node):
    async def main():
        before = await Session(node.ws, "team", mint(node.secret, "bob", iat=time.time() - 60)).open()
        status, _ = call(node.http, "POST", "/v1/admin/revocations", node.admin,
                         {"sub": "bob", "issuedBefore": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
        assert status == 201
        assert await before.wait_closed() == 4401
        fresh = await Session(node.ws, "team", mint(node.secret, "bob", iat=time.time() + 2)).open()
        assert "welcome" in fresh.messages[0]
        await fresh.ws.close()
    asyncio.run(main())


def test_a_revocation_outlives_a_restart(tmp_path):
    n = Node(tmp_path)
    token = mint(n.secret, "carol", jti="c1")
    assert call(n.http, "POST", "/v1/admin/revocations", n.admin, {"jti": "c1"})[0] == 201
    n.stop()
    again = subprocess.Popen(
        [SERVER, "--port", "0", "--data-dir", str(tmp_path / "data"), "--auth-key-file", str(tmp_path / "team.key")],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        line = again.stdout.readline().decode()
        url = "ws://127.0.0.1:" + line.strip().rsplit(":", 1)[1] + "/"
        errors, code = asyncio.run(refused(url, "team", token))
        assert code == 4401 and "revoked" in errors[0]["message"]
    finally:
        again.terminate()
        again.wait(timeout=10)


def test_a_kicked_sub_loses_its_sessions_and_may_come_back(node):
    async def main():
        token = mint(node.secret, "dave", ws="team-*")
        sessions = [await Session(node.ws, ws, token, client=f"c{i}").open() for i, ws in enumerate(["team-a", "team-b"])]
        bystander = await Session(node.ws, "team-a", mint(node.secret, "erin")).open()
        status, body = call(node.http, "POST", "/v1/admin/kick", node.admin, {"sub": "dave"})
        assert status == 200 and json.loads(body)["closedHere"] == 2
        assert [await s.wait_closed() for s in sessions] == [4408, 4408]
        assert await bystander.wait_closed(0.3) is None
        back = await Session(node.ws, "team-a", token).open()
        assert "welcome" in back.messages[0], "a kick is not a ban"
        listed = json.loads(call(node.http, "GET", "/v1/admin/workspaces/team-a/sessions", node.admin)[1])["sessions"]
        assert sorted(s["sub"] for s in listed) == ["dave", "erin"]
        one = next(s for s in listed if s["sub"] == "erin")
        assert call(node.http, "POST", "/v1/admin/kick", node.admin, {"session": one["id"]})[0] == 200
        assert await bystander.wait_closed() == 4408
        await back.ws.close()
    asyncio.run(main())


def test_a_deleted_workspace_answers_404_its_sessions_are_closed_and_it_may_be_made_again(node):
    async def main():
        token = mint(node.secret, "frank")
        s = await Session(node.ws, "doomed", token).open()
        await s.ws.send(json.dumps({"submit": {"seq": "1", "op": {"add": {"tab": {"id": "t1", "title": "x"}}}}}))
        while not any("applied" in m for m in s.messages):
            s.messages.append(json.loads(await asyncio.wait_for(s.ws.recv(), 5)))
        old_epoch = s.messages[0]["welcome"]["snapshot"]["epoch"]
        assert call(node.http, "GET", "/v1/workspaces/doomed", token)[0] == 200
        listed = json.loads(call(node.http, "GET", "/v1/admin/workspaces", node.admin)[1])["workspaces"]
        assert [w["id"] for w in listed] == ["doomed"] and listed[0]["tabs"] == 1
        status, body = call(node.http, "DELETE", "/v1/admin/workspaces/doomed", node.admin)
        assert status == 200, body
        assert await s.wait_closed() == 4410
        assert call(node.http, "GET", "/v1/workspaces/doomed", token)[0] == 404
        assert call(node.http, "DELETE", "/v1/admin/workspaces/doomed", node.admin)[0] == 404
        assert json.loads(call(node.http, "GET", "/v1/admin/workspaces", node.admin)[1])["workspaces"] == []
        again = await Session(node.ws, "doomed", token).open()
        snapshot = again.messages[0]["welcome"]["snapshot"]
        assert snapshot.get("tabs", []) == [] and snapshot["epoch"] != old_epoch, ("a new history, never spliced", again.messages[0]["welcome"], s.messages[0]["welcome"])
        await again.ws.close()
    asyncio.run(main())


def test_the_session_past_a_subs_limit_is_refused_with_its_code(node):
    async def main():
        token = mint(node.secret, "gina")
        held = [await Session(node.ws, "team", token, client=f"g{i}").open() for i in range(3)]
        errors, code = await refused(node.ws, "team", token)
        assert code == 4429
        assert errors[0]["code"] == "LIMIT_EXCEEDED" and "--max-connections-per-sub" in errors[0]["message"]
        await held[0].ws.close()
        deadline = time.monotonic() + 5
        while True:  # the closed one is released once its connection is gone
            s = Session(node.ws, "team", token, client="g9")
            try:
                await s.open()
                if "welcome" in s.messages[0]:
                    break
            except ConnectionClosed:
                pass
            assert time.monotonic() < deadline, "a freed place was not given again"
            await asyncio.sleep(0.05)
        for h in held[1:] + [s]:
            await h.ws.close()
    asyncio.run(main())


def test_non_admin_and_out_of_scope_admin_tokens_are_refused_on_every_route(node):
    routes = [("GET", "/v1/admin/workspaces", None), ("GET", "/v1/admin/workspaces/team-x/sessions", None),
              ("DELETE", "/v1/admin/workspaces/team-x", None), ("POST", "/v1/admin/kick", {"sub": "x"}),
              ("POST", "/v1/admin/revocations", {"jti": "x"}), ("GET", "/v1/admin/revocations", None)]
    editor = mint(node.secret, "h", role="editor")
    viewer = mint(node.secret, "h", role="viewer")
    scoped = mint(node.secret, "ops", ws="home-*", role="admin")
    expired = mint(node.secret, "root", role="admin", exp_in=-10)
    forged = jwt.encode({"sub": "root", "ws": "*", "role": "admin", "exp": int(time.time()) + 60}, b"x" * 32, algorithm="HS256")
    for method, path, body in routes:
        assert call(node.http, method, path, None, body)[0] == 401, path
        for token in (expired, forged):
            status, text = call(node.http, method, path, token, body)
            assert status == 401 and token not in text, path
        for token in (editor, viewer):
            status, text = call(node.http, method, path, token, body)
            assert status == 403 and "role admin" in text, path
        status, text = call(node.http, method, path, scoped, body)
        if path == "/v1/admin/workspaces":
            assert status == 200 and json.loads(text)["workspaces"] == [], "a scoped admin lists what it grants"
        elif path == "/v1/admin/kick":
            assert status == 200 and json.loads(text)["closedHere"] == 0
        else:
            assert status == 403, (path, status, text)


# --- three nodes on PostgreSQL ---

@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    if shutil.which("haproxy") is None or not any(pathlib.Path(p).exists() for p in ["/usr/lib/postgresql"]):
        pytest.fail("the cluster tests need haproxy and PostgreSQL (scripts/test installs them)")
    directory = tmp_path_factory.mktemp("cluster")
    secret = secrets.token_hex(32)
    key = directory / "team.key"
    key.write_text(secret + "\n")
    # 1,000 ops/s per session, and per workspace and sub for HTTP writes (test_http_write.py's
    # thousand writes go faster than the default 100).
    env = dict(os.environ, BIN=str(BIN), TABSYNC_AUTH_KEY_FILE=str(key), TABSYNC_STORE_POLL_INTERVAL="250ms",
               TABSYNC_CLUSTER_NODE_ARGS="--max-ops-per-second 1000")
    # No directory given: scripts/cluster makes one PostgreSQL's own user can enter (pytest's are 0700).
    out = subprocess.run([str(ROOT / "scripts" / "cluster"), "start"], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    values = dict(line.split(" ", 1)[1].split("=", 1) for line in out.stdout.splitlines() if line.startswith("export "))
    nodes = values["TABSYNC_CLUSTER_NODES"].split(",")
    yield {"secret": secret, "ws": [n + "/" for n in nodes], "http": [n.replace("ws://", "http://") for n in nodes],
           "proxy": values["TABSYNC_CLUSTER_URL"]}
    subprocess.run([str(ROOT / "scripts" / "cluster"), "destroy", values["TABSYNC_CLUSTER_DIR"]], env=env, timeout=60)


def test_a_revocation_taken_by_node_1_closes_a_session_on_node_3(cluster):
    secret = cluster["secret"]
    admin = mint(secret, "root", role="admin")

    async def main():
        closes = []
        for i in range(20):
            token = mint(secret, "ivan", jti=f"ivan-{i}")
            s = await Session(cluster["ws"][2], f"w{i}", token).open()
            assert "welcome" in s.messages[0]
            started = time.monotonic()
            status, body = call(cluster["http"][0], "POST", "/v1/admin/revocations", admin, {"jti": f"ivan-{i}"})
            assert status == 201, body
            assert await s.wait_closed() == 4401
            closes.append(s.closed_at - started)
            errors, code = await refused(cluster["ws"][1], f"w{i}", token)
            assert code == 4401 and "revoked" in errors[0]["message"]
        print(f"\nrevocation on node 1 -> close on node 3 (store poll 250 ms): median {statistics.median(closes) * 1000:.0f} ms "
              f"(max {max(closes) * 1000:.0f} ms) over {len(closes)}")
    asyncio.run(main())


def test_a_kicked_sub_loses_every_session_on_every_node(cluster):
    secret = cluster["secret"]
    admin = mint(secret, "root", role="admin")

    async def main():
        token = mint(secret, "judy")
        sessions = [await Session(url, f"k{i}", token, client=f"j{i}").open() for i, url in enumerate(cluster["ws"])]
        status, body = call(cluster["http"][1], "POST", "/v1/admin/kick", admin, {"sub": "judy"})
        assert status == 200, body
        assert [await s.wait_closed() for s in sessions] == [4408, 4408, 4408]
        back = await Session(cluster["ws"][0], "k0", token).open()
        assert "welcome" in back.messages[0]
        await back.ws.close()
    asyncio.run(main())


def test_a_workspaces_sessions_are_listed_by_its_home_node_through_the_proxy(cluster):
    """HAProxy sends /v1/admin/workspaces/{id}/... where /v1/workspaces/{id}/ws goes (deploy/haproxy.cfg)."""
    secret = cluster["secret"]
    admin = mint(secret, "root", role="admin")
    proxy_http = cluster["proxy"].replace("ws://", "http://")

    async def main():
        nodes = set()
        for i in range(8):
            workspace = f"placed-{i}"
            s = await Session(f"{cluster['proxy']}/v1/workspaces/{workspace}/ws", workspace, mint(secret, "kim")).open()
            status, body = call(proxy_http, "GET", f"/v1/admin/workspaces/{workspace}/sessions", admin)
            assert status == 200, body
            answer = json.loads(body)
            assert [x["sub"] for x in answer["sessions"]] == ["kim"], answer
            nodes.add(answer["node"])
            await s.ws.close()
        assert len(nodes) > 1, "eight workspaces all homed on one node: the ring is not spreading them"
    asyncio.run(main())


def test_the_admin_command_lists_kicks_revokes_and_deletes(node):
    def admin(*args, token=node.admin, url=node.http):
        env = dict(os.environ, TABSYNC_ADMIN_TOKEN=token, TABSYNC_ADMIN_URL=url)
        return subprocess.run([SERVER, "admin", *args], env=env, capture_output=True, text=True, timeout=30)

    async def main():
        token = mint(node.secret, "lee", jti="lee-1")
        s = await Session(node.ws, "cli-ws", token).open()
        await s.ws.send(json.dumps({"submit": {"seq": "1", "op": {"add": {"tab": {"id": "t1", "title": "x"}}}}}))
        while not any("applied" in m for m in s.messages):
            s.messages.append(json.loads(await asyncio.wait_for(s.ws.recv(), 5)))
        listed = admin("ls")
        assert listed.returncode == 0 and listed.stdout.splitlines()[1].split()[:3] == ["cli-ws", "1", "1"], listed.stdout
        shown = admin("show", "cli-ws", "--json")
        sessions = json.loads(shown.stdout)["sessions"]
        assert [x["sub"] for x in sessions] == ["lee"]
        kicked = admin("kick", "--session", sessions[0]["id"])
        assert kicked.returncode == 0 and "1 session(s) closed" in kicked.stdout, kicked
        assert await s.wait_closed() == 4408
        revoked = admin("revoke", "--jti", "lee-1")
        assert revoked.returncode == 0 and "revoked" in revoked.stdout
        assert "jti lee-1" in admin("revocations").stdout
        assert admin("delete", "cli-ws").returncode == 0
        gone = admin("delete", "cli-ws")
        assert gone.returncode == 3 and "404" in gone.stderr
        refused = admin("ls", token=mint(node.secret, "lee", role="editor"))
        assert refused.returncode == 3 and "role admin" in refused.stderr
        remote = admin("ls", url="http://192.0.2.1:7070")
        assert remote.returncode == 2 and "loopback" in remote.stderr
        assert admin("kick").returncode == 2
    asyncio.run(main())
