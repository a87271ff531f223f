"""The Python client package (clients/python) against a real tabsync-server (.build/debug): its
session keeps the rules the Swift and JS clients keep (docs/design.md, "Submit, seqs and dedup",
"Transient refusals are retried", "Resume and epoch"), checked against the server's own stored log
read over HTTP: every op settled by its own answer, none applied twice across a SIGKILL, refusals
that pass retried in order, history over the session and over HTTP the same."""
import asyncio
import os
import pathlib
import secrets
import signal
import statistics
import sys
import time

import jwt
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "clients" / "python"))
sys.path.insert(0, str(ROOT / "scripts"))

from lib import Server, free_port  # noqa: E402
from tabsync_client import AnswerGone, Backoff, Http, Refused, Session  # noqa: E402

BIN = pathlib.Path(os.environ.get("TABSYNC_SERVER_BIN", str(ROOT / ".build" / "debug" / "tabsync-server")))


def run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, 120))


def tab(n, prefix="t"):
    return {"id": f"{prefix}{n}", "title": f"Tab {n}", "url": f"https://example.test/{prefix}/{n}"}


def stored(http, workspace):
    """(clientId, seq) -> the stored op, for every op the log holds; fails on a (client, seq) twice."""
    seen = {}
    for entry in http.all_ops(workspace):
        key = (entry.get("clientId", ""), int(entry.get("seq", 0)))
        assert key not in seen, f"{key} stored twice: versions {seen[key]['version']} and {entry['version']}"
        seen[key] = entry
    return seen


@pytest.fixture
def memory_server():
    server = Server(str(BIN), store="memory")
    yield server
    server.stop()


def test_ops_settle_by_their_answers_two_sessions_converge_and_see_each_other(memory_server):
    async def main():
        url = memory_server.url + "/"
        a = await Session(url, "conv", client_id="py-a").start()
        b = await Session(url, "conv", client_id="py-b").start()
        answers = await asyncio.gather(*[a.submit({"add": {"tab": tab(n)}}) for n in range(20)])
        assert [int(x["seq"]) for x in answers] == list(range(1, 21)), "ops numbered in submission order"
        moved = await b.submit({"move": {"tabId": "t19", "place": {"index": 0}}})
        assert int(moved["version"]) == 21
        with pytest.raises(Refused) as refused:
            await a.submit({"remove": {"tabId": "nowhere"}})
        assert refused.value.code == "TAB_GONE"
        await a.wait_until(lambda s: s.state.version == 21, 10)
        await b.wait_until(lambda s: s.state.version == 21, 10)
        ids = [t["id"] for t in a.state.tabs()]
        assert ids == ["t19"] + [f"t{n}" for n in range(19)]
        assert [t["id"] for t in b.state.tabs()] == ids
        await a.wait_until(lambda s: {p.get("clientId") for p in s.peers.values()} == {"py-a", "py-b"}, 10)
        await b.close()
        await a.wait_until(lambda s: {p.get("clientId") for p in s.peers.values()} == {"py-a"}, 10)
        snapshot = Http(url).snapshot("conv")
        assert [t["id"] for t in sorted(snapshot["tabs"], key=lambda t: t["key"].encode())] == ids
        assert snapshot["version"] == "21"
        await a.close()
    run(main())


def test_history_over_the_session_and_over_http_agree(memory_server):
    async def main():
        url = memory_server.url + "/"
        s = await Session(url, "hist", client_id="py-h", name="helen").start()
        for n in range(5):
            await s.submit({"add": {"tab": tab(n)}})
        await s.submit({"remove": {"tabId": "t2"}})
        page = await s.history({"ops": {"limit": 3}})
        assert [o["version"] for o in page["ops"]] == ["6", "5", "4"] and page["next"] == "4"
        http = Http(url)
        assert http.history("hist", limit=3) == {"ops": page["ops"], "next": "4"}
        assert [int(o["seq"]) for o in http.all_ops("hist")] == [1, 2, 3, 4, 5, 6]
        closed = await s.history({"closed": 5})
        assert [c["tab"]["id"] for c in closed["closed"]] == ["t2"] == [c["tab"]["id"] for c in http.closed("hist")]
        with pytest.raises(Refused) as refused:
            await s.history({"closed": 500})
        assert refused.value.code == "INVALID_ARGUMENT" and "100" in refused.value.message
        await s.close()
    run(main())


