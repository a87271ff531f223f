"""A shared group (docs/extension.md, "The shared group"): the popup binds one tab group of a
window instead of the whole window, in two headless Chromium profiles on a real tabsync-server.
After each step the test waits until the server and both bound groups agree (the group's tabs in
order, its title and colour), and checks that the windows' private tabs (outside the group) were
never sent, closed or reordered.
"""
import json
import os

from conftest import WAIT, TabsyncServer, submit, wait_for
from test_firefox import firefox, firefox_extension, mixed_server  # noqa: F401 - fixtures
from test_groups import restart_attached, server_groups, server_history, titles_settled
from test_safety import allow_incognito, mint, popup_local_only

GROUP_STRIP = """
    const b = arguments[0];
    const k = 'status:' + b.id;
    const s = (await chrome.storage.session.get(k))[k];
    if (!s) return null;
    const map = new Map(s.map);
    const tabs = (await chrome.tabs.query({ windowId: b.windowId })).sort((x, y) => x.index - y.index);
    const g = b.groupId === null ? null : await chrome.tabGroups.get(b.groupId).catch(() => null);
    const mine = tabs.filter((t) => t.groupId === b.groupId);
    return { status: s.status, version: s.version, pending: s.pending, groupId: b.groupId, window: b.windowId,
             ids: mine.map((t) => map.get(t.id) || null), chromeIds: mine.map((t) => t.id),
             contiguous: mine.length === 0 || mine[mine.length - 1].index - mine[0].index === mine.length - 1,
             title: g ? g.title : null, color: g ? g.color : null, collapsed: g ? g.collapsed : null,
             private: tabs.filter((t) => t.groupId !== b.groupId).map((t) => t.url || t.pendingUrl) };"""


def group_strip(p):
    return p.run(GROUP_STRIP, p.binding())


def agreed(server, ws, *profiles):
    """True when each profile's bound group shows the server's tabs in order, with the title and
    colour of the workspace's first group, contiguous, nothing pending."""
    snap = server.snapshot(ws)
    rows, _ = server_groups(server, ws)
    first = next((r for r in rows if r[1] is not None), None)
    for p in profiles:
        st = group_strip(p)
        if not st or st["status"] != "connected" or st["pending"] != 0 or st["version"] != snap["version"]:
            return False
        if st["ids"] != snap["ids"] or not st["contiguous"]:
            return False
        if first and [st["title"], st["color"]] != first[1:]:
            return False
    return snap


def settle(server, ws, *profiles, what):
    try:
        return wait_for(lambda: agreed(server, ws, *profiles), what=what)
    except AssertionError as error:
        details = [f"server: {server_groups(server, ws)}"] + [f"{p.name}: {group_strip(p)}" for p in profiles]
        raise AssertionError(f"{error}\n" + "\n".join(details)) from None


def bind_group(p, server, ws, name, choice, screenshot=None, token=""):
    """Binds through the popup with "Bind" set to `choice` ("new", or a browser group id)."""
    p.target(p.window)  # the popup lists the window's groups as they are now
    chosen = p.run("""const s = document.getElementById('group'); s.value = arguments[0];
                      s.dispatchEvent(new Event('change')); return s.value;""", str(choice))
    assert chosen == str(choice), "the popup lists the group"
    p.bind(server.ws_url + "/", ws, name, token=token, screenshot=screenshot)
    wait_for(lambda: (p.status() or {}).get("status") == "connected", what=f"{p.name} connected")


def make_group(p, tab_ids, title, color, window_id):
    return p.run("""
        const [tabIds, title, color, windowId] = arguments;
        const id = await chrome.tabs.group({ tabIds, createProperties: { windowId } });
        await chrome.tabGroups.update(id, { title, color });
        return id;""", tab_ids, title, color, window_id)


def window_tabs(p, window_id):
    return p.run("""return (await chrome.tabs.query({ windowId: arguments[0] })).sort((x, y) => x.index - y.index)
        .map((t) => ({ id: t.id, url: t.url || t.pendingUrl, groupId: t.groupId }));""", window_id)


