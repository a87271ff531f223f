"""HTTP writes as a stranger sends them (docs/design.md, "HTTP writes"): `POST
/v1/workspaces/{id}/ops` over Python's http.client with an `Idempotency-Key` and a PyJWT token. The
ops are applied in order and answered with their versions; the same key and body again is answered
the same and applies nothing, also after a restart of the server; another body under a used key is
422; a viewer is 403; a missing or bad key is 400; a bad op gets its own error in the results.
Issue 42's Done-when on every store: 1,000 writes, each sent three times under one key with the
first answer dropped by a proxy (`answer_dropper.py`), leave exactly 1,000 ops and three identical
answers on SQLite, on PostgreSQL (one node) and on three nodes on PostgreSQL through HAProxy."""
import http.client
import json
import os
import secrets
import subprocess
import tempfile
import urllib.request

from answer_dropper import AnswerDropper, thousand_writes
from test_admin import ROOT, Node, cluster, mint  # noqa: F401 (cluster: the three-node fixture)

import pytest


@pytest.fixture
def node(tmp_path):
    n = Node(tmp_path)
    yield n
    n.stop()


def post(node, workspace, body, key="k-1", token=None, raw=None):
    """(status, headers, decoded JSON or text) of one write."""
    port = int(node.http.rsplit(":", 1)[1])
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    headers = {"Content-Type": "application/json"}
    if key is not None:
        headers["Idempotency-Key"] = key
    if token:
        headers["Authorization"] = f"Bearer {token}"
    conn.request("POST", f"/v1/workspaces/{workspace}/ops", body=raw if raw is not None else json.dumps(body), headers=headers)
    r = conn.getresponse()
    text = r.read().decode()
    conn.close()
    try:
        return r.status, dict(r.getheaders()), json.loads(text)
    except ValueError:
        return r.status, dict(r.getheaders()), text


def version(node, token):
    port = int(node.http.rsplit(":", 1)[1])
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", "/v1/workspaces/team", headers={"Authorization": f"Bearer {token}"})
    r = conn.getresponse()
    text = r.read()
    conn.close()
    if r.status == 404:
        return 0, []  # no op yet
    body = json.loads(text)
    return int(body.get("version", "0")), [t["id"] for t in body.get("tabs", [])]


TWO = {"ops": [{"add": {"tab": {"id": "a", "title": "A"}}}, {"add": {"tab": {"id": "b", "title": "B"}}}]}


def test_a_write_is_applied_once_and_answered_again_the_same_across_a_restart(tmp_path):
    node = Node(tmp_path)
    try:
        token = mint(node.secret, "script")
        status, _, first = post(node, "team", TWO, key="open-ab", token=token)
        assert status == 200, first
        assert [r["version"] for r in first["results"]] == ["1", "2"]
        assert first["results"][1]["op"]["add"]["tab"]["id"] == "b"
        assert version(node, token) == (2, ["a", "b"])

        status, _, again = post(node, "team", TWO, key="open-ab", token=token)
        assert status == 200 and again == first, again
        assert version(node, token) == (2, ["a", "b"]), "a repeat applies nothing"

        other = {"ops": [{"add": {"tab": {"id": "c", "title": "C"}}}]}
        status, _, body = post(node, "team", other, key="open-ab", token=token)
        assert status == 422 and body["error"]["code"] == "INVALID_ARGUMENT", body
        assert version(node, token) == (2, ["a", "b"])
    finally:
        node.stop()
    # The same data directory: the key is remembered by the store, not by the process.
    node = Node(tmp_path)
    try:
        token = mint(node.secret, "script")
        status, _, again = post(node, "team", TWO, key="open-ab", token=token)
        assert status == 200 and again == first, again
        status, _, body = post(node, "team", {"ops": [{"remove": {"tabId": "a"}}]}, key="open-ab", token=token)
        assert status == 422, body
        assert version(node, token) == (2, ["a", "b"])
        status, _, body = post(node, "team", {"ops": [{"remove": {"tabId": "a"}}]}, key="close-a", token=token)
        assert status == 200 and body["results"] == [{"version": "3", "op": {"remove": {"tabId": "a"}}}], body
    finally:
        node.stop()


def test_a_bad_op_gets_its_error_in_place_and_the_others_apply(node):
    token = mint(node.secret, "script")
    body = {"ops": [{"add": {"tab": {"id": "a", "title": "A"}}}, {"remove": {"tabId": "nope"}}, {"add": {"tab": {"id": "c"}}}]}
    status, _, answer = post(node, "team", body, key="mixed", token=token)
    assert status == 200, answer
    results = answer["results"]
    assert results[0]["version"] == "1" and results[2]["version"] == "2", results
    assert results[1]["error"]["code"] == "TAB_GONE", results
    status, _, again = post(node, "team", body, key="mixed", token=token)
    assert again == answer


