"""Tab groups in the browser extension (docs/extension.md, "Tab groups"), two headless Chromium
profiles on a real tabsync-server. After each step — a group made, a tab added to or removed from
one, a rename, a recolour, a whole group dragged, a group closed, a remote move, a collapse — the
test waits until the server's snapshot and both windows agree: the same tabs in the same order
(conftest.converged) and the same groups (membership, title, colour).
"""
import json
import os
import time

import pytest

from conftest import WAIT, converged, submit, wait_for, write_artifact
from test_extension import bound, join, percentile, titles
from test_firefox import firefox, firefox_extension, mixed_server  # noqa: F401 - fixtures
from test_safety import session_saved_after


def server_groups(server, ws):
    """The server's tabs as [id, group title, group colour] (None, None when ungrouped), and the
    partition of its tabs into groups (a list of id lists, in order)."""
    status, _, body = server.get(f"/v1/workspaces/{ws}")
    assert status == 200
    s = json.loads(body)
    groups = {g["id"]: g for g in s.get("groups", [])}
    rows, parts = [], {}
    for t in s.get("tabs", []):
        g = groups.get(t.get("group") or "")
        rows.append([t["id"], g.get("title", "") if g else None, g.get("color", "grey") if g else None])
        if g:
            parts.setdefault(g["id"], []).append(t["id"])
    return rows, list(parts.values())


def server_history(server, ws, since):
    """The ops stored after version `since` (what each client sent), for a failure's message."""
    status, _, body = server.get(f"/v1/workspaces/{ws}/history?limit=20")  # newest first
    return body if status == 200 else status


BROWSER_GROUPS = """
    const b = arguments[0];
    const k = 'status:' + b.id;
    const s = (await chrome.storage.session.get(k))[k];
    const map = new Map(s.map);
    const tabs = (await chrome.tabs.query({ windowId: b.windowId })).sort((x, y) => x.index - y.index);
    const groups = new Map((await chrome.tabGroups.query({ windowId: b.windowId })).map((g) => [g.id, g]));
    return tabs.filter((t) => !t.pinned && map.get(t.id)).map((t) => {
      const g = groups.get(t.groupId);
      return { id: map.get(t.id), tab: t.id, group: g ? g.id : -1, title: g ? g.title : null, color: g ? g.color : null,
               collapsed: g ? g.collapsed : null };
    });"""


def browser_groups(p):
    return p.run(BROWSER_GROUPS, p.binding())


def same_groups(server, ws, *profiles):
    """True when every profile's mirrored tabs have the server's groups (membership, title, colour)."""
    rows, parts = server_groups(server, ws)
    for p in profiles:
        mine = browser_groups(p)
        if [[r["id"], r["title"], r["color"]] for r in mine] != rows:
            return False
        by = {}
        for r in mine:
            if r["group"] != -1:
                by.setdefault(r["group"], []).append(r["id"])
        if sorted(by.values()) != sorted(parts):
            return False
    return True


def settled(server, ws, *profiles, what):
    def check():
        return converged(server, ws, *profiles) and same_groups(server, ws, *profiles)
    try:
        wait_for(check, what=what)
    except AssertionError as error:
        details = [f"server: {server_groups(server, ws)}"] + [f"{p.name}: {browser_groups(p)}" for p in profiles]
        raise AssertionError(f"{error}\n" + "\n".join(details)) from None
    return server.snapshot(ws)["ids"]


def group(p, ids, title=None, color=None, into=None):
    """Groups the real tabs of workspace ids `ids` (into browser group `into`, else a new one), as the
    tab strip's "Add to group" does; then names and colours it. Returns the browser group id."""
    tabs = [p.tab_of(i) for i in ids]
    return p.run("""
        const [tabIds, into, title, color, windowId] = arguments;
        // A new group is made in the tabs' own window (by default it would be the control page's).
        const id = await chrome.tabs.group(into === null ? { tabIds, createProperties: { windowId } } : { tabIds, groupId: into });
        const props = {};
        if (title !== null) props.title = title;
        if (color !== null) props.color = color;
        if (Object.keys(props).length) await chrome.tabGroups.update(id, props);
        return id;""", tabs, into, title, color, p.binding()["windowId"])


def group_of(p, ws_id):
    return next(r["group"] for r in browser_groups(p) if r["id"] == ws_id)