def a_group_of(a, pages, names, title, color):
    """A window of pages `names` in `a`: the first two private (the second in a group of its own),
    then the rest but the last in a group `title`/`color`, then a private last tab. Returns
    (window id, browser group id)."""
    w = a.new_window([pages.url(n) for n in names])
    wait_for(lambda: len(window_tabs(a, w)) == len(names), what=f"{a.name}'s window")
    tabs = window_tabs(a, w)
    make_group(a, [tabs[1]["id"]], "Mine", "green", w)
    return w, make_group(a, [t["id"] for t in tabs[2:-1]], title, color, w)


def join_group(b, server, ws, a, own_page):
    """`b` binds "a new group" in a window with a page of its own: the workspace's group appears in
    that window (not a new one). Returns (window id, b's group strip)."""
    wb = b.new_window([own_page])
    bind_group(b, server, ws, "bob", "new")
    settle(server, ws, a, b, what=f"{b.name}'s group")
    sb = group_strip(b)
    assert sb["window"] == wb, "in the current window, not a new one"
    return wb, sb


def test_a_shared_group_between_two_browsers(ext_server, profiles, pages):
    """Two Chromium profiles: every behaviour of the shared group, step by step (docs/extension.md,
    "Tests of the shared group")."""
    server, ws = ext_server, "shared"
    a = profiles("A")
    wa, ga = a_group_of(a, pages, ("P1", "P2", "One", "Two", "Three", "P3"), "Trip", "blue")
    bind_group(a, server, ws, "alice", ga, screenshot="shared-group-form")
    snap = settle(server, ws, a, what="A's group adopted")
    ids = snap["ids"]
    assert len(ids) == 3
    assert server_groups(server, ws)[1] == [ids], "one workspace group: the shared group"
    urls = [t.get("url", "") for t in server.snapshot(ws)["tabs"]]
    assert not any(n in u for u in urls for n in ("P1", "P2", "P3")), "private tabs are never sent"
    private_a = group_strip(a)["private"]

    # A second browser gets the group in its current window, beside its own tab.
    b = profiles("B")
    wb, sb = join_group(b, server, ws, a, pages.url("Q"))
    assert [sb["title"], sb["color"]] == ["Trip", "blue"]
    assert len(sb["private"]) == 1 and "Q" in sb["private"][0]

    # A tab dragged into the group joins the workspace; B opens it in its group.
    p3 = window_tabs(a, wa)[-1]
    a.run("await chrome.tabs.group({ groupId: arguments[0], tabIds: [arguments[1]] });", ga, p3["id"])
    snap = settle(server, ws, a, b, what="P3 dragged into A's group")
    assert len(snap["ids"]) == 4 and "P3" in server.snapshot(ws)["tabs"][-1]["url"]
    private_a = [u for u in private_a if "P3" not in u]

    # A tab dragged out of B's group leaves the workspace (a remove) and stays open in B.
    out = snap["ids"][1]
    b.run("await chrome.tabs.ungroup([arguments[0]]);", group_strip(b)["chromeIds"][1])
    snap = settle(server, ws, a, b, what="a tab dragged out of B's group")
    assert out not in snap["ids"]
    assert any("Two" in u for u in group_strip(b)["private"]), "B's tab kept, private now"
    assert group_strip(a)["private"] == private_a, "A's private tabs untouched"

    # A rename in A and a recolour in B go to the workspace and to the other browser.
    a.run("await chrome.tabGroups.update(arguments[0], { title: 'Holiday' });", ga)
    settle(server, ws, a, b, what="A's rename")
    assert server_groups(server, ws)[0][0][1:] == ["Holiday", "blue"]
    b.run("await chrome.tabGroups.update(arguments[0], { color: 'red' });", group_strip(b)["groupId"])
    settle(server, ws, a, b, what="B's recolour")
    assert server_groups(server, ws)[0][0][1:] == ["Holiday", "red"]
    a.target(wa)
    wait_for(lambda: "Holiday" in a.popup()["html"], what="A's popup shows the shared group")
    a.screenshot("shared-group")

    # The workspace's own groups: another client splits the last tab into a group of its own.
    # Both browsers keep one group of all the tabs, titled after the first; the server keeps two.
    ids = snap["ids"]
    submit(server, ws, {"group": {"tabIds": [ids[-1]], "groupId": "g-sub", "title": "Sub", "color": "cyan"}})
    settle(server, ws, a, b, what="a second workspace group, flattened")
    assert [len(p) for p in server_groups(server, ws)[1]] == [len(ids) - 1, 1]
    # A tab added at the group's end asks for its left neighbour's group: the server's groups stay two.
    a.run("await chrome.tabs.create({ windowId: arguments[0], index: arguments[1], url: arguments[2] });",
          wa, window_tabs(a, wa).index(next(t for t in window_tabs(a, wa) if t["id"] == group_strip(a)["chromeIds"][-1])) + 1,
          pages.url("Four"))
    wait_for(lambda: any("Four" in (t["url"] or "") for t in window_tabs(a, wa)), what="A's new tab")
    four = next(t for t in window_tabs(a, wa) if "Four" in (t["url"] or ""))
    if four["groupId"] != ga:  # at the group's edge the browser leaves it out: the user adds it
        a.run("await chrome.tabs.group({ groupId: arguments[0], tabIds: [arguments[1]] });", ga, four["id"])
    snap = settle(server, ws, a, b, what="A's tab at the group's end")
    assert [len(p) for p in server_groups(server, ws)[1]] == [len(ids) - 1, 2], "the new tab joined Sub, not a third group"

    # A remote move reorders both groups; private tabs stay where they are.
    submit(server, ws, {"move": {"tabId": snap["ids"][-1], "place": {"index": 0}}})
    settle(server, ws, a, b, what="a remote move")
    assert group_strip(a)["private"] == private_a
    assert len(group_strip(b)["private"]) == 2

    # Closing B's group is closing a bound window: B's binding stops, the workspace keeps its tabs.
    before = server.snapshot(ws)
    b.run("await chrome.tabs.remove(arguments[0]);", group_strip(b)["chromeIds"])
    wait_for(lambda: (b.status() or {}).get("status") == "closed", what="B's binding closed with its group")
    after = server.snapshot(ws)
    assert after["ids"] == before["ids"] and after["version"] == before["version"], "no remove sent"
    assert len(window_tabs(b, wb)) == 2, "B's private tabs stay"
    assert agreed(server, ws, a), "A unchanged"
    # Reopen (the popup's, for a closed binding) brings the group back in B's window.
    b.run("return await chrome.runtime.sendMessage({ type: 'reopen', bindingId: arguments[0] });", b.binding()["id"])
    settle(server, ws, a, b, what="B's group reopened")
    assert group_strip(b)["window"] == wb and len(window_tabs(b, wb)) == 2 + len(after["ids"])


