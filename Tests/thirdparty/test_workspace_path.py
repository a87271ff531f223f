"""The workspace in the connection's URL as a third-party client sees it, written from
docs/design.md ("The protocol in brief", "Close codes", "Bad input"): Python `websockets` on the
JSON subprotocol against the real `tabsync-server` (debug build; TABSYNC_SERVER_BIN overrides).

A session on `/v1/workspaces/{id}/ws` whose Hello names that workspace is welcomed and shares the
workspace with clients on `/`; a Hello naming another workspace gets `Error PROTOCOL_ERROR` and
close 4400; an invalid id in the path is refused at the handshake with 400 and a body saying why.
"""
import asyncio
import json
import os
import pathlib
import subprocess

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

ROOT = pathlib.Path(__file__).resolve().parents[2]
BINARY = os.environ.get("TABSYNC_SERVER_BIN", str(ROOT / ".build" / "debug" / "tabsync-server"))
SUBPROTOCOLS = ["tabsync.v1.json"]


@pytest.fixture(scope="module")
def base():
    process = subprocess.Popen([BINARY, "--port", "0", "--memory", "--log-level", "error"], stdout=subprocess.PIPE)
    line = process.stdout.readline().decode()
    assert line.startswith("listening on ws://"), line
    yield f"ws://127.0.0.1:{int(line.strip().rsplit(':', 1)[1])}"
    process.terminate()
    process.wait(timeout=10)


async def hello(ws, workspace, client_id):
    await ws.send(json.dumps({"hello": {"workspace": workspace, "clientId": client_id}}))
    return json.loads(await asyncio.wait_for(ws.recv(), 5))


def test_a_session_on_the_workspace_path_shares_the_workspace_with_the_root_path(base):
    async def run():
        async with connect(f"{base}/v1/workspaces/py-path/ws", subprotocols=SUBPROTOCOLS) as a, \
                connect(f"{base}/", subprotocols=SUBPROTOCOLS) as b:
            assert "welcome" in await hello(a, "py-path", "a")
            assert "welcome" in await hello(b, "py-path", "b")
            op = {"add": {"tab": {"id": "t1", "title": "Docs"}, "activate": True}}
            await a.send(json.dumps({"submit": {"seq": "1", "op": op}}))
            for ws in (a, b):
                while True:
                    message = json.loads(await asyncio.wait_for(ws.recv(), 5))
                    if "applied" in message:
                        assert message["applied"]["version"] == "1"
                        assert message["applied"]["clientId"] == "a"
                        break
    asyncio.run(run())


def test_a_hello_naming_another_workspace_is_closed_4400(base):
    async def run():
        async with connect(f"{base}/v1/workspaces/py-one/ws", subprotocols=SUBPROTOCOLS) as ws:
            answer = await hello(ws, "py-other", "c")
            assert answer["error"]["code"] == "PROTOCOL_ERROR"
            assert '"py-other"' in answer["error"]["message"] and '"py-one"' in answer["error"]["message"]
            with pytest.raises(ConnectionClosed) as closed:
                await asyncio.wait_for(ws.recv(), 5)
            assert closed.value.rcvd.code == 4400
            assert closed.value.rcvd.reason == "PROTOCOL_ERROR: Hello workspace differs from the URL path"
    asyncio.run(run())


@pytest.mark.parametrize("path,status", [
    ("/v1/workspaces/bad%20id/ws", 400),
    ("/v1/workspaces/colon:id/ws", 400),
    ("/v1/workspaces/" + "x" * 65 + "/ws", 400),
    ("/v1/workspaces/a/b/ws", 404),
    ("/elsewhere", 404),
])
def test_an_invalid_path_is_refused_at_the_handshake(base, path, status):
    async def run():
        with pytest.raises(InvalidStatus) as refused:
            async with connect(base + path, subprotocols=SUBPROTOCOLS, open_timeout=5):
                pass
        assert refused.value.response.status_code == status
        if status == 400:
            assert b"invalid workspace id in the path" in refused.value.response.body
    asyncio.run(run())
