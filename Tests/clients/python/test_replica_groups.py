"""Tab groups in the Python replica (docs/design.md and proto/README.md, "Tab groups"): each canonical
group form applied as given, an emptied group dropped, the proto/README example exchange ending in
its snapshot; against the real server, two sessions grouping, ungrouping, moving and renaming
concurrently end with replicas equal to the server's snapshot, every group contiguous and non-empty.
"""
import asyncio
import pathlib
import random
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "clients" / "python"))
sys.path.insert(0, str(ROOT / "Tests" / "clients" / "python"))

from tabsync_client import Http, Refused, Session  # noqa: E402
from tabsync_client.replica import Diverged, Replica  # noqa: E402
from test_session import memory_server, run  # noqa: E402,F401  (the fixture and the runner)


def start(text):
    """A replica of "a b(G) c(G)": keys a0, a1, ..., each (G) a blue group."""
    tabs, groups = [], []
    for i, word in enumerate(text.split()):
        tab_id, _, group = word.rstrip(")").partition("(")
        tabs.append({"id": tab_id, "key": f"a{i}", **({"group": group} if group else {})})
        if group and group not in groups:
            groups.append(group)
    r = Replica()
    r.load({"version": "1", "tabs": tabs, "groups": [{"id": g, "color": "blue"} for g in groups]})
    return r


def show(r):
    bar = " ".join(f"{t['id']}({t['group']})" if t["group"] else t["id"] for t in r.tabs())
    return f"{bar} | {' '.join(g['id'] for g in r.groups())}"


def apply(r, op):
    return r.apply({"version": str(r.version + 1), "op": op, "activeTabId": r.tabs()[0]["id"] if r.tabs() else ""})


def assert_groups_hold(tabs, groups):
    seen = []
    for t in tabs:
        g = t.get("group", "")
        if g and (not seen or seen[-1] != g):
            assert g not in seen, f"group {g} not contiguous: {[(t['id'], t.get('group')) for t in tabs]}"
            seen.append(g)
    assert [g["id"] for g in groups] == seen


def test_canonical_group_forms():
    r = start("a b c d")
    apply(r, {"group": {"tabIds": ["a", "c"], "groupId": "G", "title": "Work", "color": "blue", "keys": ["a0", "a0V"]}})
    assert show(r) == "a(G) c(G) b d | G"
    apply(r, {"group": {"tabIds": ["d"], "groupId": "G", "title": "Work", "color": "red", "keys": ["a0x"]}})
    assert show(r) == "a(G) c(G) d(G) b | G" and r.groups() == [{"id": "G", "title": "Work", "color": "red"}]
    apply(r, {"updateGroup": {"groupId": "G", "title": ""}})
    apply(r, {"updateGroup": {"groupId": "G", "color": "cyan"}})
    assert r.groups() == [{"id": "G", "title": "", "color": "cyan"}]
    apply(r, {"ungroup": {"tabIds": ["c"], "keys": ["a0y"]}})
    assert show(r) == "a(G) d(G) c b | G"
    apply(r, {"move": {"tabId": "a", "place": {"key": "a0z"}}})
    apply(r, {"remove": {"tabId": "d"}})
    assert show(r) == "c a b | ", "a group whose last tab left is dropped"
    with pytest.raises(Diverged):
        apply(r, {"updateGroup": {"groupId": "G", "color": "red"}})
    with pytest.raises(Diverged):
        apply(r, {"move": {"tabId": "a", "place": {"key": "a0z"}, "group": "nope"}})
    assert show(r) == "c a b | ", "a diverging Applied leaves the replica unchanged"


