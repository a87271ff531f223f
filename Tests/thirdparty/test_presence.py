"""Presence deltas as a third-party client sees them, written from proto/README.md#presence:
Python `websockets` on the JSON subprotocol against the real `tabsync-server` (debug build;
TABSYNC_SERVER_BIN overrides), run with `--max-presence-peers 2`.

A client that sets `presenceDeltas` keeps a view from its one full list and the deltas after it;
a client that does not keeps getting whole lists. Both views must end equal to the sessions
connected: named ones by session id with their focus, the rest counted in `othersCount`.
"""
import asyncio
import json
import os
import pathlib
import subprocess

import pytest
from websockets.asyncio.client import connect

ROOT = pathlib.Path(__file__).resolve().parents[2]
BINARY = os.environ.get("TABSYNC_SERVER_BIN", str(ROOT / ".build" / "debug" / "tabsync-server"))


@pytest.fixture(scope="module")
def url():
    process = subprocess.Popen([BINARY, "--port", "0", "--memory", "--log-level", "error",
                                "--max-presence-peers", "2"], stdout=subprocess.PIPE)
    line = process.stdout.readline().decode()
    assert line.startswith("listening on ws://"), line
    yield f"ws://127.0.0.1:{int(line.strip().rsplit(':', 1)[1])}/"
    process.terminate()
    process.wait(timeout=10)


class Client:
    """One session and its peer view, applied as proto/README.md says."""

    def __init__(self, ws, session_id, deltas):
        self.ws, self.session_id, self.deltas = ws, session_id, deltas
        self.peers, self.others, self.lists, self.problems = {}, 0, 0, []

    @classmethod
    async def join(cls, url, client_id, deltas):
        ws = await connect(url, subprotocols=["tabsync.v1.json"]).__aenter__()
        hello = {"workspace": "py-presence", "clientId": client_id, "clientName": client_id}
        if deltas:
            hello["presenceDeltas"] = True
        await ws.send(json.dumps({"hello": hello}))
        welcome = json.loads(await ws.recv())["welcome"]
        return cls(ws, welcome["sessionId"], deltas)

    def apply(self, presence):
        if presence.get("delta"):
            if not self.deltas or self.lists == 0:
                self.problems.append(f"unexpected delta {presence}")
            for session_id in presence.get("left", []):
                if self.peers.pop(session_id, None) is None:
                    self.problems.append(f"left {session_id} not held")
            for peer in presence.get("peers", []):
                self.peers[peer["sessionId"]] = peer
        else:
            self.lists += 1
            if "left" in presence:
                self.problems.append("a full list with left")
            self.peers = {p["sessionId"]: p for p in presence.get("peers", [])}
        self.others = presence.get("othersCount", 0)

    async def read_until(self, condition, timeout=5.0):
        deadline = asyncio.get_running_loop().time() + timeout
        while not condition(self):
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                return False
            try:
                message = json.loads(await asyncio.wait_for(self.ws.recv(), left))
            except asyncio.TimeoutError:
                return condition(self)
            if "presence" in message:
                self.apply(message["presence"])
        return True


def test_deltas_and_whole_lists_describe_the_same_sessions(url):
    async def main():
        modern = await Client.join(url, "modern", deltas=True)
        legacy = await Client.join(url, "legacy", deltas=False)
        assert await modern.read_until(lambda c: len(c.peers) == 2)
        third = await Client.join(url, "third", deltas=True)
        fourth = await Client.join(url, "fourth", deltas=False)
        # Past the cap: two named (the first two to join), two counted.
        for client in (modern, legacy):
            assert await client.read_until(lambda c: c.others == 2)
            assert set(client.peers) == {modern.session_id, legacy.session_id}
        await legacy.ws.send(json.dumps({"focus": {"tabId": "t7"}}))
        for client in (modern, legacy):
            assert await client.read_until(
                lambda c: c.peers.get(legacy.session_id, {}).get("focusTabId") == "t7")
        # A named session leaves: the longest-waiting one (third) is named in its place.
        await legacy.ws.close()
        assert await modern.read_until(lambda c: c.others == 1 and third.session_id in c.peers)
        assert set(modern.peers) == {modern.session_id, third.session_id}
        assert await fourth.read_until(lambda c: c.others == 1 and third.session_id in c.peers)
        assert set(fourth.peers) == set(modern.peers)
        assert modern.lists == 1 and fourth.lists >= 2
        for client in (modern, third, fourth):
            assert not client.problems, client.problems
            await client.ws.close()

    asyncio.run(main())
