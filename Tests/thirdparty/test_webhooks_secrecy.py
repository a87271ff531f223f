"""A webhook's secret is never in a log or /metrics (docs/security.md, "Webhooks"), nor is a password a
URL tried to carry: a real tabsync-server at `--log-level debug` registers hooks (over the admin API
and through `tabsync-server admin webhooks add`, the secret from the environment), delivers to a
receiver that fails its first requests, fails against an unverified HTTPS receiver and a closed port,
refuses a URL with `user:password@`, and then its whole log, /metrics and the admin list are searched
for every secret (as given, its base64, its key bytes in hex) and for the URL's credentials.
"""
import asyncio
import base64
import json
import os
import socket
import ssl
import subprocess

from test_admin import SERVER, Node, call
from test_webhooks_delivery import Receiver, register, wait_for, write
from test_webhooks_tls import make_pki


def forms(secret):
    """Every form a secret could leak in: as given, the base64 after whsec_, the key's bytes in hex."""
    encoded = secret.removeprefix("whsec_")
    key = base64.b64decode(encoded)
    return [secret, encoded, key.hex(), key.hex().upper()]


def closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_no_secret_and_no_url_password_in_the_debug_log_metrics_or_answers(tmp_path):
    pki = make_pki(tmp_path / "pki")
    unverified = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    unverified.load_cert_chain(pki / "right.pem", pki / "right.key")
    receiver, untrusted = Receiver(fail=3), Receiver(tls=unverified)
    node = Node(tmp_path, "--webhook-allow-private", "--log-level", "debug")
    try:
        secrets = [register(node, receiver.url, "ok-*"), register(node, untrusted.url, "tls-*"),
                   register(node, f"http://127.0.0.1:{closed_port()}/hook", "gone-*")]
        made = subprocess.run(
            [SERVER, "admin", "webhooks", "add", "--url", receiver.url, "--workspaces", "cli-*"],
            env=dict(os.environ, TABSYNC_ADMIN_TOKEN=node.admin, TABSYNC_ADMIN_URL=node.http),
            capture_output=True, text=True, timeout=30)
        assert made.returncode == 0, made.stderr
        secrets.append(made.stdout.split("secret (shown once, keep it for the receiver): ")[1].split()[0])
        password = "pw-" + base64.b32encode(os.urandom(10)).decode()
        status, text = call(node.http, "POST", "/v1/admin/webhooks", node.admin, {
            "url": f"http://alice:{password}@127.0.0.1:{closed_port()}/hook", "workspaces": "*", "secret": secrets[0]})
        assert status == 400 and "user name or password" in text, (status, text)

        for workspace in ("ok-a", "tls-a", "gone-a", "cli-a"):
            asyncio.run(write(node, workspace, 3, "c-" + workspace))
        wanted = {f"{w}:{v}" for w in ("ok-a", "cli-a") for v in (1, 2, 3)}
        wait_for(lambda: wanted <= {i for i, _, _ in receiver.taken()}, "every version after three failures")

        def failing():
            status, text = call(node.http, "GET", "/v1/admin/webhooks", node.admin)
            assert status == 200, text
            return text if sum("failing" in h for h in json.loads(text)["webhooks"]) == 2 else None
        listed = wait_for(failing, "the unverified and the closed receiver failing")
        status, metrics = call(node.http, "GET", "/metrics")
        assert status == 200
        assert 'tabsync_webhook_deliveries_total{result="failed"}' in metrics
    finally:
        node.stop()
        receiver.close()
        untrusted.close()

    log = (tmp_path / "server.log").read_text()
    assert "webhook delivery failed" in log and "SSL certificate problem" in log and "Couldn't connect" in log
    assert receiver.requests and sum(failed for _, _, failed in receiver.requests) == 3
    for where, text in [("the log", log), ("/metrics", metrics), ("the admin list", listed)]:
        for secret in secrets:
            for form in forms(secret):
                assert form not in text, f"a secret in {where}"
        assert password not in text and "alice:" not in text, f"the URL's password in {where}"