def test_canonical_move_add_replace_restore():
    r = start("a b(G) c(G) d(H)")
    apply(r, {"move": {"tabId": "a", "place": {"key": "a1V"}, "group": "G"}})
    assert show(r) == "b(G) a(G) c(G) d(H) | G H"
    apply(r, {"add": {"tab": {"id": "n", "key": "a9", "group": "H"}}})
    apply(r, {"move": {"tabId": "d", "place": {"key": "Zz"}}})
    assert show(r) == "d b(G) a(G) c(G) n(H) | G H"
    apply(r, {"replace": {"tabs": [{"id": "x", "key": "a0", "group": "K"}, {"id": "y", "key": "a1"}],
                          "groups": [{"id": "K", "title": "Kept", "color": "pink"}]}})
    assert show(r) == "x(K) y | K" and r.groups() == [{"id": "K", "title": "Kept", "color": "pink"}]
    apply(r, {"restore": {"version": "1", "state": {"tabs": [{"id": "a", "key": "a0", "group": "G"}], "groups": [{"id": "G"}]}}})
    assert show(r) == "a(G) | G" and r.groups() == [{"id": "G", "title": "", "color": "grey"}]


def test_the_proto_readme_exchange_ends_in_its_snapshot():
    r = Replica()
    r.load({"version": "4", "tabs": [{"id": i, "key": f"a{n}"} for n, i in enumerate("ABCD")], "activeTabId": "A"})
    for version, op in enumerate([
        {"group": {"tabIds": ["A", "B"], "groupId": "G", "title": "Work", "color": "blue", "keys": ["a0", "a1"]}},
        {"move": {"tabId": "D", "place": {"key": "a0V"}, "group": "G"}},
        {"add": {"tab": {"id": "E", "key": "a3"}}},
        {"updateGroup": {"groupId": "G", "color": "red"}},
        {"ungroup": {"tabIds": ["D"], "keys": ["a1V"]}},
        {"group": {"tabIds": ["C", "E"], "groupId": "H", "title": "", "color": "grey", "keys": ["a2", "a3"]}},
    ], start=5):
        r.apply({"version": str(version), "op": op, "activeTabId": "A"})
    assert show(r) == "A(G) B(G) D C(H) E(H) | G H"
    assert r.groups() == [{"id": "G", "title": "Work", "color": "red"}, {"id": "H", "title": "", "color": "grey"}]


def test_concurrent_group_ops_against_the_server_converge_contiguous(memory_server):
    async def main():
        url = memory_server.url + "/"
        a = await Session(url, "groups", client_id="py-ga").start()
        b = await Session(url, "groups", client_id="py-gb").start()
        for n in range(12):
            await a.submit({"add": {"tab": {"id": f"t{n}", "title": f"Tab {n}"}}})
        rnd = random.Random(41)

        def op(n):
            ids = [f"t{i}" for i in range(12)]
            kind = rnd.choice(["group", "group", "ungroup", "move", "move", "updateGroup"])
            if kind == "group":
                return {"group": {"tabIds": rnd.sample(ids, rnd.randint(1, 3)), "groupId": rnd.choice("GHK")}}
            if kind == "ungroup":
                return {"ungroup": {"tabIds": rnd.sample(ids, 2)}}
            if kind == "move":
                return {"move": {"tabId": rnd.choice(ids), "place": {"index": rnd.randrange(12)}}}
            return {"updateGroup": {"groupId": rnd.choice("GHK"), "title": f"T{n}", "color": rnd.choice(["red", "cyan"])}}

        async def quietly(session, o):
            try:
                await session.submit(o)
            except Refused as refused:  # a group gone by the time it lands
                assert refused.code == "TAB_GONE", refused
        await asyncio.gather(*[quietly(a if n % 2 else b, op(n)) for n in range(80)])
        snapshot = Http(url).snapshot("groups")
        version = int(snapshot["version"])
        await a.wait_until(lambda s: s.state.version == version, 20)
        await b.wait_until(lambda s: s.state.version == version, 20)
        want = sorted(snapshot["tabs"], key=lambda t: t["key"].encode())
        for s in (a, b):
            assert [(t["id"], t["key"], t["group"]) for t in s.state.tabs()] == [(t["id"], t["key"], t.get("group", "")) for t in want]
            assert s.state.groups() == [{"id": g["id"], "title": g.get("title", ""), "color": g["color"]} for g in snapshot.get("groups", [])]
            assert_groups_hold(s.state.tabs(), s.state.groups())
        assert snapshot.get("groups"), "the run left some group to compare"
        await a.close()
        await b.close()
    run(main())
