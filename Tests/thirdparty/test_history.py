"""History as a stranger reads it (docs/design.md, "History"): ops made over Python `websockets`
with PyJWT tokens of three people, read back from `GET /v1/workspaces/{id}/history` with urllib:
newest first, paged by `before`, each with its author (the token's `sub`), commit time and summary;
only what was stored; readable by any role that reads the workspace, refused without one."""
import asyncio
import json
import time

from test_admin import Node, Session, call, mint

import pytest


@pytest.fixture
def node(tmp_path):
    n = Node(tmp_path)
    yield n
    n.stop()


def test_history_names_who_did_what_when_newest_first_and_pages(node):
    async def main():
        started = time.time() - 1
        people = {name: await Session(node.ws, "team", mint(node.secret, name), client=f"c-{name}").open()
                  for name in ["ann", "ben", "cat"]}
        ops = [("ann", {"add": {"tab": {"id": "t1", "title": "Docs"}}}),
               ("ben", {"add": {"tab": {"id": "t2", "title": "Mail"}}}),
               ("cat", {"update": {"tabId": "t1", "title": "Today"}}),
               ("ann", {"remove": {"tabId": "t2"}})]
        for seq, (who, op) in enumerate(ops, start=1):
            s = people[who]
            await s.ws.send(json.dumps({"submit": {"seq": str(seq), "op": op}}))
            while not any("applied" in m and m["applied"].get("seq") == str(seq) and m["applied"]["clientId"] == s.client
                          for m in s.messages):
                s.messages.append(json.loads(await asyncio.wait_for(s.ws.recv(), 5)))
        viewer = mint(node.secret, "vic", role="viewer")
        status, body = call(node.http, "GET", "/v1/workspaces/team/history", viewer)
        assert status == 200, body
        history = json.loads(body)
        # Protobuf JSON, as the session's HistoryAnswer: 64-bit numbers are strings, empty fields left out.
        assert [o["version"] for o in history["ops"]] == ["4", "3", "2", "1"]
        assert [o["author"] for o in history["ops"]] == ["ann", "cat", "ben", "ann"]
        assert history["ops"][1]["summary"] == 'updated t1: title "Today"'
        assert history["ops"][3]["op"]["add"]["tab"]["title"] == "Docs"
        for o in history["ops"]:
            at = time.mktime(time.strptime(o["at"][:19], "%Y-%m-%dT%H:%M:%S")) - time.timezone
            assert started - 1 <= at <= time.time() + 1, o["at"]
        page = json.loads(call(node.http, "GET", "/v1/workspaces/team/history?limit=2", viewer)[1])
        assert [o["version"] for o in page["ops"]] == ["4", "3"] and page["next"] == "3"
        rest = json.loads(call(node.http, "GET", f"/v1/workspaces/team/history?before={page['next']}", viewer)[1])
        assert [o["version"] for o in rest["ops"]] == ["2", "1"] and "next" not in rest
        assert call(node.http, "GET", "/v1/workspaces/team/history")[0] == 401
        assert call(node.http, "GET", "/v1/workspaces/team/history", mint(node.secret, "x", ws="other"))[0] == 401
        assert call(node.http, "GET", "/v1/workspaces/team/history?limit=5000", viewer)[0] == 400
        assert json.loads(call(node.http, "GET", "/v1/workspaces/nothing/history", viewer)[1]) == {}
        status, body = call(node.http, "GET", "/v1/workspaces/nothing?version=1", viewer)
        assert status == 404 and "workspace nothing has no history" in body, (status, body)
        status, body = call(node.http, "GET", "/v1/workspaces/team/closed?limit=101", viewer)
        assert status == 400 and "from 1 to 100" in body, (status, body)
        for s in people.values():
            await s.ws.close()
    asyncio.run(main())


async def until(s, predicate, timeout=5):
    """Reads the session's messages until one matches; returns it."""
    deadline = time.monotonic() + timeout
    for m in s.messages:
        if predicate(m):
            return m
    while True:
        m = json.loads(await asyncio.wait_for(s.ws.recv(), max(0.01, deadline - time.monotonic())))
        s.messages.append(m)
        if predicate(m):
            return m


async def submit(s, seq, op):
    await s.ws.send(json.dumps({"submit": {"seq": str(seq), "op": op}}))
    return await until(s, lambda m: ("applied" in m and m["applied"].get("seq") == str(seq) and m["applied"]["clientId"] == s.client)
                       or ("rejected" in m and m["rejected"].get("seq") == str(seq)))


def state(node, token, query=""):
    status, body = call(node.http, "GET", f"/v1/workspaces/team{query}", token)
    assert status == 200, body
    s = json.loads(body)
    return [t["id"] for t in s.get("tabs", [])], s.get("activeTabId", ""), s


