"""Access tokens made and checked by third-party code: PyJWT mints, Python `websockets` connects.

Runs the real `tabsync-server` (debug build; TABSYNC_SERVER_BIN overrides) with an HS256 secret
file and an Ed25519 public key, then checks that standard tokens get in with their role, that bad
ones are refused UNAUTHORIZED / 4401, that `tabsync-server token` makes a standard JWT, and that
no token reaches the server's log.
"""
import asyncio
import json
import os
import pathlib
import secrets
import subprocess
import time
import urllib.error
import urllib.request

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

ROOT = pathlib.Path(__file__).resolve().parents[2]
BINARY = os.environ.get("TABSYNC_SERVER_BIN", str(ROOT / ".build" / "debug" / "tabsync-server"))
TOKENS = []  # every token used, for the log check at the end


class Server:
    def __init__(self, tmp):
        self.secret = secrets.token_hex(32)  # 64 bytes of text
        self.secret_file = tmp / "team.key"
        self.secret_file.write_text(self.secret + "\n")
        self.ed_private = Ed25519PrivateKey.generate()
        pem = self.ed_private.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        self.pem_file = tmp / "ops.pem"
        self.pem_file.write_bytes(pem)
        self.es_private = ec.generate_private_key(ec.SECP256R1())
        self.es_file = tmp / "es.pem"
        self.es_file.write_bytes(self.es_private.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
        self.log_file = tmp / "server.log"
        self.log = open(self.log_file, "wb")
        self.process = subprocess.Popen(
            [BINARY, "--port", "0", "--memory", "--log-level", "debug",
             "--auth-key-file", str(self.secret_file), "--auth-key-file", str(self.pem_file),
             "--auth-key-file", str(self.es_file)],
            stdout=subprocess.PIPE, stderr=self.log)
        line = self.process.stdout.readline().decode()
        assert line.startswith("listening on ws://"), line
        self.port = int(line.strip().rsplit(":", 1)[1])
        self.url = f"ws://127.0.0.1:{self.port}/"

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)
        self.log.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = Server(tmp_path_factory.mktemp("auth"))
    yield s
    s.stop()


def hs256(server, ws="team", role="editor", sub="py", exp_in=600, kid=None, **extra):
    claims = {"sub": sub, "ws": ws, "role": role, "exp": int(time.time()) + exp_in, **extra}
    headers = {"kid": kid} if kid else None
    token = jwt.encode(claims, server.secret.encode(), algorithm="HS256", headers=headers)
    TOKENS.append(token)
    return token


async def session(server, workspace, token, messages=()):
    """Says Hello, sends `messages`, returns (every message received until quiet or closed, close code)."""
    received, code = [], None
    async with connect(server.url, subprotocols=["tabsync.v1.json"]) as ws:
        await ws.send(json.dumps({"hello": {"workspace": workspace, "clientId": "py1", "clientName": "chosen", "token": token}}))
        try:
            first = json.loads(await asyncio.wait_for(ws.recv(), 5))
            received.append(first)
            if "welcome" in first:
                for m in messages:
                    await ws.send(json.dumps(m))
            while True:
                received.append(json.loads(await asyncio.wait_for(ws.recv(), 1)))
        except ConnectionClosed as closed:
            code = closed.rcvd.code if closed.rcvd else None
        except asyncio.TimeoutError:
            pass
    return received, code


def run(coro):
    return asyncio.run(coro)


def test_a_pyjwt_hs256_token_without_kid_gets_in_and_edits(server):
    add = {"submit": {"seq": "1", "op": {"add": {"tab": {"id": "t1", "title": "Docs"}, "activate": True}}}}
    received, code = run(session(server, "team", hs256(server, sub="carol"), [add]))
    assert code is None
    assert "welcome" in received[0]
    assert any("applied" in m for m in received)
    names = [p["name"] for m in received if "presence" in m for p in m["presence"].get("peers", [])]
    assert names and set(names) == {"carol"}  # the token's sub, not the chosen name