def test_a_group_emptied_by_others_stays_with_a_placeholder(ext_server, profiles, pages):
    """Another client removes every tab of the workspace: A's group closes them and keeps one
    placeholder tab, in the group's place, so the group (and the binding) stays; the private tabs
    stay on their sides; a tab added then opens in the group."""
    server, ws = ext_server, "shared-emptied"
    a = profiles("A")
    wa, ga = a_group_of(a, pages, ("E1", "E2", "K1", "K2", "E3"), "Soon empty", "yellow")
    bind_group(a, server, ws, "alice", ga)
    ids = settle(server, ws, a, what="A's group adopted")["ids"]
    private = group_strip(a)["private"]
    for i in ids:
        submit(server, ws, {"remove": {"tabId": i}})
    wait_for(lambda: len(group_strip(a)["chromeIds"]) == 1 and (a.status() or {}).get("status") == "connected"
             and not any("/p/K" in (t["url"] or "") for t in window_tabs(a, wa)), what="A's group emptied to its placeholder")
    st = group_strip(a)
    assert st["private"] == private and st["ids"] == [None], "the placeholder is not published; private tabs where they were"
    submit(server, ws, {"add": {"tab": {"id": "back", "title": "Back", "url": pages.url("Back")}, "place": {"index": 0}}})
    wait_for(lambda: "back" in group_strip(a)["ids"], what="a tab added after it opens in the group")
    assert group_strip(a)["private"] == private