def test_access_and_bad_requests_are_refused_whole(node):
    editor = mint(node.secret, "script")
    viewer = mint(node.secret, "watcher", role="viewer")
    status, _, body = post(node, "team", TWO, token=viewer)
    assert status == 403 and body["error"]["code"] == "NOT_PERMITTED", body
    status, _, body = post(node, "team", TWO)
    assert status == 401, body
    status, _, body = post(node, "team", TWO, key=None, token=editor)
    assert status == 400 and "Idempotency-Key" in body["error"]["message"], body
    status, _, body = post(node, "team", TWO, key="x" * 65, token=editor)
    assert status == 400, body
    status, _, body = post(node, "team", None, token=editor, raw="not json")
    assert status == 400, body
    status, _, body = post(node, "team", None, token=editor, raw=json.dumps({"ops": [{"add": {"tab": {"id": "x" * 10}}}]}) + " " * (2 << 20))
    assert status == 413, body
    assert version(node, editor) == (0, []), "nothing refused whole was applied"


def test_a_write_over_the_rate_is_429_with_retry_after_and_a_repeat_is_not_charged(tmp_path):
    """HTTP writes are charged per (workspace, sub) at --max-ops-per-second, the per-session rate
    (docs/design.md, "HTTP writes"). At 1 op/s a write of 30 ops goes (the bucket was full) and
    leaves 29 s of debt: the next new write is 429 with a Retry-After of about 30 s; a repeat of the
    answered write is answered (not charged: charged, it would be refused, and the debt would
    double); another workspace and another sub have buckets of their own."""
    node = Node(tmp_path, "--max-ops-per-second", "1")
    try:
        alice, bob = mint(node.secret, "alice"), mint(node.secret, "bob")
        thirty = {"ops": [{"add": {"tab": {"id": f"t{i}", "title": f"T{i}"}}} for i in range(30)]}
        status, _, first = post(node, "team", thirty, key="thirty", token=alice)
        assert status == 200 and len(first["results"]) == 30, first
        one = {"ops": [{"add": {"tab": {"id": "x", "title": "X"}}}]}
        status, headers, body = post(node, "team", one, key="one", token=alice)
        assert status == 429 and body["error"]["code"] == "RATE_LIMITED", body
        assert "--max-ops-per-second" in body["error"]["message"], body
        assert 20 <= int(headers["Retry-After"]) <= 30, headers
        status, _, again = post(node, "team", thirty, key="thirty", token=alice)
        assert status == 200 and again == first, again
        status, headers, body = post(node, "team", one, key="one", token=alice)
        assert status == 429 and 20 <= int(headers["Retry-After"]) <= 30, (headers, body)
        assert version(node, alice) == (30, [f"t{i}" for i in range(30)]), "a refused write applies nothing"
        assert post(node, "elsewhere", one, key="one", token=alice)[0] == 200
        assert post(node, "team", one, key="bobs", token=bob)[0] == 200
    finally:
        node.stop()


def test_a_subs_quota_counts_its_writes_on_every_workspace(tmp_path):
    """--max-ops-per-second-per-sub charges a sub's HTTP writes as its sessions' ops: alice's 30 ops
    on one workspace leave her nothing on another; bob's quota is his own."""
    node = Node(tmp_path, "--max-ops-per-second-per-sub", "1")
    try:
        alice, bob = mint(node.secret, "alice"), mint(node.secret, "bob")
        thirty = {"ops": [{"add": {"tab": {"id": f"t{i}", "title": f"T{i}"}}} for i in range(30)]}
        assert post(node, "team", thirty, key="thirty", token=alice)[0] == 200
        one = {"ops": [{"add": {"tab": {"id": "x", "title": "X"}}}]}
        status, headers, body = post(node, "elsewhere", one, key="one", token=alice)
        assert status == 429 and "--max-ops-per-second-per-sub" in body["error"]["message"], body
        assert 20 <= int(headers["Retry-After"]) <= 30, headers
        assert post(node, "elsewhere", one, key="one", token=bob)[0] == 200
    finally:
        node.stop()