def test_restore_puts_back_a_past_state_as_a_new_version_that_every_client_receives(node):
    async def main():
        ann = await Session(node.ws, "team", mint(node.secret, "ann"), client="c-ann").open()
        ben = await Session(node.ws, "team", mint(node.secret, "ben"), client="c-ben").open()
        viewer = mint(node.secret, "vic", role="viewer")
        ops = [{"add": {"tab": {"id": "a", "title": "A", "url": "https://a.example/"}}},
               {"add": {"tab": {"id": "b", "title": "B"}, "activate": True}},
               {"add": {"tab": {"id": "c", "title": "C"}}},
               {"remove": {"tabId": "a"}},
               {"move": {"tabId": "c", "place": {"index": 0}}},
               {"update": {"tabId": "b", "title": "B2"}}]
        for seq, op in enumerate(ops, start=1):
            assert "applied" in await submit(ann, seq, op)
        at3, active3, snap3 = state(node, viewer, "?version=3")
        assert (at3, active3, snap3["version"]) == (["a", "b", "c"], "b", "3")
        now_tabs, _, _ = state(node, viewer)
        assert now_tabs == ["c", "b"]
        # ben restores version 3: a new version 7, received by ann like any op.
        answer = await submit(ben, 1, {"restore": {"version": "3"}})
        assert answer["applied"]["version"] == "7", answer
        restored = answer["applied"]["op"]["restore"]["state"]
        assert [t["id"] for t in restored["tabs"]] == ["a", "b", "c"] and answer["applied"]["activeTabId"] == "b"
        seen = await until(ann, lambda m: "applied" in m and m["applied"]["version"] == "7")
        assert seen["applied"]["op"] == answer["applied"]["op"]
        tabs, active, snap = state(node, viewer)
        assert (tabs, active, snap["version"]) == (["a", "b", "c"], "b", "7")
        assert [t["title"] for t in snap["tabs"]] == ["A", "B", "C"]
        # History is never rewritten: the restore can itself be undone.
        assert "applied" in await submit(ben, 2, {"restore": {"version": "6"}})
        assert state(node, viewer)[0] == ["c", "b"]
        history = json.loads(call(node.http, "GET", "/v1/workspaces/team/history?limit=2", viewer)[1])
        assert history["ops"][0]["summary"] == "restored version 6 (2 tabs)" and history["ops"][0]["author"] == "ben"
        # Refusals: a version not there yet, and a viewer.
        refused = await submit(ben, 3, {"restore": {"version": "99"}})
        assert refused["rejected"]["code"] == "INVALID_ARGUMENT" and "after" in refused["rejected"]["message"]
        vic = await Session(node.ws, "team", viewer, client="c-vic").open()
        await vic.ws.send(json.dumps({"submit": {"seq": "1", "op": {"restore": {"version": "1"}}}}))
        no = await until(vic, lambda m: "rejected" in m)
        assert no["rejected"]["code"] == "NOT_PERMITTED"
        # The state at a time: just after the first op was committed.
        first_at = json.loads(call(node.http, "GET", "/v1/workspaces/team/history?before=2&limit=1", viewer)[1])["ops"][0]["at"]
        assert state(node, viewer, f"?at={first_at}")[0] == ["a"]
        assert call(node.http, "GET", "/v1/workspaces/team?at=yesterday", viewer)[0] == 400
        for s in (ann, ben, vic):
            await s.ws.close()
    asyncio.run(main())


