"""HTTP writes as a stranger sends them (docs/design.md, "HTTP writes"): `POST
/v1/workspaces/{id}/ops` over Python's http.client with an `Idempotency-Key` and a PyJWT token. The
ops are applied in order and answered with their versions; the same key and body again is answered
the same and applies nothing, also after a restart of the server; another body under a used key is
422; a viewer is 403; a missing or bad key is 400; a bad op gets its own error in the results."""
import http.client
import json

from test_admin import Node, mint

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


def test_a_thousand_writes_each_sent_three_times_with_the_first_answer_dropped_apply_once(node):
    """Issue 42's Done-when on one SQLite node: the first send's answer is never read (the client
    hangs up, as when a proxy drops it), the two retries are answered identically, and exactly
    1,000 ops are applied."""
    token = mint(node.secret, "script")
    port = int(node.http.rsplit(":", 1)[1])
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {token}"}
    for i in range(1000):
        # Add, then remove, so the workspace stays under its tab limit (500).
        op = {"add": {"tab": {"id": f"t{i}", "title": f"T{i}"}}} if i % 2 == 0 else {"remove": {"tabId": f"t{i - 1}"}}
        body = json.dumps({"ops": [op]})
        dropped = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        dropped.request("POST", "/v1/workspaces/team/ops", body=body, headers={**headers, "Idempotency-Key": f"w-{i}"})
        dropped.close()  # the answer is lost
        answers = [post(node, "team", None, key=f"w-{i}", token=token, raw=body) for _ in range(2)]
        assert answers[0][0] == 200 and answers[0][2] == answers[1][2], answers
        assert "version" in answers[0][2]["results"][0], answers
    assert version(node, token)[0] == 1000