def test_a_shared_group_between_chromium_and_firefox(mixed_server, profiles, firefox, pages):
    """Chromium A binds a group; Firefox B (tabGroups since 138; ESR 153.8 here) binds "a new group"
    and gets it in its current window; B renames it, drags a tab out and one of its own in, A
    recolours; B closes its group: B's binding closes, the workspace keeps its tabs."""
    server, ws = mixed_server, "shared-mixed"
    a = profiles("A")
    wa, ga = a_group_of(a, pages, ("X1", "X2", "G1", "G2", "G3", "X3"), "Team", "purple")
    bind_group(a, server, ws, "alice", ga)
    settle(server, ws, a, what="A's group adopted")
    private_a = group_strip(a)["private"]
    b = firefox("B")
    wb, sb = join_group(b, server, ws, a, pages.url("FQ"))
    assert [sb["title"], sb["color"]] == ["Team", "purple"]
    b.run("await chrome.tabGroups.update(arguments[0], { title: 'Team (Firefox)' });", sb["groupId"])
    settle(server, ws, a, b, what="Firefox's rename")
    assert server_groups(server, ws)[0][0][1:] == ["Team (Firefox)", "purple"]
    a.run("await chrome.tabGroups.update(arguments[0], { color: 'orange' });", ga)
    settle(server, ws, a, b, what="A's recolour in Firefox")
    ids = server.snapshot(ws)["ids"]
    b.run("await chrome.tabs.ungroup([arguments[0]]);", group_strip(b)["chromeIds"][0])
    snap = settle(server, ws, a, b, what="a tab dragged out of Firefox's group")
    assert snap["ids"] == ids[1:] and len(group_strip(b)["private"]) == 2
    fq = next(t for t in window_tabs(b, wb) if "FQ" in (t["url"] or ""))
    b.run("await chrome.tabs.group({ groupId: arguments[0], tabIds: [arguments[1]] });", sb["groupId"], fq["id"])
    snap = settle(server, ws, a, b, what="Firefox's own tab dragged into its group")
    assert len(snap["ids"]) == 3 and any("FQ" in (t.get("url") or "") for t in server.snapshot(ws)["tabs"])
    assert group_strip(a)["private"] == private_a, "A's private tabs untouched"
    before = server.snapshot(ws)
    b.run("await chrome.tabs.remove(arguments[0]);", group_strip(b)["chromeIds"])
    wait_for(lambda: (b.status() or {}).get("status") == "closed", what="Firefox's binding closed with its group")
    after = server.snapshot(ws)
    assert after["ids"] == before["ids"] and after["version"] == before["version"], "no remove sent"
    assert agreed(server, ws, a)