def test_a_pyjwt_token_naming_its_kid_gets_in(server):
    received, code = run(session(server, "team", hs256(server, kid="team", role="viewer")))
    assert "welcome" in received[0] and code is None


def test_a_pyjwt_eddsa_token_for_a_glob_gets_in_as_a_viewer(server):
    token = jwt.encode({"sub": "ops", "ws": "te*", "role": "viewer", "exp": int(time.time()) + 600},
                       server.ed_private, algorithm="EdDSA", headers={"kid": "ops"})
    TOKENS.append(token)
    submit = {"submit": {"seq": "1", "op": {"remove": {"tabId": "t1"}}}}
    received, code = run(session(server, "team", token, [submit]))
    assert "welcome" in received[0]
    rejected = [m["rejected"] for m in received if "rejected" in m]
    assert rejected and rejected[0]["code"] == "NOT_PERMITTED"


def test_a_pyjwt_es256_token_gets_in_and_a_token_naming_the_wrong_key_does_not(server):
    claims = {"sub": "es", "ws": "team", "role": "admin", "exp": int(time.time()) + 600}
    token = jwt.encode(claims, server.es_private, algorithm="ES256", headers={"kid": "es"})
    forged = jwt.encode(claims, server.es_private, algorithm="ES256", headers={"kid": "ops"})
    TOKENS.extend([token, forged])
    received, code = run(session(server, "team", token))
    assert "welcome" in received[0] and code is None
    received, code = run(session(server, "team", forged))
    assert code == 4401 and list(received[0]) == ["error"]


@pytest.mark.parametrize("kind", ["expired", "not_yet_valid", "wrong_secret", "alg_none", "wrong_workspace", "no_exp"])
def test_a_bad_token_is_refused_unauthorized_4401(server, kind):
    now = int(time.time())
    base = {"sub": "py", "ws": "team", "role": "admin", "exp": now + 600}
    if kind == "expired":
        token = jwt.encode({**base, "exp": now - 10}, server.secret.encode(), algorithm="HS256")
    elif kind == "not_yet_valid":
        token = jwt.encode({**base, "nbf": now + 600}, server.secret.encode(), algorithm="HS256")
    elif kind == "wrong_secret":
        token = jwt.encode(base, b"x" * 64, algorithm="HS256")
    elif kind == "alg_none":
        token = jwt.encode(base, None, algorithm="none")
    elif kind == "wrong_workspace":
        token = jwt.encode({**base, "ws": "other"}, server.secret.encode(), algorithm="HS256")
    else:
        token = jwt.encode({k: v for k, v in base.items() if k != "exp"}, server.secret.encode(), algorithm="HS256")
    TOKENS.append(token)
    received, code = run(session(server, "team", token))
    assert code == 4401
    assert [list(m) for m in received] == [["error"]]  # nothing of the workspace before the refusal
    assert received[0]["error"]["code"] == "UNAUTHORIZED"


def get(server, path, token=None):
    request = urllib.request.Request(f"http://127.0.0.1:{server.port}{path}")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


def test_http_reads_need_a_bearer_token_for_that_workspace(server):
    assert get(server, "/v1/workspaces/team", hs256(server, role="viewer")) == 200
    assert get(server, "/v1/workspaces/team") == 401
    assert get(server, "/v1/workspaces/team", hs256(server, ws="other")) == 401
    assert get(server, "/healthz") == 200
    assert get(server, "/metrics") == 200


