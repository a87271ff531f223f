"""Tab groups in the Python client package (clients/python; docs/design.md, "Tab groups"): the
replica applies proto/README.md's recorded group exchange from the Applieds alone to the Welcome the
server sent after it, a group whose last tab leaves is gone, an Applied naming a group the replica
lacks is `Diverged`, and two sessions against a real server hold the same groups."""
import json
import pathlib
import re
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "clients" / "python"))
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from tabsync_client import Session  # noqa: E402
from tabsync_client.replica import Diverged, Replica  # noqa: E402
from test_session import memory_server, run  # noqa: E402,F401


def listing(replica):
    return " ".join(t["id"] + (f"({t['group']})" if t.get("group") else "") for t in replica.tabs())


def test_the_recorded_group_exchange_applies_to_the_welcome_that_followed():
    readme = (ROOT / "proto" / "README.md").read_text()
    section = readme[readme.index("## Tab groups"):readme.index("## A Python client")]
    received = [json.loads(m) for m in re.findall(r"^(?:all|c3) ← (\{.*\})$", section, re.M)]
    assert len(received) == 7
    welcome = received.pop()["welcome"]["snapshot"]
    replica = Replica()
    replica.load({"version": "4", "tabs": [{"id": t, "key": f"a{i}"} for i, t in enumerate("ABCD")]})
    for message in received:
        replica.apply(message["applied"])
    expected = Replica()
    expected.load(welcome)
    assert listing(replica) == listing(expected) == "A(G) B(G) D C(H) E(H)"
    assert [t["key"] for t in replica.tabs()] == [t["key"] for t in expected.tabs()]
    assert replica.groups() == expected.groups() == [
        {"id": "G", "title": "Work", "color": "red"}, {"id": "H", "title": "", "color": "grey"}]


def test_the_last_tab_leaving_takes_its_group_and_an_unknown_group_diverges():
    replica = Replica()
    replica.load({"version": "2", "tabs": [{"id": "a", "key": "a0", "group": "G"}, {"id": "b", "key": "a1"}],
                  "groups": [{"id": "G", "color": "blue"}]})
    with pytest.raises(Diverged):
        replica.apply({"version": "3", "op": {"move": {"tabId": "b", "place": {"key": "a2"}, "group": "nope"}}})
    assert listing(replica) == "a(G) b" and replica.version == 2, "a refused Applied changes nothing"
    replica.apply({"version": "3", "op": {"move": {"tabId": "a", "place": {"key": "a2"}}}, "activeTabId": "a"})
    assert listing(replica) == "b a" and replica.groups() == [] and replica.group("G") is None


def test_two_sessions_hold_the_same_groups(memory_server):  # noqa: F811
    async def main():
        url = memory_server.url + "/"
        a = await Session(url, "groups", client_id="py-a").start()
        b = await Session(url, "groups", client_id="py-b").start()
        for t in "abcd":
            await a.submit({"add": {"tab": {"id": t}}})
        await a.submit({"group": {"tabIds": ["b", "c"], "groupId": "G", "title": "Work", "color": "green"}})
        moved = await b.submit({"move": {"tabId": "d", "place": {"index": 2}}})  # between b(G) and c(G)
        assert moved["op"]["move"]["group"] == "G"
        await b.submit({"updateGroup": {"groupId": "G", "title": "Deep work"}})
        await a.wait_until(lambda s: s.state.version == 7, 10)
        for s in (a, b):
            assert listing(s.state) == "a b(G) d(G) c(G)"
            assert s.state.groups() == [{"id": "G", "title": "Deep work", "color": "green"}]
        await a.close()
        await b.close()
    run(main())