def test_past_the_logs_retention_a_key_still_applies_nothing_and_its_answer_is_gone(tmp_path):
    """How long a key lasts (docs/design.md, "HTTP writes"): its answer as long as the log holds its
    ops (--log-retention), its effect for ever. With a log of 5 ops, a write's op trimmed by 10
    later ones is answered ANSWER_GONE in its place, applies nothing, and the key with another body
    is still 422; also after a restart."""
    node = Node(tmp_path, "--log-retention", "5")
    try:
        token = mint(node.secret, "script")
        first = {"ops": [{"add": {"tab": {"id": "a", "title": "A"}}}]}
        status, _, answer = post(node, "team", first, key="early", token=token)
        assert status == 200 and answer["results"][0]["version"] == "1", answer
        for i in range(10):
            assert post(node, "team", {"ops": [{"add": {"tab": {"id": f"t{i}"}}}]}, key=f"later-{i}", token=token)[0] == 200
    finally:
        node.stop()
    node = Node(tmp_path, "--log-retention", "5")
    try:
        token = mint(node.secret, "script")
        status, _, again = post(node, "team", first, key="early", token=token)
        assert status == 200 and again["results"][0]["error"]["code"] == "ANSWER_GONE", again
        assert version(node, token)[0] == 11, "the repeat applied nothing"
        status, _, body = post(node, "team", {"ops": [{"remove": {"tabId": "a"}}]}, key="early", token=token)
        assert status == 422, body
        assert version(node, token)[0] == 11
    finally:
        node.stop()


# The Done-when nodes take --max-ops-per-second 1000 (as scripts/lib.py's servers do): one script
# writing as fast as it can goes past the default 100 ops/s of one workspace and sub, and is then
# refused 429 (tested above); the Done-when is about keys, not rates.
RATE = ("--max-ops-per-second", "1000")


def test_a_thousand_writes_each_sent_three_times_with_the_first_answer_dropped_apply_once(tmp_path):
    """SQLite, one node."""
    node = Node(tmp_path, *RATE)
    try:
        token = mint(node.secret, "script")
        thousand_writes(node.http, token, ["team"])
        assert version(node, token)[0] == 1000
    finally:
        node.stop()


@pytest.fixture
def postgres_url():
    """A new empty database: in the cluster scripts/test started (TABSYNC_TEST_POSTGRES_URL), else in
    one of scripts/postgres's own, removed after."""
    url = os.environ.get("TABSYNC_TEST_POSTGRES_URL")
    own = None
    if not url:
        own = tempfile.mkdtemp(prefix="tabsync-httpw-pg-")
        os.chmod(own, 0o755)
        out = subprocess.run([str(ROOT / "scripts" / "postgres"), "start", own + "/pg"], check=True,
                             capture_output=True, text=True, timeout=120).stdout
        url = next(l.split("=", 1)[1] for l in out.splitlines() if "TABSYNC_TEST_POSTGRES_URL=" in l)
    name = "httpw_" + secrets.token_hex(4)
    subprocess.run(["psql", "-q", url, "-c", f"CREATE DATABASE {name}"], check=True, capture_output=True, timeout=60)
    yield url.rsplit("/", 1)[0] + "/" + name
    subprocess.run(["psql", "-q", url, "-c", f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"], capture_output=True, timeout=60)
    if own:
        subprocess.run([str(ROOT / "scripts" / "postgres"), "destroy", own + "/pg"], capture_output=True, timeout=60)


def test_a_thousand_writes_apply_once_on_postgresql(tmp_path, postgres_url):
    """PostgreSQL, one node: the same, the dedup rows in the database."""
    node = Node(tmp_path, "--store", postgres_url, *RATE)
    try:
        token = mint(node.secret, "script")
        thousand_writes(node.http, token, ["team"])
        assert version(node, token)[0] == 1000
    finally:
        node.stop()


def test_a_thousand_writes_apply_once_on_three_nodes_through_haproxy(cluster):  # noqa: F811
    """Three nodes on PostgreSQL: writes for eight workspaces through HAProxy, which sends each to
    its workspace's home node; the proxy dropping answers stands before HAProxy. Exactly 1,000 ops
    in all, and more than one node applied some (the workspaces have several homes)."""
    token = mint(cluster["secret"], "script")
    proxy = cluster["proxy"].replace("ws://", "http://")
    workspaces = [f"hw-{i}" for i in range(8)]
    before = [applied_on(node) for node in cluster["http"]]
    versions = thousand_writes(proxy, token, workspaces)
    assert sum(versions.values()) == 1000, versions
    for workspace, expected in versions.items():
        request = urllib.request.Request(f"{proxy}/v1/workspaces/{workspace}", headers={"Authorization": f"Bearer {token}"})
        with urllib.request.urlopen(request, timeout=30) as r:
            assert int(json.loads(r.read())["version"]) == expected, workspace
    applied = [applied_on(node) - b for node, b in zip(cluster["http"], before)]
    assert sum(applied) == 1000, ("ops applied per node", applied)
    assert sum(1 for n in applied if n) > 1, ("every write went to one node", applied)


def applied_on(base):
    """A node's tabsync_ops_applied_total (ops its sequencer applied and stored)."""
    with urllib.request.urlopen(base + "/metrics", timeout=30) as r:
        for line in r.read().decode().splitlines():
            if line.startswith("tabsync_ops_applied_total"):
                return int(float(line.split()[-1]))
    return 0
