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
        assert [o["version"] for o in history["ops"]] == [4, 3, 2, 1]
        assert [o["author"] for o in history["ops"]] == ["ann", "cat", "ben", "ann"]
        assert history["ops"][1]["summary"] == 'updated t1: title "Today"'
        assert history["ops"][3]["op"]["add"]["tab"]["title"] == "Docs"
        for o in history["ops"]:
            at = time.mktime(time.strptime(o["at"][:19], "%Y-%m-%dT%H:%M:%S")) - time.timezone
            assert started - 1 <= at <= time.time() + 1, o["at"]
        page = json.loads(call(node.http, "GET", "/v1/workspaces/team/history?limit=2", viewer)[1])
        assert [o["version"] for o in page["ops"]] == [4, 3] and page["next"] == 3
        rest = json.loads(call(node.http, "GET", f"/v1/workspaces/team/history?before={page['next']}", viewer)[1])
        assert [o["version"] for o in rest["ops"]] == [2, 1] and rest["next"] is None
        assert call(node.http, "GET", "/v1/workspaces/team/history")[0] == 401
        assert call(node.http, "GET", "/v1/workspaces/team/history", mint(node.secret, "x", ws="other"))[0] == 401
        assert call(node.http, "GET", "/v1/workspaces/team/history?limit=5000", viewer)[0] == 400
        assert json.loads(call(node.http, "GET", "/v1/workspaces/nothing/history", viewer)[1])["ops"] == []
        for s in people.values():
            await s.ws.close()
    asyncio.run(main())