def test_the_operator_token_command_makes_a_standard_jwt(server):
    out = subprocess.run(
        [BINARY, "token", "--auth-key-file", str(server.secret_file), "--workspace", "team-*",
         "--role", "editor", "--ttl", "1h", "--sub", "dana"],
        check=True, capture_output=True, text=True).stdout.strip()
    TOKENS.append(out)
    assert jwt.get_unverified_header(out)["kid"] == "team"
    claims = jwt.decode(out, server.secret.encode(), algorithms=["HS256"])
    assert (claims["sub"], claims["ws"], claims["role"]) == ("dana", "team-*", "editor")
    assert 3500 <= claims["exp"] - time.time() <= 3600
    # A token id to revoke it by (128 random bits, base64url) and when it was issued.
    assert len(claims["jti"]) == 22 and set(claims["jti"]) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    assert abs(claims["iat"] - time.time()) <= 5 and claims["exp"] - claims["iat"] == 3600
    received, code = run(session(server, "team-x", out))
    assert "welcome" in received[0] and code is None
    again = subprocess.run(
        [BINARY, "token", "--auth-key-file", str(server.secret_file), "--workspace", "team-*",
         "--role", "editor", "--sub", "dana"], check=True, capture_output=True, text=True).stdout.strip()
    named = subprocess.run(
        [BINARY, "token", "--auth-key-file", str(server.secret_file), "--workspace", "team-*",
         "--role", "editor", "--sub", "dana", "--jti", "laptop-2026"], check=True, capture_output=True, text=True).stdout.strip()
    TOKENS.extend([again, named])
    assert jwt.decode(again, server.secret.encode(), algorithms=["HS256"])["jti"] != claims["jti"]
    assert jwt.decode(named, server.secret.encode(), algorithms=["HS256"])["jti"] == "laptop-2026"
    refused = subprocess.run(
        [BINARY, "token", "--auth-key-file", str(server.secret_file), "--workspace", "team-*",
         "--role", "editor", "--sub", "dana", "--jti", "x" * 129], capture_output=True, text=True)
    assert refused.returncode == 2 and "--jti" in refused.stderr


def test_a_pyjwt_token_with_jti_and_iat_gets_in_and_a_bad_jti_is_refused(server):
    now = int(time.time())
    good = jwt.encode({"sub": "erin", "ws": "team", "role": "viewer", "exp": now + 600, "iat": now, "jti": "t-1"},
                      server.secret, algorithm="HS256")
    bad = jwt.encode({"sub": "erin", "ws": "team", "role": "viewer", "exp": now + 600, "jti": "a\u0001b"},
                     server.secret, algorithm="HS256")
    TOKENS.extend([good, bad])
    received, code = run(session(server, "team", good))
    assert "welcome" in received[0] and code is None
    received, code = run(session(server, "team", bad))
    assert code == 4401
    assert "jti" in received[0]["error"]["message"]


def test_the_tabsync_tool_sends_its_token(server, tmp_path):
    tool = str(pathlib.Path(BINARY).with_name("tabsync"))
    env = {**os.environ, "TABSYNC_SERVER": f"ws://127.0.0.1:{server.port}", "XDG_CONFIG_HOME": str(tmp_path)}
    env.pop("TABSYNC_TOKEN", None)
    env.pop("TABSYNC_TOKEN_FILE", None)
    ls = [tool, "ls", "--workspace", "team", "--json"]
    refused = subprocess.run(ls, env=env, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 3 and "UNAUTHORIZED" in refused.stderr
    by_env = subprocess.run(ls, env={**env, "TABSYNC_TOKEN": hs256(server, role="viewer")},
                            capture_output=True, text=True, timeout=60)
    assert by_env.returncode == 0, by_env.stderr
    assert json.loads(by_env.stdout)["workspace"] == "team"
    token_file = tmp_path / "token"
    token_file.write_text(hs256(server, role="viewer") + "\n")
    by_file = subprocess.run(ls + ["--token-file", str(token_file)], env=env, capture_output=True, text=True, timeout=60)
    assert by_file.returncode == 0, by_file.stderr


def test_zz_no_token_or_secret_reaches_the_log(server):
    server.stop()
    log = server.log_file.read_text(errors="replace")
    assert "session unauthorized" in log and "session authenticated" in log
    assert server.secret not in log
    for token in TOKENS:
        for part in token.split("."):
            if len(part) > 8:
                assert part not in log, "a token part is in the server log"
