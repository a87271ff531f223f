"""Registering webhooks as an operator sees it (docs/design.md, "Webhooks"): the admin API over
`urllib` and `tabsync-server admin webhooks` against a real server on SQLite, tokens minted by
PyJWT. The secret goes in once and never comes back: not in an answer, the server's log or /metrics.
"""
import base64
import json
import os
import secrets
import subprocess
import urllib.request

import pytest

from test_admin import SERVER, Node, call, mint


def whsec():
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


@pytest.fixture
def node(tmp_path):
    n = Node(tmp_path)
    yield n
    n.stop()


def hook(url="https://hooks.example.com/tabsync", workspaces="team-*", secret=None):
    return {"url": url, "workspaces": workspaces, "secret": secret or whsec()}


def test_a_webhook_is_added_listed_and_removed_and_its_secret_never_shown(node, tmp_path):
    secret = whsec()
    status, text = call(node.http, "POST", "/v1/admin/webhooks", node.admin, hook(secret=secret))
    assert status == 201, text
    added = json.loads(text)
    assert added["id"].startswith("wh_") and len(added["id"]) == 35
    assert added["url"] == "https://hooks.example.com/tabsync" and added["workspaces"] == "team-*" and added["enabled"] is True
    assert "secret" not in added
    status, text = call(node.http, "POST", "/v1/admin/webhooks", node.admin, hook(url="http://10.0.0.7:8080/in", workspaces="*"))
    assert status == 201, text
    second = json.loads(text)["id"]

    status, text = call(node.http, "GET", "/v1/admin/webhooks", node.admin)
    assert status == 200
    assert [h["id"] for h in json.loads(text)["webhooks"]] == [added["id"], second]
    with urllib.request.urlopen(node.http + "/metrics", timeout=10) as r:
        metrics = r.read().decode()
    key = secret.removeprefix("whsec_")
    for where, body in [("list", text), ("metrics", metrics), ("log", (tmp_path / "server.log").read_text())]:
        assert secret not in body and key not in body and key[:16] not in body, where

    status, text = call(node.http, "DELETE", f"/v1/admin/webhooks/{added['id']}", node.admin)
    assert status == 200 and json.loads(text) == {"removed": added["id"]}
    status, text = call(node.http, "DELETE", f"/v1/admin/webhooks/{added['id']}", node.admin)
    assert status == 404, text
    status, text = call(node.http, "GET", "/v1/admin/webhooks", node.admin)
    assert [h["id"] for h in json.loads(text)["webhooks"]] == [second]


@pytest.mark.parametrize("body, says", [
    (hook(url="ftp://files.example.com/x"), "http or https"),
    (hook(url="https://user:pw@hooks.example.com/"), "user name or password"),
    (hook(url="https:///nohost"), "no host"),
    (hook(url="https://hooks.example.com/#frag"), "fragment"),
    (hook(url="https://hooks.example.com/a b"), "printable ASCII"),
    (hook(url="https://h.example.com/" + "a" * 2100), "2048 bytes"),
    (hook(workspaces="team/*"), "glob"),
    (hook(workspaces=""), "glob"),
    (hook(secret="not-a-secret"), "whsec_"),
    (hook(secret="whsec_" + base64.b64encode(b"short").decode()), "24 to 64"),
    (hook(secret="whsec_%%%%"), "whsec_"),
    ({"url": "https://hooks.example.com/", "workspaces": "*"}, "exactly"),
    ({**hook(), "extra": 1}, "exactly"),
])
def test_bad_registrations_get_400_saying_why_and_store_nothing(node, body, says):
    status, text = call(node.http, "POST", "/v1/admin/webhooks", node.admin, body)
    assert status == 400 and says in text, (status, text)
    if "secret" in body and len(body["secret"]) > 8:
        assert body["secret"] not in text
    status, text = call(node.http, "GET", "/v1/admin/webhooks", node.admin)
    assert json.loads(text)["webhooks"] == []


def test_only_an_admin_token_for_every_workspace_may_touch_webhooks(node):
    editor = mint(node.secret, "ed", role="editor")
    scoped = mint(node.secret, "ta", ws="team-*", role="admin")
    for method, path, body in [("GET", "/v1/admin/webhooks", None), ("POST", "/v1/admin/webhooks", hook()),
                               ("DELETE", "/v1/admin/webhooks/wh_" + "0" * 32, None)]:
        assert call(node.http, method, path, None, body)[0] == 401, (method, path)
        assert call(node.http, method, path, editor, body)[0] == 403, (method, path)
        status, text = call(node.http, method, path, scoped, body)
        assert status == 403 and 'ws: "*"' in text, (method, path, text)
    assert call(node.http, "DELETE", "/v1/admin/webhooks/not-an-id", node.admin)[0] == 400
    assert call(node.http, "PUT", "/v1/admin/webhooks", node.admin, hook())[0] == 405
    assert json.loads(call(node.http, "GET", "/v1/admin/webhooks", node.admin)[1])["webhooks"] == []


def test_webhooks_outlive_a_restart(tmp_path):
    first = Node(tmp_path)
    try:
        status, text = call(first.http, "POST", "/v1/admin/webhooks", first.admin, hook())
        assert status == 201, text
        added = json.loads(text)
    finally:
        first.stop()
    (tmp_path / "team.key").unlink()
    again = Node(tmp_path)  # a new key: mint with it
    try:
        status, text = call(again.http, "GET", "/v1/admin/webhooks", again.admin)
        assert status == 200 and json.loads(text)["webhooks"] == [added], text
    finally:
        again.stop()


def test_the_admin_command_adds_lists_and_removes_webhooks(node, tmp_path):
    def admin(*args):
        environment = {k: v for k, v in os.environ.items() if k != "TABSYNC_WEBHOOK_SECRET"}
        environment.update(TABSYNC_ADMIN_TOKEN=node.admin, TABSYNC_ADMIN_URL=node.http)
        return subprocess.run([SERVER, "admin", "webhooks", *args], env=environment, capture_output=True, text=True, timeout=30)

    made = admin("add", "--url", "https://hooks.example.com/a", "--workspaces", "team-*")
    assert made.returncode == 0, made.stderr
    shown = [line for line in made.stdout.splitlines() if "shown once" in line]
    assert len(shown) == 1
    secret = shown[0].rsplit(" ", 1)[1]
    assert secret.startswith("whsec_") and len(base64.b64decode(secret.removeprefix("whsec_"))) == 32

    secret_file = tmp_path / "hook.secret"
    given = whsec()
    secret_file.write_text(given + "\n")
    added = admin("add", "--url", "https://hooks.example.com/b", "--workspaces", "*", "--secret-file", str(secret_file), "--json")
    assert added.returncode == 0, added.stderr
    second = json.loads(added.stdout)["id"]
    assert given not in added.stdout

    listed = admin("ls")
    assert listed.returncode == 0
    rows = listed.stdout.splitlines()
    assert rows[0].split()[:3] == ["ID", "WORKSPACES", "ENABLED"] and len(rows) == 3
    assert rows[2].split()[:3] == [second, "*", "yes"] and rows[2].endswith("https://hooks.example.com/b")
    assert secret not in listed.stdout and given not in listed.stdout

    bad = admin("add", "--url", "gopher://x", "--workspaces", "*")
    assert bad.returncode == 3 and "http or https" in bad.stderr
    assert admin("rm", second).returncode == 0
    gone = admin("rm", second)
    assert gone.returncode == 3 and "no webhook" in gone.stderr