def test_groups_are_mirrored_both_ways(ext_server, profiles, pages):
    server, ws = ext_server, "groups"
    a = bound(profiles("A"), server, ws, "alice", [pages.url(n) for n in ("One", "Two", "Three", "Four", "Five")])
    ids = settled(server, ws, a, what="A adopted")
    b = profiles("B")
    join(b, server, ws, "bob")
    settled(server, ws, a, b, what="B joined")

    # Create: A groups the first two tabs, named and coloured.
    ga = group(a, ids[:2], "Read", "blue")
    settled(server, ws, a, b, what="A's new group")
    assert server_groups(server, ws)[1] == [ids[:2]]
    # Add to: B adds the third tab to it.
    group(b, [ids[2]], into=group_of(b, ids[0]))
    settled(server, ws, a, b, what="B's tab added to the group")
    assert server_groups(server, ws)[1] == [ids[:3]]
    # Remove from: A takes the third out again.
    a.run("await chrome.tabs.ungroup(arguments[0]);", [a.tab_of(ids[2])])
    settled(server, ws, a, b, what="A's tab out of the group")
    assert server_groups(server, ws)[1] == [ids[:2]]
    # Rename and recolour in B.
    b.run("await chrome.tabGroups.update(arguments[0], { title: 'Later', color: 'red' });", group_of(b, ids[0]))
    settled(server, ws, a, b, what="B's rename and recolour")
    assert server_groups(server, ws)[0][0][1:] == ["Later", "red"]
    # Collapsed stays local: A collapses; B's group stays expanded, nothing is sent.
    version = server.snapshot(ws)["version"]
    a.run("await chrome.tabGroups.update(arguments[0], { collapsed: true });", ga)
    b.run("await chrome.tabGroups.update(arguments[0], { title: 'Later!' });", group_of(b, ids[0]))
    settled(server, ws, a, b, what="a rename after A's collapse")
    assert server.snapshot(ws)["version"] == version + 1, "collapsing sent nothing"
    assert browser_groups(a)[0]["collapsed"] is True, "a remote rename does not expand A's group"
    assert browser_groups(b)[0]["collapsed"] is False, "A's collapse stays in A"
    a.run("await chrome.tabGroups.update(arguments[0], { collapsed: false });", ga)

    # Drag a whole group: A moves its group after the last tab.
    a.run("await chrome.tabGroups.move(arguments[0], { index: -1 });", ga)
    order = settled(server, ws, a, b, what="A's whole-group drag")
    assert order[-2:] == ids[:2] and server_groups(server, ws)[1] == [ids[:2]], (ids, server_history(server, ws, version))

    # A remote move never ungroups: a program moves a grouped tab to the group's other edge.
    submit(server, ws, {"move": {"tabId": ids[1], "place": {"index": len(ids) - 2}}})
    order = settled(server, ws, a, b, what="a remote move inside the group")
    assert order[-2:] == [ids[1], ids[0]] and server_groups(server, ws)[1] == [[ids[1], ids[0]]]

    # Close a group: B closes it; its tabs close in A, nothing else does.
    b.run("await chrome.tabs.remove(arguments[0]);", [b.tab_of(ids[0]), b.tab_of(ids[1])])
    order = settled(server, ws, a, b, what="B closed the group")
    assert order == ids[2:] and server_groups(server, ws)[1] == []


def titles_settled(server, ws, names):
    """Waits until the server holds the pages' own titles: a tab adopted before its page loaded is
    retitled by an update once the page has (at most one per tab per 5 s), which a restart right
    after the adopt would otherwise send (the restart test's one extra op: an `update` of "R1")."""
    wait_for(lambda: titles(server, ws) == names, what="the pages' titles reached the server")


def restart_attached(a):
    """Restarts CDP profile `a` once Chromium saved its session, waits until its binding is attached
    again and points the popup at its window."""
    session_saved_after(a, time.time())
    a.restart()
    wait_for(lambda: (a.binding() or {}).get("attach") == "" and (a.status() or {}).get("status") == "connected",
             timeout=2 * WAIT, what="attached again after the restart")
    a.target(a.binding()["windowId"])


def test_groups_survive_a_browser_restart_and_send_nothing(ext_server, profiles, pages):
    """The browser gives restored groups new ids: they are matched by their tabs, so the restart
    sends no op (no ungroup, no new group), and the groups go on syncing both ways after it."""
    server, ws = ext_server, "restart-groups"
    a = bound(profiles("A", cdp=True), server, ws, "alice", [pages.url(n) for n in ("R1", "R2", "R3", "R4")])
    ids = settled(server, ws, a, what="A adopted")
    before = group(a, ids[1:3], "Kept", "green")
    settled(server, ws, a, what="A's group")
    titles_settled(server, ws, ["R1", "R2", "R3", "R4"])
    version = server.snapshot(ws)["version"]
    restart_attached(a)
    settled(server, ws, a, what="converged after the restart")
    assert server.snapshot(ws)["version"] == version, ("the restart sent ops", server_history(server, ws, version))
    after = browser_groups(a)
    assert after[1]["group"] == after[2]["group"] != -1 and after[1]["title"] == "Kept", after
    assert after[1]["group"] != before, "the browser gave the restored group a new id (else this tests nothing)"
    # The matched group is the workspace's: a rename after the restart goes out as an update.
    a.run("await chrome.tabGroups.update(arguments[0], { title: 'Renamed' });", after[1]["group"])
    settled(server, ws, a, what="a rename after the restart")
    assert server_groups(server, ws)[0][1][1] == "Renamed" and server.snapshot(ws)["version"] == version + 1