def test_a_shared_group_survives_a_browser_restart_and_sends_nothing(ext_server, profiles, pages):
    """The browser restores the bound group under a new id: it is matched by its tabs, nothing is
    sent, the private tabs stay private, and a rename after the restart goes out as one update."""
    server, ws = ext_server, "shared-restart"
    a = profiles("A", cdp=True)
    wa, ga = a_group_of(a, pages, ("Y1", "H2", "H1", "H2", "H3", "Y3"), "Kept", "cyan")  # a private H2 left of the group's
    bind_group(a, server, ws, "alice", ga)
    settle(server, ws, a, what="A's group adopted")
    titles_settled(server, ws, ["H1", "H2", "H3"])
    version = server.snapshot(ws)["version"]
    restart_attached(a)
    settle(server, ws, a, what="converged after the restart")
    assert server.snapshot(ws)["version"] == version, "the restart sent ops"
    after = group_strip(a)
    assert after["groupId"] != ga, "the browser gave the restored group a new id (else this tests nothing)"
    assert [after["title"], after["color"]] == ["Kept", "cyan"] and len(after["ids"]) == 3
    assert after["private"] == [pages.url(n) for n in ("Y1", "H2", "Y3")], after["private"]
    a.run("await chrome.tabGroups.update(arguments[0], { title: 'Renamed' });", after["groupId"])
    settle(server, ws, a, what="a rename after the restart")
    assert server_groups(server, ws)[0][0][1] == "Renamed" and server.snapshot(ws)["version"] == version + 1


def test_a_firefox_group_binding_survives_a_firefox_restart(mixed_server, profiles, firefox, pages):
    """Firefox ESR A binds a group (three private tabs beside it, one in a private group of its
    own and showing the same page as a tab of the bound group); Chromium B joins. Firefox is closed as a user quits it and started again on its profile,
    its session restored: the bound group is found by its tabs, nothing is sent, no tab of the window
    is closed or opened twice, the private tabs are untouched, and an edit in either browser still
    reaches the other."""
    server, ws = mixed_server, "shared-ff-restart"
    a = firefox("A", restartable=True)
    wa, ga = a_group_of(a, pages, ("Z1", "F2", "F1", "F2", "F3", "Z3"), "Trek", "orange")
    bind_group(a, server, ws, "alice", ga)
    settle(server, ws, a, what="Firefox's group adopted")
    b = profiles("B")
    join_group(b, server, ws, a, pages.url("BQ"))
    titles_settled(server, ws, ["F1", "F2", "F3"])
    snap = settle(server, ws, a, b, what="both groups")
    version = snap["version"]
    window_before = [(t["url"], t["groupId"] == ga) for t in window_tabs(a, wa)]
    private_groups = a.run("return (await chrome.tabGroups.query({ windowId: arguments[0] })).filter((g) => g.id !== arguments[1])"
                           ".map((g) => [g.title, g.color]);", wa, ga)
    assert private_groups == [["Mine", "green"]]

    a.restart()
    wait_for(lambda: (a.binding() or {}).get("attach") == "" and (a.status() or {}).get("status") == "connected",
             timeout=3 * WAIT, what="Firefox's binding attached again after the restart")
    wa2 = a.binding()["windowId"]
    a.target(wa2)
    after = settle(server, ws, a, b, what="converged after Firefox's restart")
    assert after["version"] == version, ("the restart sent ops", server_history(server, ws, version))
    st = group_strip(a)
    assert [st["title"], st["color"]] == ["Trek", "orange"] and st["ids"] == snap["ids"]
    window_after = [(t["url"], t["groupId"] == st["groupId"]) for t in window_tabs(a, wa2)]
    assert window_after == window_before, "a tab of the window was closed, opened twice or moved"
    assert a.run("return (await chrome.tabGroups.query({ windowId: arguments[0] })).filter((g) => g.id !== arguments[1])"
                 ".map((g) => [g.title, g.color]);", wa2, st["groupId"]) == private_groups, "the private group untouched"
    assert st["private"] == [pages.url(n) for n in ("Z1", "F2", "Z3")], st["private"]
    assert len(a.run("return (await chrome.windows.getAll()).filter((w) => w.id !== arguments[0]).map((w) => w.id);", wa2)) <= 1, \
        "no second window opened for the workspace"

    # The binding goes on working both ways.
    a.run("await chrome.tabGroups.update(arguments[0], { title: 'Trek 2' });", st["groupId"])
    settle(server, ws, a, b, what="Firefox's rename after its restart")
    assert server_groups(server, ws)[0][0][1:] == ["Trek 2", "orange"] and server.snapshot(ws)["version"] == version + 1
    sb = group_strip(b)
    b.run("""const t = await chrome.tabs.create({ windowId: arguments[0], url: arguments[1], index: arguments[2] });
             await chrome.tabs.group({ groupId: arguments[3], tabIds: [t.id] });""",
          sb["window"], pages.url("F4"), len(window_tabs(b, sb["window"])), sb["groupId"])
    snap = settle(server, ws, a, b, what="Chromium's new tab in Firefox's group")
    assert len(snap["ids"]) == 4 and group_strip(a)["private"] == [pages.url(n) for n in ("Z1", "F2", "Z3")]


