"""HTTPS webhook receivers are verified (docs/security.md, "Webhooks"): a real tabsync-server on SQLite
POSTs to a Python `ssl` receiver on 127.0.0.1 whose certificate a private CA made here with `openssl`
signed. No public CA signs it: every attempt fails before a request is sent, with the reason in the
admin list (`failing.lastError`, `admin webhooks ls`) and the log, and is retried as any failure;
restarted with `--webhook-ca-file` (the private CA) the same receiver gets every version, signatures
valid. A certificate the CA signed for another name is refused even with the CA. The receivers are on
127.0.0.1, so every server here but one runs with `--webhook-allow-private`; that one shows the
address check still applies to an https target, on the address `localhost` resolved to.
Waits are on conditions with deadlines, never sleeps.
"""
import asyncio
import json
import os
import ssl
import subprocess

import pytest

from test_admin import SERVER, Node, call
from test_webhooks_delivery import Receiver, register, verify, wait_for, write


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_pki(directory):
    """A private CA (ca.pem) and two server certificates it signs: `right` for 127.0.0.1 and localhost,
    `other` for other.example only. Returns the directory."""
    directory.mkdir()
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
            "-subj", "/CN=tabsync test private CA", "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=directory)
    for name, names in [("right", "IP:127.0.0.1,DNS:localhost"), ("other", "DNS:other.example")]:
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
                "-subj", f"/CN={names.split(',')[0].split(':')[1]}", cwd=directory)
        (directory / f"{name}.ext").write_text(
            f"subjectAltName={names}\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n")
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                "-out", f"{name}.pem", "-days", "2", "-extfile", f"{name}.ext", cwd=directory)
    return directory


@pytest.fixture
def pki(tmp_path):
    return make_pki(tmp_path / "pki")


def serving(pki, name):
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pki / f"{name}.pem", pki / f"{name}.key")
    return context


def hooks(node):
    status, text = call(node.http, "GET", "/v1/admin/webhooks", node.admin)
    assert status == 200, text
    return json.loads(text)["webhooks"]


def failing(node, attempts=1):
    """The one hook's `failing` object once it shows at least `attempts` failed attempts, else None."""
    pending = hooks(node)[0].get("failing")
    return pending if pending and pending["attempts"] >= attempts else None


def admin_ls(node):
    environment = dict(os.environ, TABSYNC_ADMIN_TOKEN=node.admin, TABSYNC_ADMIN_URL=node.http)
    listed = subprocess.run([SERVER, "admin", "webhooks", "ls"], env=environment, capture_output=True, text=True, timeout=30)
    assert listed.returncode == 0, listed.stderr
    return listed.stdout


def test_a_receiver_signed_by_a_private_ca_is_refused_then_gets_every_version_with_the_ca_file(tmp_path, pki):
    receiver = Receiver(tls=serving(pki, "right"))
    node = Node(tmp_path, "--webhook-allow-private")
    try:
        secret = register(node, receiver.url, "tls-*")
        asyncio.run(write(node, "tls-a", 3, "c1"))
        # Retried as any failure: a second attempt comes after the back-off.
        pending = wait_for(lambda: failing(node, attempts=2), "two failed attempts in the admin list")
        assert pending["workspace"] == "tls-a" and pending["workspaces"] == 1, pending
        assert "certificate" in pending["lastError"] and "(tls-a:1)" in pending["lastError"], pending
        assert pending["since"].endswith("Z") and pending["nextAttempt"].endswith("Z"), pending
        assert all(h["enabled"] for h in hooks(node))
        assert "SSL certificate problem" in admin_ls(node)
        log = (tmp_path / "server.log").read_text()
        assert "webhook delivery failed" in log and "SSL certificate problem" in log, log[-2000:]
        assert receiver.requests == []  # the request is never sent over an unverified connection
    finally:
        node.stop()

    node = Node(tmp_path, "--webhook-allow-private", "--webhook-ca-file", str(pki / "ca.pem"))
    try:
        asyncio.run(write(node, "tls-b", 2, "c2"))
        wanted = {"tls-a:1", "tls-a:2", "tls-a:3", "tls-b:1", "tls-b:2"}
        wait_for(lambda: wanted <= {i for i, _, _ in receiver.taken()}, "every version over verified HTTPS")
        for headers, body, _ in receiver.requests:
            assert verify(secret, headers, body), headers
        for workspace in ("tls-a", "tls-b"):
            versions = [int(i.split(":")[1]) for i, _, _ in receiver.taken() if i.startswith(workspace + ":")]
            assert versions == sorted(versions), versions
        wait_for(lambda: "failing" not in hooks(node)[0], "nothing failing once delivered")
        assert admin_ls(node).splitlines()[1].split()[-2:] == ["-", receiver.url]
    finally:
        node.stop()
        receiver.close()


def test_a_certificate_for_another_name_is_refused_even_with_the_ca(tmp_path, pki):
    receiver = Receiver(tls=serving(pki, "other"))
    node = Node(tmp_path, "--webhook-allow-private", "--webhook-ca-file", str(pki / "ca.pem"))
    try:
        register(node, receiver.url, "*")
        asyncio.run(write(node, "named", 1, "c1"))
        pending = wait_for(lambda: failing(node), "a failed attempt in the admin list")
        assert "127.0.0.1" in pending["lastError"] and "name" in pending["lastError"], pending
        assert "certificate problem" not in pending["lastError"], pending  # the chain is trusted; the name is not
        assert receiver.requests == []
    finally:
        node.stop()
        receiver.close()


def test_an_https_target_on_a_loopback_address_is_refused_without_the_flag(tmp_path, pki):
    receiver = Receiver(tls=serving(pki, "right"), host="localhost")
    node = Node(tmp_path, "--webhook-ca-file", str(pki / "ca.pem"))
    try:
        register(node, receiver.url, "*")
        asyncio.run(write(node, "private", 1, "c1"))
        pending = wait_for(lambda: failing(node), "a refused attempt in the admin list")
        assert pending["lastError"].startswith("refused: loopback"), pending
        assert receiver.requests == []
    finally:
        node.stop()
        receiver.close()


@pytest.mark.parametrize("content", [b"", b"not a certificate\n",
                                     b"-----BEGIN CERTIFICATE-----\nnot base64 !!\n-----END CERTIFICATE-----\n"])
def test_a_ca_file_without_a_certificate_stops_the_server_at_start_naming_the_file(tmp_path, content):
    bad = tmp_path / "bad.pem"
    bad.write_bytes(content)
    for path in (bad, tmp_path / "missing.pem"):
        started = subprocess.run([SERVER, "--port", "0", "--memory", "--webhook-ca-file", str(path)],
                                 capture_output=True, text=True, timeout=60)
        assert started.returncode == 1, (started.stdout, started.stderr)
        assert f"webhook CA file {path}" in started.stderr, started.stderr
        assert "listening" not in started.stdout
        if content:
            assert content.decode().strip().splitlines()[-1] not in started.stderr  # never the file's contents