def test_groups_between_chromium_and_firefox(mixed_server, profiles, firefox, pages):
    """Chromium A and Firefox B (tabGroups from Firefox 138; ESR 153.8 here): a group made in
    Chromium appears in Firefox, Firefox renames, recolours and adds to it, and ungroups a tab."""
    server, ws = mixed_server, "mixed-groups"
    a = bound(profiles("A"), server, ws, "alice", [pages.url(n) for n in ("F1", "F2", "F3", "F4")])
    ids = settled(server, ws, a, what="A adopted")
    b = firefox("B")
    b.new_window(["about:blank"])
    join(b, server, ws, "bob")
    settled(server, ws, a, b, what="Firefox B joined")
    group(a, ids[:2], "Both", "purple")
    settled(server, ws, a, b, what="A's group in Firefox")
    gb = group_of(b, ids[0])
    b.run("await chrome.tabGroups.update(arguments[0], { title: 'Renamed in Firefox', color: 'cyan' });", gb)
    settled(server, ws, a, b, what="Firefox's rename and recolour")
    group(b, [ids[2]], into=gb)
    settled(server, ws, a, b, what="Firefox's add to the group")
    assert server_groups(server, ws)[1] == [ids[:3]]
    b.run("await chrome.tabs.ungroup(arguments[0]);", [b.tab_of(ids[0])])
    settled(server, ws, a, b, what="Firefox's ungroup")
    rows, parts = server_groups(server, ws)
    assert parts == [ids[1:3]] and rows[1][1:] == ["Renamed in Firefox", "cyan"]


def test_a_drag_during_a_pass_is_not_undone(ext_server, profiles, pages):
    """A pass reads the window twice (its local half, then the arrange): a whole-group drag between
    the two reads was put back by the arrange, read as the workspace's order to restore (the
    whole-group drag step failed 3 times in 18 runs so). A collapse and expand start a pass, the
    drag follows 0 to 33 ms later, back and forth, 24 times: each drag reaches the server."""
    server, ws = ext_server, "drag-in-pass"
    a = bound(profiles("A"), server, ws, "alice", [pages.url(n) for n in ("D1", "D2", "D3", "D4", "D5")])
    ids = settled(server, ws, a, what="A adopted")
    ga = group(a, ids[:2], "Moved", "blue")
    settled(server, ws, a, what="A's group")
    undone = []
    for i in range(24):
        rest = [x for x in server.snapshot(ws)["ids"] if x not in ids[:2]]
        to_end = i % 2 == 0
        a.run("""const [g, delay, index] = arguments;
                 await chrome.tabGroups.update(g, { collapsed: true });
                 await chrome.tabGroups.update(g, { collapsed: false });
                 await new Promise((r) => setTimeout(r, delay));
                 await chrome.tabGroups.move(g, { index });""", ga, (i // 2) * 3, -1 if to_end else 0)
        order = settled(server, ws, a, what=f"drag {i}")
        if order != (rest + ids[:2] if to_end else ids[:2] + rest):
            undone.append((i, order))
    assert undone == [], (ids, undone)


@pytest.mark.skipif(os.environ.get("TABSYNC_MEASURE") != "1", reason="a measurement: TABSYNC_MEASURE=1 runs it")
def test_measure_group_rename_window_to_window(ext_server, profiles, pages):
    """Opt-in measurement, no timed assertion: 40 renames of a group in A, each from a settled state,
    timed from just before A's chrome.tabGroups.update to B's tabGroups.onUpdated carrying the new
    title (Date.now() in both: one machine, one clock). Writes group-rename-latency.json."""
    server, ws = ext_server, "rename-latency"
    a = bound(profiles("A"), server, ws, "alice", [pages.url(n) for n in ("M1", "M2", "M3")])
    ids = settled(server, ws, a, what="A adopted")
    b = profiles("B")
    join(b, server, ws, "bob")
    ga = group(a, ids[:2], "N", "blue")
    settled(server, ws, a, b, what="the group in both")
    b.run("""window.renames = [];
             chrome.tabGroups.onUpdated.addListener((g) => renames.push({ title: g.title, t: Date.now() }));""")
    samples = []
    for i in range(40):
        title = f"Name {i}"
        t0 = a.run("const t = Date.now(); await chrome.tabGroups.update(arguments[0], { title: arguments[1] }); return t;", ga, title)
        t1 = wait_for(lambda: min([e["t"] for e in b.run("return window.renames;") if e["title"] == title], default=None),
                      what=f"rename {i} in B")
        samples.append(t1 - t0)
        settled(server, ws, a, b, what=f"rename {i} settled")
    report = {"n": len(samples), "p50_ms": percentile(samples, 50), "p99_ms": percentile(samples, 99), "max_ms": max(samples)}
    write_artifact("group-rename-latency.json", report)
    print(f"group rename A to B: n={report['n']} p50 {report['p50_ms']} ms p99 {report['p99_ms']} ms max {report['max_ms']} ms")
