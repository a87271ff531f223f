#!/usr/bin/env python3
"""The WebSocket side of scripts/test-containers: a third-party client (Python `websockets`, the JSON
subprotocol, docs/design.md "The protocol in brief") against the containers, through the ports
docker-compose.yml publishes. Each command prints one JSON line and exits 0 when its check held,
1 with the reason on stderr when not. Every wait has a deadline.

  refused URL WORKSPACE             no token: Error UNAUTHORIZED, then close 4401
  write URL WORKSPACE TOKEN N       Welcome, N tabs added, each answered Applied; prints the snapshot
  read URL WORKSPACE TOKEN          Welcome; prints its snapshot (version, tab ids)
  placement URL TOKEN K WS...       K sessions of each workspace at once, on /v1/workspaces/{id}/ws:
                                    each sees all K in presence (presence is per node: they share one)
"""
import asyncio
import json
import sys
import time

from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

SUBPROTOCOLS = ["tabsync.v1.json"]
TIMEOUT = 10


class Failed(Exception):
    pass


def path_url(base, workspace):
    return f"{base.rstrip('/')}/v1/workspaces/{workspace}/ws"


async def hello(ws, workspace, client_id, token=None):
    message = {"workspace": workspace, "clientId": client_id, "clientName": client_id}
    if token:
        message["token"] = token
    await ws.send(json.dumps({"hello": message}))
    return json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT))


def snapshot_of(welcome):
    snapshot = welcome.get("snapshot", {})
    return {"version": int(snapshot.get("version", "0")), "tabs": [t["id"] for t in snapshot.get("tabs", [])]}


async def refused(base, workspace):
    async with connect(path_url(base, workspace), subprotocols=SUBPROTOCOLS, open_timeout=TIMEOUT) as ws:
        first = await hello(ws, workspace, "ctest-anonymous")
        if list(first) != ["error"] or first["error"].get("code") != "UNAUTHORIZED":
            raise Failed(f"expected Error UNAUTHORIZED first, got {first}")
        try:
            extra = await asyncio.wait_for(ws.recv(), TIMEOUT)
            raise Failed(f"expected the close after the error, got {extra}")
        except ConnectionClosed as closed:
            code = closed.rcvd.code if closed.rcvd else None
        if code != 4401:
            raise Failed(f"expected close 4401, got {code}")
    return {"error": first["error"]["code"], "close": code}


async def write(base, workspace, token, count):
    async with connect(path_url(base, workspace), subprotocols=SUBPROTOCOLS, open_timeout=TIMEOUT) as ws:
        welcome = await hello(ws, workspace, f"ctest-writer-{time.monotonic_ns()}", token)
        if "welcome" not in welcome:
            raise Failed(f"expected Welcome, got {welcome}")
        before = snapshot_of(welcome["welcome"])
        stamp = time.monotonic_ns()
        pending = {}
        for seq in range(1, count + 1):
            tab = f"t{stamp}-{seq}"
            pending[str(seq)] = tab
            op = {"add": {"tab": {"id": tab, "title": f"Tab {seq}", "url": f"https://example.invalid/{seq}"}}}
            await ws.send(json.dumps({"submit": {"seq": str(seq), "op": op}}))
        version = before["version"]
        deadline = time.monotonic() + TIMEOUT
        while pending:
            left = deadline - time.monotonic()
            if left <= 0:
                raise Failed(f"no Applied for seqs {sorted(pending)} within {TIMEOUT} s")
            message = json.loads(await asyncio.wait_for(ws.recv(), left))
            if "rejected" in message:
                raise Failed(f"op rejected: {message}")
            if "applied" in message and message["applied"].get("seq") in pending:
                del pending[message["applied"]["seq"]]
                version = max(version, int(message["applied"]["version"]))
    return {"before": before["version"], "version": version, "added": count}


async def read(base, workspace, token):
    async with connect(path_url(base, workspace), subprotocols=SUBPROTOCOLS, open_timeout=TIMEOUT) as ws:
        welcome = await hello(ws, workspace, f"ctest-reader-{time.monotonic_ns()}", token)
        if "welcome" not in welcome:
            raise Failed(f"expected Welcome, got {welcome}")
        return snapshot_of(welcome["welcome"])


async def placement(base, token, k, workspaces):
    """K sessions of each workspace; waits until each sees the K client ids of its workspace in a
    presence list. A session of another node would never appear in it."""
    sessions = []
    try:
        for workspace in workspaces:
            for i in range(k):
                client_id = f"ctest-{workspace}-{i}"
                ws = await connect(path_url(base, workspace), subprotocols=SUBPROTOCOLS, open_timeout=TIMEOUT)
                sessions.append((workspace, client_id, ws))
                welcome = await hello(ws, workspace, client_id, token)
                if "welcome" not in welcome:
                    raise Failed(f"{client_id}: expected Welcome, got {welcome}")

        async def sees_all(workspace, client_id, ws):
            want = {f"ctest-{workspace}-{i}" for i in range(k)}
            seen = set()
            deadline = time.monotonic() + TIMEOUT
            while seen != want:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise Failed(f"{client_id} sees {sorted(seen)} in presence, not {sorted(want)}: "
                                 f"the sessions of {workspace} are on more than one node")
                message = json.loads(await asyncio.wait_for(ws.recv(), left))
                if "presence" in message and not message["presence"].get("delta"):
                    seen = {p.get("clientId") for p in message["presence"].get("peers", [])}
                    if not seen <= want:
                        raise Failed(f"{client_id} sees strangers in presence: {sorted(seen - want)}")

        await asyncio.gather(*(sees_all(*s) for s in sessions))
    finally:
        for _, _, ws in sessions:
            await ws.close()
    return {"workspaces": len(workspaces), "sessions": len(sessions)}


def main(argv):
    command, args = argv[1], argv[2:]
    try:
        if command == "refused":
            result = asyncio.run(refused(args[0], args[1]))
        elif command == "write":
            result = asyncio.run(write(args[0], args[1], args[2], int(args[3])))
        elif command == "read":
            result = asyncio.run(read(args[0], args[1], args[2]))
        elif command == "placement":
            result = asyncio.run(placement(args[0], args[1], int(args[2]), args[3:]))
        else:
            print(__doc__, file=sys.stderr)
            return 2
    except (Failed, OSError, asyncio.TimeoutError, ConnectionClosed) as error:
        print(f"{command}: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