def on_disk(profile, *needles):
    """The needles found in the profile's extension storage: storage.local as the extension reads
    it, and the files of its local storage folder."""
    local = json.dumps(profile.run("return await chrome.storage.local.get(null);"))
    found = [n for n in needles if n in local]
    folder = os.path.join(profile.profile_dir, "Default", "Local Extension Settings", profile.ext["id"])
    for root, _, files in os.walk(folder):
        for name in files:
            with open(os.path.join(root, name), "rb") as f:
                data = f.read()
            found += [f"{name}: {n}" for n in needles if n.encode() in data]
    return found


def test_a_group_bound_in_a_private_window(ext_server, profiles, pages):
    """Chromium A (the extension allowed in private windows, as the user allows it on
    chrome://extensions) binds a group of a private window, ticking "bind this private window".
    As for a whole private window (docs/extension.md, "Binding rules"): the binding, its group's
    title and its state stay in storage.session, never on disk. The group syncs both ways with B's;
    the private window's other tabs are never sent. Closing the private window is closing a bound
    window (nothing sent); Reopen brings the group back in a new private window."""
    server, ws = ext_server, "shared-private-q8w"
    a = profiles("A", cdp=True)
    allow_incognito(a)
    names = ("S1", "S2", "K1", "K2", "S3")
    wa = a.run("return (await chrome.windows.create({ url: arguments[0], incognito: true, focused: false })).id;",
               [pages.url(n) for n in names])
    wait_for(lambda: len(window_tabs(a, wa)) == len(names), what="the private window's tabs")
    tabs = window_tabs(a, wa)
    make_group(a, [tabs[1]["id"]], "Mine", "green", wa)
    ga = make_group(a, [t["id"] for t in tabs[2:4]], "Secret trip", "red", wa)
    a.target(wa)
    assert "(private)" in a.run("return document.getElementById('window-label').textContent;")
    a.run("""const s = document.getElementById('group'); s.value = arguments[0]; s.dispatchEvent(new Event('change'));""", str(ga))
    a.bind(server.ws_url + "/", ws, "alice", incognito=True)
    wait_for(lambda: (a.status() or {}).get("status") == "connected", what="A's private group bound")
    snap = settle(server, ws, a, what="A's private group adopted")
    assert a.binding()["incognito"] and a.binding()["group"]
    assert len(snap["ids"]) == 2 and server_groups(server, ws)[0][0][1:] == ["Secret trip", "red"]
    assert not any("/p/S" in (t.get("url") or "") for t in server.snapshot(ws)["tabs"]), "a private tab was sent"
    private_a = group_strip(a)["private"]

    b = profiles("B")
    join_group(b, server, ws, a, pages.url("BQ"))
    sb = group_strip(b)
    b.run("""const t = await chrome.tabs.create({ windowId: arguments[0], url: arguments[1], index: arguments[2] });
             await chrome.tabs.group({ groupId: arguments[3], tabIds: [t.id] });""",
          sb["window"], pages.url("K3"), len(window_tabs(b, sb["window"])), sb["groupId"])
    snap = settle(server, ws, a, b, what="B's tab opens in A's private group")
    assert len(snap["ids"]) == 3 and group_strip(a)["private"] == private_a
    a.run("await chrome.tabGroups.update(arguments[0], { title: 'Secret trip 2' });", ga)
    settle(server, ws, a, b, what="A's rename reaches B")
    assert group_strip(b)["title"] == "Secret trip 2"

    # Nothing of the private binding on disk: its id, workspace, group title, pages.
    bid = a.binding()["id"]
    wait_for(lambda: f"resume:{bid}" in a.run("return await chrome.storage.session.get(null);"), what="the resume record (in session)")
    assert on_disk(a, bid, ws, "Secret trip", "/p/K") == []

    # Closing the private window is closing a bound window: nothing sent, the binding closed.
    titles_settled(server, ws, ["K1", "K2", "K3"])  # B's K3 is retitled once its page loads: an op of its own
    before = settle(server, ws, a, b, what="both groups before the close")
    a.run("await chrome.windows.remove(arguments[0]);", wa)
    wait_for(lambda: (a.status() or {}).get("status") == "closed", what="A's binding closed with its window")
    assert server.snapshot(ws)["version"] == before["version"], ("closing the private window sent ops",
                                                                 server_history(server, ws, before["version"]))
    # Reopen brings the group back in a new private window, titled as the workspace's.
    a.run("return await chrome.runtime.sendMessage({ type: 'reopen', bindingId: arguments[0] });", bid)
    wait_for(lambda: (a.status() or {}).get("status") == "connected" and a.binding()["windowId"] != wa, what="A reopened")
    a.target(a.binding()["windowId"])
    settle(server, ws, a, b, what="A's group reopened")
    assert a.run("return (await chrome.windows.get(arguments[0])).incognito;", a.binding()["windowId"]), "reopened in a private window"
    st = group_strip(a)
    assert st["title"] == "Secret trip 2" and st["private"] == [] and server.snapshot(ws)["version"] == before["version"]
    assert on_disk(a, bid, ws, "Secret trip", "/p/K") == []