def test_reopen_brings_back_a_closed_tab_between_its_old_neighbours(node):
    async def main():
        ann = await Session(node.ws, "team", mint(node.secret, "ann"), client="c-ann").open()
        viewer = mint(node.secret, "vic", role="viewer")
        for seq, op in enumerate([{"add": {"tab": {"id": t, "title": t.upper(), "url": f"https://{t}.example/", "badge": "3"}}}
                                  for t in ["p", "q", "r", "s"]], start=1):
            assert "applied" in await submit(ann, seq, op)
        assert "applied" in await submit(ann, 5, {"remove": {"tabId": "q"}})
        assert "applied" in await submit(ann, 6, {"remove": {"tabId": "s"}})
        status, body = call(node.http, "GET", "/v1/workspaces/team/closed", viewer)
        assert status == 200, body
        closed = json.loads(body)["closed"]
        assert [c["tab"]["id"] for c in closed] == ["s", "q"] and closed[0]["author"] == "ann"
        # Over the open session too.
        await ann.ws.send(json.dumps({"history": {"id": 7, "closed": 10}}))
        answer = await until(ann, lambda m: "history" in m and m["history"].get("id") == 7)
        assert [c["tab"]["id"] for c in answer["history"]["closed"]] == ["s", "q"]
        back = await submit(ann, 7, {"reopen": {"tabId": "q"}})
        add = back["applied"]["op"]["add"]
        assert add["tab"]["title"] == "Q" and add["tab"]["url"] == "https://q.example/" and add["tab"]["badge"] == "3"
        assert add.get("activate") is True and back["applied"]["activeTabId"] == "q"
        assert state(node, viewer)[0] == ["p", "q", "r"]
        again = await submit(ann, 8, {"reopen": {"tabId": "q"}})
        assert again["rejected"]["code"] == "INVALID_ARGUMENT"
        never = await submit(ann, 9, {"reopen": {"tabId": "zzz"}})
        assert never["rejected"]["code"] == "INVALID_ARGUMENT"
        # A Submit sent right behind a reopen waits for it: seqs stay in order.
        await ann.ws.send(json.dumps({"submit": {"seq": "10", "op": {"reopen": {"tabId": "s"}}}}))
        await ann.ws.send(json.dumps({"submit": {"seq": "11", "op": {"remove": {"tabId": "s"}}}}))
        late = await until(ann, lambda m: "applied" in m and m["applied"].get("seq") == "11")
        assert late["applied"]["op"] == {"remove": {"tabId": "s"}}
        assert state(node, viewer)[0] == ["p", "q", "r"]
        await ann.ws.send(json.dumps({"history": {"id": 8, "version": "2"}}))
        two = await until(ann, lambda m: "history" in m and m["history"].get("id") == 8)
        assert [t["id"] for t in two["history"]["state"]["tabs"]] == ["p", "q"]
        await ann.ws.send(json.dumps({"history": {"id": 9, "ops": {"limit": 2}}}))
        page = await until(ann, lambda m: "history" in m and m["history"].get("id") == 9)
        assert [o["version"] for o in page["history"]["ops"]] == ["9", "8"] and page["history"]["next"] == "8"
        await ann.ws.close()
    asyncio.run(main())


def test_a_client_resuming_from_before_a_restore_receives_ops_and_a_kill_loses_nothing_acknowledged(tmp_path):
    n = Node(tmp_path)
    try:
        async def main():
            ann = await Session(n.ws, "team", mint(n.secret, "ann"), client="c-ann").open()
            for seq in range(1, 6):
                assert "applied" in await submit(ann, seq, {"add": {"tab": {"id": f"t{seq}"}}})
            epoch = ann.messages[0]["welcome"]["epoch"]
            ben = await Session(n.ws, "team", mint(n.secret, "ben"), client="c-ben").open()
            assert "applied" in await submit(ben, 1, {"restore": {"version": "2"}})
            # Restores in flight when the server is killed: each is applied whole or not at all.
            for seq in range(2, 6):
                await ben.ws.send(json.dumps({"submit": {"seq": str(seq), "op": {"restore": {"version": str(seq)}}}}))
            acked = []
            try:
                while True:
                    m = json.loads(await asyncio.wait_for(ben.ws.recv(), 0.2))
                    if "applied" in m and m["applied"]["clientId"] == "c-ben":
                        acked.append(m["applied"])
                    if len(acked) == 1:
                        n.process.kill()
            except Exception:
                pass
            n.process.wait(timeout=10)
            return epoch, acked
        epoch, acked = asyncio.run(main())
        n.stop()
        n2 = Node.__new__(Node)
        n2.secret = n.secret
        key = tmp_path / "team.key"
        n2.log = open(tmp_path / "server2.log", "wb")
        import subprocess
        from test_admin import SERVER
        n2.process = subprocess.Popen([SERVER, "--port", "0", "--data-dir", str(tmp_path / "data"), "--auth-key-file", str(key)],
                                      stdout=subprocess.PIPE, stderr=n2.log)
        line = n2.process.stdout.readline().decode()
        port = int(line.strip().rsplit(":", 1)[1])
        n2.ws, n2.http = f"ws://127.0.0.1:{port}/", f"http://127.0.0.1:{port}"
        try:
            async def after():
                viewer = mint(n.secret, "vic", role="viewer")
                for a in acked:
                    v = int(a["version"])
                    _, _, snap = state(n2, viewer, f"?version={v}")
                    restored = [t["id"] for t in a["op"]["restore"]["state"]["tabs"]]
                    assert [t["id"] for t in snap["tabs"]] == restored, (v, restored)
                # A client last at version 5 resumes with the ops since, the restore among them.
                c = Session(n2.ws, "team", mint(n.secret, "cat"), client="c-cat")
                c.ws = await __import__("websockets").connect(n2.ws, subprotocols=["tabsync.v1.json"])
                await c.ws.send(json.dumps({"hello": {"workspace": "team", "clientId": "c-cat", "token": mint(n.secret, "cat"),
                                                      "lastVersion": "5", "epoch": epoch}}))
                welcome = json.loads(await asyncio.wait_for(c.ws.recv(), 10))["welcome"]
                assert welcome.get("recovered") is True, welcome
                assert "restore" in welcome["missed"][0]["op"]
                await c.ws.close()
            asyncio.run(after())
        finally:
            n2.stop()
    finally:
        n.stop()
