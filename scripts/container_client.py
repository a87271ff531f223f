"""The WebSocket side of scripts/test-containers: the Python client package (clients/python, the
JSON subprotocol) against the containers, through the ports docker-compose.yml publishes. Each
command prints one JSON line and exits 0 when its check held, 1 with the reason on stderr when not.
Every wait has a deadline.

  refused URL WORKSPACE             no token: Error UNAUTHORIZED, then close 4401
  write URL WORKSPACE TOKEN N       Welcome, N tabs added, each answered Applied; prints the versions
  read URL WORKSPACE TOKEN          Welcome; prints its snapshot (version, tab ids)
  placement URL TOKEN K WS...       K sessions of each workspace at once, on /v1/workspaces/{id}/ws:
                                    each sees all K in presence (presence is per node: they share one)
"""
import asyncio
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "clients", "python"))
from tabsync_client import Ended, Refused, Session  # noqa: E402

TIMEOUT = 10


class Failed(Exception):
    pass


def path_url(base, workspace):
    return f"{base.rstrip('/')}/v1/workspaces/{workspace}/ws"


def session(base, workspace, client_id, token=None, on_event=None):
    return Session(path_url(base, workspace), workspace, client_id=client_id, token=token, on_event=on_event,
                   open_timeout=TIMEOUT)


async def refused(base, workspace):
    errors = []
    s = session(base, workspace, "ctest-anonymous",
                on_event=lambda kind, **f: errors.append(f.get("code")) if kind == "error" else None)
    try:
        await s.start(timeout=TIMEOUT)
        raise Failed("welcomed without a token")
    except Ended as ended:
        code = ended.code
    finally:
        await s.close()
    if errors[:1] != ["UNAUTHORIZED"]:
        raise Failed(f"expected Error UNAUTHORIZED first, got {errors}")
    if code != 4401:
        raise Failed(f"expected close 4401, got {code}")
    return {"error": errors[0], "close": code}


async def write(base, workspace, token, count):
    s = await session(base, workspace, f"ctest-writer-{time.monotonic_ns()}", token).start(timeout=TIMEOUT)
    try:
        before = s.state.version
        stamp = time.monotonic_ns()
        answers = [s.submit({"add": {"tab": {"id": f"t{stamp}-{seq}", "title": f"Tab {seq}",
                                             "url": f"https://example.invalid/{seq}"}}})
                   for seq in range(1, count + 1)]
        try:
            applied = await asyncio.wait_for(asyncio.gather(*answers), TIMEOUT)
        except Refused as refusal:
            raise Failed(f"op rejected: {refusal}") from None
        except asyncio.TimeoutError:
            raise Failed(f"not every add answered Applied within {TIMEOUT} s") from None
        return {"before": before, "version": max(int(a["version"]) for a in applied), "added": count}
    finally:
        await s.close()


async def read(base, workspace, token):
    s = await session(base, workspace, f"ctest-reader-{time.monotonic_ns()}", token).start(timeout=TIMEOUT)
    try:
        return {"version": s.state.version, "tabs": [t["id"] for t in s.state.tabs()]}
    finally:
        await s.close()


async def placement(base, token, k, workspaces):
    """K sessions of each workspace; waits until each sees the K client ids of its workspace in its
    presence list. A session of another node would never appear in it."""
    sessions = []
    try:
        for workspace in workspaces:
            for i in range(k):
                sessions.append((workspace, await session(base, workspace, f"ctest-{workspace}-{i}", token)
                                 .start(timeout=TIMEOUT)))

        async def sees_all(workspace, s):
            want = {f"ctest-{workspace}-{i}" for i in range(k)}
            seen = lambda: {p.get("clientId") for p in s.peers.values()}  # noqa: E731
            try:
                await s.wait_until(lambda _: seen() == want or not seen() <= want, TIMEOUT)
            except asyncio.TimeoutError:
                raise Failed(f"{s.client_id} sees {sorted(seen())} in presence, not {sorted(want)}: "
                             f"the sessions of {workspace} are on more than one node") from None
            if not seen() <= want:
                raise Failed(f"{s.client_id} sees strangers in presence: {sorted(seen() - want)}")

        await asyncio.gather(*(sees_all(*s) for s in sessions))
    finally:
        await asyncio.gather(*(s.close() for _, s in sessions), return_exceptions=True)
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
    except (Failed, OSError, asyncio.TimeoutError, Ended) as error:
        print(f"{command}: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