def viewer_agrees(server, ws, v):
    """The viewer's group shows the server's tabs in order (its local-only tabs aside), nothing pending."""
    snap = server.snapshot(ws)
    st = group_strip(v)
    if not st or st["status"] != "connected" or st["pending"] != 0 or st["version"] != snap["version"]:
        return False
    return st["contiguous"] and [i for i in st["ids"] if i is not None] == snap["ids"] and st


def test_a_viewers_group_binding(extension, profiles, pages, tmp_path):
    """A viewer's token binds a group (docs/extension.md, "The shared group"): the workspace opens as
    a group of its own in the viewer's window (the group the viewer chose is never merged into, never
    sent); a tab the viewer drags into the group or opens in it stays open there, local only, never
    sent; the viewer's rename stays local, is not undone by sync, and gives way to the workspace's
    next rename; the window's private tabs are never touched."""
    key = tmp_path / "team.key"
    key.write_text("s3cret-" * 8 + "\n")
    server = TabsyncServer(extension["origin"], "--auth-key-file", str(key))
    try:
        ws = "shared-viewer"
        server.read_token = mint(key, ws, "admin", "root")
        a = profiles("A")
        wa, ga = a_group_of(a, pages, ("W1", "W2", "J1", "J2", "J3", "W3"), "Trip", "blue")
        bind_group(a, server, ws, "alice", ga, token=mint(key, ws, "editor", "alice"))
        snap = settle(server, ws, a, what="A's group adopted")

        v = profiles("V")
        wv = v.new_window([pages.url("VQ"), pages.url("VM")])
        wait_for(lambda: len(window_tabs(v, wv)) == 2, what="V's window")
        mine = make_group(v, [window_tabs(v, wv)[1]["id"]], "Mine V", "green", wv)
        bind_group(v, server, ws, "viewer", mine, token=mint(key, ws, "viewer", "vera"))
        wait_for(lambda: viewer_agrees(server, ws, v), what="the workspace opens as a group in V's window")
        st = group_strip(v)
        assert st["window"] == wv and st["groupId"] != mine, "a group of its own, in V's window"
        assert [st["title"], st["color"]] == ["Trip", "blue"]
        private_v = [(t["url"], t["groupId"]) for t in window_tabs(v, wv) if t["groupId"] != st["groupId"]]
        assert private_v == [(pages.url("VQ"), -1), (pages.url("VM"), mine)], "V's own tabs and group untouched"
        assert server.snapshot(ws)["version"] == snap["version"], "the viewer sent something"

        # A tab dragged into the group, and one opened in it, stay open there, local only.
        vq = window_tabs(v, wv)[0]["id"]
        v.run("await chrome.tabs.group({ groupId: arguments[0], tabIds: [arguments[1]] });", st["groupId"], vq)
        v.run("""const t = await chrome.tabs.create({ windowId: arguments[0], url: arguments[1], index: arguments[2] });
                 await chrome.tabs.group({ groupId: arguments[3], tabIds: [t.id] });""",
              wv, pages.url("VNew"), len(window_tabs(v, wv)), st["groupId"])
        v.target(wv)
        wait_for(lambda: sorted(popup_local_only(v)) and all(any(n in x for x in popup_local_only(v)) for n in ("VQ", "VNew")),
                 what="both listed local only")
        st = wait_for(lambda: viewer_agrees(server, ws, v), what="V's group with its local-only tabs")
        assert sum(i is None for i in st["ids"]) == 2, st
        assert server.snapshot(ws)["version"] == snap["version"], "a viewer's tab was sent"

        # A's edits still reach the viewer's group; the local-only tabs stay in it.
        a.run("await chrome.tabs.create({ windowId: arguments[0], index: arguments[1], url: arguments[2] });",
              wa, 5, pages.url("J4"))
        j4 = wait_for(lambda: next((t for t in window_tabs(a, wa) if "J4" in (t["url"] or "")), None), what="A's J4")
        if j4["groupId"] != ga:
            a.run("await chrome.tabs.group({ groupId: arguments[0], tabIds: [arguments[1]] });", ga, j4["id"])
        snap = settle(server, ws, a, what="A's J4")
        st = wait_for(lambda: viewer_agrees(server, ws, v), what="J4 in V's group")
        assert len(st["ids"]) == 6 and sum(i is None for i in st["ids"]) == 2

        # The viewer's rename stays local: not sent, not undone by the next sync.
        v.run("await chrome.tabGroups.update(arguments[0], { title: 'My copy', color: 'pink' });", st["groupId"])
        a.run("await chrome.tabs.update(arguments[0], { url: arguments[1] });", window_tabs(a, wa)[2]["id"], pages.url("J1b"))
        snap = wait_for(lambda: any("J1b" in (t.get("url") or "") for t in server.snapshot(ws)["tabs"]) and server.snapshot(ws),
                        what="A's navigation reached the server")
        st = wait_for(lambda: viewer_agrees(server, ws, v), what="V synced after its rename")
        assert [st["title"], st["color"]] == ["My copy", "pink"], "the viewer's rename was undone"
        assert server_groups(server, ws)[0][0][1:] == ["Trip", "blue"], "the viewer's rename was sent"
        # The workspace's next rename is news: the viewer's group shows it.
        a.run("await chrome.tabGroups.update(arguments[0], { title: 'Holiday' });", ga)
        wait_for(lambda: server_groups(server, ws)[0][0][1] == "Holiday", what="A's rename on the server")
        wait_for(lambda: (group_strip(v) or {}).get("title") == "Holiday", what="the workspace's rename in V's group")
        assert group_strip(v)["color"] == "blue"
        assert [(t["url"], t["groupId"]) for t in window_tabs(v, wv) if t["groupId"] != st["groupId"]] == private_v[1:], \
            "V's private group touched"
        assert server.snapshot(ws)["version"] == snap["version"] + 1
    finally:
        server.stop()
