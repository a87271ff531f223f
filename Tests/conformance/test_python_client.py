"""The conformance transcripts (Tests/conformance/README.md) replayed to the Python client package
(clients/python): the playback plays the server's frames over a real WebSocket, the client library
runs unmodified, and this runner takes the transcript's `do` steps and checks its `state` steps."""
import asyncio
import json
import pathlib
import sys

import pytest

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "clients" / "python"))
sys.path.insert(0, str(HERE))

from playback import Mismatch, Playback  # noqa: E402
from tabsync_client import Backoff, Http, KeyReused, Session  # noqa: E402

TRANSCRIPTS = sorted((HERE / "transcripts").glob("*.json"))
STATE_TIMEOUT = 20


def shown(session):
    """The confirmed state as the transcripts' `state` steps name it."""
    replica = session.state
    return {"version": replica.version, "epoch": replica.epoch, "tabs": [t["id"] for t in replica.tabs()],
            "active": replica.active, "pending": len(session.outbox)}


def differences(expected, actual):
    return {k: (v, actual[k]) for k, v in expected.items() if actual[k] != v}


async def write(http, workspace, write):
    """The library's HTTP write (`Http.write`, in a thread: it blocks) as a `result` step names it."""
    try:
        results = await asyncio.to_thread(http.write, workspace, write["ops"], key=write["key"], deadline=30)
        return {"results": results}
    except KeyReused as e:
        return {"status": e.status}


async def client_side(transcript, session, playback):
    http = Http(f"http://127.0.0.1:{playback.http_port}")
    writes = []
    for index, step in enumerate(transcript["steps"]):
        if "do" in step and "write" in step["do"]:
            writes.append(asyncio.ensure_future(write(http, transcript["client"]["workspace"], step["do"]["write"])))
        elif "result" in step:
            got = await asyncio.wait_for(writes.pop(0), STATE_TIMEOUT)
            assert got == step["result"], f"step {index}: the write returned {got}; the playback: {playback.progress}"
        elif "do" in step:
            session.submit(step["do"]["submit"])
        elif "state" in step:
            expected = {"active": "", **step["state"]}
            try:
                await session.wait_until(lambda s: not differences(expected, shown(s)), STATE_TIMEOUT)
            except asyncio.TimeoutError:
                pytest.fail(f"step {index}: the state differs (want, got): {differences(expected, shown(session))}; "
                            f"the playback: {playback.progress}")
            playback.confirm(index)


@pytest.mark.parametrize("path", TRANSCRIPTS, ids=[p.stem for p in TRANSCRIPTS])
def test_transcript(path):
    transcript = json.loads(path.read_text())

    async def main():
        playback = await Playback(transcript).start()
        client = transcript["client"]
        session = Session(f"ws://127.0.0.1:{playback.port}/v1/workspaces/{client['workspace']}/ws",
                          client["workspace"], client_id=client["clientId"],
                          backoff=Backoff(base=0.05, cap=0.2), retry_backoff=Backoff(base=0.1, cap=0.5))
        server = asyncio.ensure_future(playback.run())
        try:
            if any("accept" in step for step in transcript["steps"]):
                await session.start(timeout=30)
            await client_side(transcript, session, playback)
            await asyncio.wait_for(server, 30)
        except Mismatch as e:
            pytest.fail(str(e))
        finally:
            server.cancel()
            await session.close()
            await playback.close()

    asyncio.run(asyncio.wait_for(main(), 120))