def test_a_sigkilled_server_loses_no_acknowledged_op_and_applies_none_twice(tmp_path):
    port = free_port()
    data = str(tmp_path / "data")
    # Paced at 100 ops/s (Welcome.limits), so ops are in flight when the server is killed.
    flags = ["--data-dir", data, "--log-level", "error", "--max-ops-per-second", "100"]
    server = Server(str(BIN), args=flags, store=None, port=port, common=False)
    events = []

    async def main():
        nonlocal server
        s = Session(f"ws://127.0.0.1:{port}/", "kill", client_id="py-k",
                    on_event=lambda kind, **f: events.append((kind, f)),
                    backoff=Backoff(base=0.05, cap=0.5))
        await s.start()
        futures = [s.submit({"add": {"tab": tab(n)}}) for n in range(300)]
        await s.wait_until(lambda s: s.state.version >= 60, 30)
        server.stop(signal.SIGKILL, keep_data=True)
        assert s.state.version < 300, "every op was answered before the kill: nothing was in flight"
        server = Server(str(BIN), args=flags, store=None, port=port, common=False)
        answers = await asyncio.gather(*futures, return_exceptions=True)
        gone = [a for a in answers if isinstance(a, AnswerGone)]
        failed = [a for a in answers if isinstance(a, BaseException) and not isinstance(a, AnswerGone)]
        assert not failed, failed[:3]
        log = stored(Http(s.url), "kill")
        added = [e["op"]["add"]["tab"]["id"] for e in log.values() if "add" in e.get("op", {})]
        assert sorted(added) == sorted(f"t{n}" for n in range(300)), "every op once, none lost, none twice"
        for answer in answers:
            if isinstance(answer, dict):
                assert log[("py-k", int(answer["seq"]))]["version"] == answer["version"], "the answer names the stored op"
        await s.wait_until(lambda s: s.state.version == 300, 30)
        refused = [f for kind, f in events if kind == "reject"]
        if not refused:  # a refusal that passes sends its op again as a new one: it lands later
            assert [t["id"] for t in s.state.tabs()] == [f"t{n}" for n in range(300)]
        assert s.welcomes >= 2
        print(f"sigkill: {len(answers) - len(gone)} answered, {len(gone)} answers gone, {len(refused)} refusals retried, "
              f"{sum(1 for kind, _ in events if kind == 'connect')} connects")
        await s.close()
    try:
        run(main())
    finally:
        server.stop()


def test_ops_refused_over_a_users_quota_are_retried_and_land_once(tmp_path):
    secret = secrets.token_hex(32)
    key = tmp_path / "team.key"
    key.write_text(secret + "\n")
    server = Server(str(BIN), store="memory", args=["--auth-key-file", str(key), "--max-ops-per-second-per-sub", "4"])
    token = jwt.encode({"sub": "pat", "ws": "*", "role": "editor", "exp": int(time.time()) + 3600}, secret.encode(),
                       algorithm="HS256")
    refusals = []

    def note(kind, **fields):
        if kind == "reject":
            refusals.append(fields["code"])
        elif kind == "retry":
            refusals.append("retried")

    async def main():
        url = server.url + "/"
        # Two sessions of one user: each paces under the user's rate, so together they go over it.
        one = await Session(url, "quota", client_id="py-q1", token=token, on_event=note).start()
        two = await Session(url, "quota", client_id="py-q2", token=token, on_event=note).start()
        futures = [s.submit({"add": {"tab": tab(n, prefix=s.client_id + "-")}}) for n in range(12) for s in (one, two)]
        answers = await asyncio.gather(*futures)
        assert "RATE_LIMITED" in refusals and "retried" in refusals, "the quota never refused: the retry rule not reached"
        log = stored(Http(url, token=token), "quota")
        for s in (one, two):
            # Once each (ops already in flight when one is refused may land before it is retried;
            # those not yet sent wait behind it).
            mine = [e["op"]["add"]["tab"]["id"] for (c, _), e in log.items() if c == s.client_id]
            assert sorted(mine) == sorted(f"{s.client_id}-{n}" for n in range(12)), "every op once"
        assert len(answers) == 24
        await one.close()
        await two.close()
    try:
        run(main())
    finally:
        server.stop()


def test_reconnect_back_off_is_full_jitter():
    backoff = Backoff(base=0.1, cap=5.0, rng=__import__("random").Random(7))
    delays = [backoff.delay(10) for _ in range(1000)]  # 0.1 * 2^10 is past the cap: [0, 5]
    assert min(delays) >= 0 and max(delays) <= 5.0
    assert min(delays) < 0.25 and max(delays) > 4.75, "spread over the whole range, from near 0"
    assert 2.2 < statistics.mean(delays) < 2.8
    assert len({round(d, 3) for d in delays}) > 900, "no two clients wait the same"
    early = [backoff.delay(0) for _ in range(100)]
    assert max(early) <= 0.1
