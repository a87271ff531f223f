"""Tab groups as a stranger speaks them (docs/design.md, "Tab groups"; proto/README.md#tab-groups):
Python `websockets` with PyJWT tokens, the JSON form, urllib for the HTTP reads. Every Applied
carries what a client needs without the rules (each placed tab's key and final group, a new group's
fields), a second session receives the same, the snapshot and `GET /v1/workspaces/{id}` carry
`groups`, a reopened tab gets its last group back, a restore puts groups back, bad input gets its
code and changes nothing, and `--max-groups` is enforced."""
import asyncio
import json

from test_admin import Node, Session, call, mint
from test_history import state, submit, until

import pytest


@pytest.fixture
def node(tmp_path):
    n = Node(tmp_path, "--max-groups", "3")
    yield n
    n.stop()


def listing(snapshot):
    """The worked examples' notation: `a b(G) c(G)`."""
    return " ".join(t["id"] + (f"({t['group']})" if t.get("group") else "") for t in snapshot.get("tabs", []))


def test_group_ops_reach_every_session_with_their_results_and_the_http_snapshot(node):
    async def main():
        ann = await Session(node.ws, "team", mint(node.secret, "ann"), client="c-ann").open()
        ben = await Session(node.ws, "team", mint(node.secret, "ben"), client="c-ben").open()
        viewer = mint(node.secret, "vic", role="viewer")
        for seq, t in enumerate(["a", "b", "c", "d"], start=1):
            assert "applied" in await submit(ann, seq, {"add": {"tab": {"id": t, "title": t.upper()}}})

        made = await submit(ann, 5, {"group": {"tabIds": ["b", "c"], "groupId": "G", "title": "Work", "color": "blue"}})
        group = made["applied"]["op"]["group"]
        assert group["tabIds"] == ["b", "c"] and group["title"] == "Work" and group["color"] == "blue"
        assert len(group["keys"]) == 2
        # The other session gets the very same Applied.
        seen = await until(ben, lambda m: "applied" in m and m["applied"]["version"] == made["applied"]["version"])
        assert seen["applied"]["op"] == made["applied"]["op"]

        # A move between two tabs of G joins G, and its Applied says so.
        moved = await submit(ann, 6, {"move": {"tabId": "a", "place": {"index": 1}}})
        assert moved["applied"]["op"]["move"]["group"] == "G"
        # A move away from a group leaves it: the Applied carries no group (absent: none).
        out = await submit(ann, 7, {"move": {"tabId": "c", "place": {"index": 3}}})
        assert "group" not in out["applied"]["op"]["move"]
        # A group's title and colour; a colour not in the nine is refused and changes nothing.
        renamed = await submit(ann, 8, {"updateGroup": {"groupId": "G", "title": "Deep work"}})
        assert renamed["applied"]["op"]["updateGroup"] == {"groupId": "G", "title": "Deep work"}
        bad = await submit(ann, 9, {"updateGroup": {"groupId": "G", "color": "magenta"}})
        assert bad["rejected"]["code"] == "INVALID_ARGUMENT" and "magenta" in bad["rejected"]["message"]
        gone = await submit(ann, 10, {"updateGroup": {"groupId": "nope", "title": "x"}})
        assert gone["rejected"]["code"] == "TAB_GONE"

        _, _, snapshot = state(node, viewer)
        assert listing(snapshot) == "b(G) a(G) d c"
        assert snapshot["groups"] == [{"id": "G", "title": "Deep work", "color": "blue"}]

        # A viewer's session may not group (as it may not move).
        vic = await Session(node.ws, "team", viewer, client="c-vic").open()
        refused = await submit(vic, 1, {"group": {"tabIds": ["d"], "groupId": "H"}})
        assert refused["rejected"]["code"] == "NOT_PERMITTED"
        # A new session's Welcome carries the groups and the limit.
        cal = await Session(node.ws, "team", mint(node.secret, "cal"), client="c-cal").open()
        welcome = cal.messages[0]["welcome"]
        assert welcome["snapshot"]["groups"] == snapshot["groups"] and listing(welcome["snapshot"]) == "b(G) a(G) d c"
        assert welcome["limits"]["maxGroups"] == 3
        for s in (ann, ben, vic, cal):
            await s.ws.close()
    asyncio.run(main())


def test_reopen_restore_and_the_group_limit(node):
    async def main():
        ann = await Session(node.ws, "team", mint(node.secret, "ann"), client="c-ann").open()
        viewer = mint(node.secret, "vic", role="viewer")
        for seq, t in enumerate(["a", "b", "c", "d", "e"], start=1):
            assert "applied" in await submit(ann, seq, {"add": {"tab": {"id": t, "title": t.upper()}}})
        assert "applied" in await submit(ann, 6, {"group": {"tabIds": ["a", "b", "c"], "groupId": "G", "color": "green"}})
        grouped_version = int(state(node, viewer)[2]["version"])
        # Closed from the middle of its group, reopened: back between its neighbours, in its group.
        assert "applied" in await submit(ann, 7, {"remove": {"tabId": "b"}})
        back = await submit(ann, 8, {"reopen": {"tabId": "b"}})
        assert back["applied"]["op"]["add"]["tab"]["group"] == "G"
        assert listing(state(node, viewer)[2]) == "a(G) b(G) c(G) d e"

        # The limit: three groups, a fourth is refused with its code, nothing changes.
        assert "applied" in await submit(ann, 9, {"group": {"tabIds": ["d"], "groupId": "H"}})
        assert "applied" in await submit(ann, 10, {"group": {"tabIds": ["e"], "groupId": "I"}})
        before = state(node, viewer)[2]
        over = await submit(ann, 11, {"group": {"tabIds": ["a"], "groupId": "J"}})
        assert over["rejected"]["code"] == "LIMIT_EXCEEDED"
        assert state(node, viewer)[2] == before

        # Ungroup everything, then restore the version that had G: the groups come back.
        assert "applied" in await submit(ann, 12, {"ungroup": {"tabIds": ["a", "b", "c", "d", "e"]}})
        assert state(node, viewer)[2].get("groups", []) == []
        restored = await submit(ann, 13, {"restore": {"version": str(grouped_version)}})
        assert restored["applied"]["op"]["restore"]["state"]["groups"] == [{"id": "G", "color": "green"}]
        after = state(node, viewer)[2]
        assert listing(after) == "a(G) b(G) c(G) d e" and after["groups"] == [{"id": "G", "color": "green"}]
        # History's past state carries them too.
        _, _, past = state(node, viewer, f"?version={grouped_version}")
        assert listing(past) == "a(G) b(G) c(G) d e"
        await ann.ws.close()
    asyncio.run(main())
