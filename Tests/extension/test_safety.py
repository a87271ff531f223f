"""The extension's safety contract (docs/extension.md, "The contract"), one test per rule, in two
headless Chromium profiles against a real tabsync-server:

a user's real tabs are the user's data. Sync closes a real tab only because a remote `remove` of
that tab's workspace id (or a remote `replace` that drops it) was applied after the tab was mapped.
Nothing else — a refusal, a rollback, a lost or restored server, a browser or worker restart, an
extension update, a reconnect — closes a tab, opens one twice, or publishes a tab of a window the
user did not bind.

Each test names the situation of issue 29 it covers; each was seen to fail with its rule taken out
(docs/extension.md, "Tests", says how). Every wait has a deadline; a claim that something does *not*
happen is watched for a bounded time longer than the client's longest reconnect back-off (5 s).
"""
import json
import os
import subprocess
import time
import urllib.request

from conftest import WAIT, TabsyncServer, submit, wait_for, web_conftest
from test_extension import bound, join, quiet, titles


def window_urls(profile, window_id):
    return profile.run("""return (await chrome.tabs.query({ windowId: arguments[0] }))
        .sort((a, b) => a.index - b.index).map((t) => t.url || t.pendingUrl);""", window_id)


def all_urls(profile):
    return profile.run("return (await chrome.tabs.query({})).map((t) => t.url || t.pendingUrl);")


def metric(server, name):
    """The sum of the series `name` (over its labels, if any) on the server's /metrics."""
    _, _, body = server.get("/metrics")
    total = 0
    for line in body.decode().splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            total += float(line.rsplit(" ", 1)[1])
    return total


def stays(predicate, seconds, what):
    """Checks that `predicate` holds throughout `seconds` (a claim that something does not happen)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert predicate(), what
        time.sleep(0.25)


def set_session(profile, **values):
    profile.run("await chrome.storage.session.set(arguments[0]);", values)


def offline(profile, on):
    """Cuts (or restores) every connection of the profile's extension, as a lost network does."""
    set_session(profile, offline=on)
    if on:
        wait_for(lambda: (profile.status() or {}).get("status") != "connected", what=f"{profile.name} offline")


def popup_local_only(profile):
    return profile.run("return [...document.querySelectorAll('#local-list li')].map((e) => e.textContent);")


# ---------------------------------------------------------------------------------------- refusals


def mint(key, workspace, role, sub):
    return subprocess.run([os.path.join(web_conftest.BIN, "tabsync-server"), "token",
                           "--auth-key-file", str(key), "--workspace", workspace, "--role", role, "--sub", sub],
                          capture_output=True, text=True, check=True).stdout.strip()


def test_a_view_only_token_never_adopts_and_closes_nothing(extension, profiles, pages, tmp_path):
    """Row 1: a window of 3 pages bound with a viewer's token to an empty workspace."""
    key = tmp_path / "team.key"
    key.write_text("s3cret-" * 8 + "\n")
    server = TabsyncServer(extension["origin"], "--auth-key-file", str(key))
    try:
        ws = "viewonly"
        token = mint(key, ws, "viewer", "bob")
        a = profiles("A")
        first = a.new_window([pages.url("V1"), pages.url("V2"), pages.url("V3")])
        a.bind(server.ws_url + "/", ws, "bob", token=token)
        wait_for(lambda: (a.binding() or {}).get("windowId") not in (None, first), what="the read-only mirror's own window")
        mirror = a.binding()["windowId"]
        a.target(mirror)
        wait_for(lambda: "read-only mirror" in a.run("return document.getElementById('note').textContent"),
                 what="the popup says read-only mirror")
        # The user's window keeps its three pages; nothing was published.
        assert window_urls(a, first) == [pages.url("V1"), pages.url("V2"), pages.url("V3")]
        admin = mint(key, ws, "admin", "root")
        request = urllib.request.Request(f"{server.http_url}/v1/workspaces/{ws}", headers={"Authorization": f"Bearer {admin}"})
        try:
            urllib.request.urlopen(request, timeout=10)
            raise AssertionError("the viewer's window was published")
        except urllib.error.HTTPError as error:
            assert error.code == 404
        # A tab the viewer opens in the mirror stays open, local only.
        a.open_tab(pages.url("Mine"))
        wait_for(lambda: any(t.startswith("Mine") for t in popup_local_only(a)), what="the viewer's tab listed as local only")
        assert pages.url("Mine") in window_urls(a, mirror)
        assert "only view" in popup_local_only(a)[0]
        badge_tab = a.run("return (await chrome.tabs.query({ windowId: arguments[0], active: true }))[0].id;", mirror)
        wait_for(lambda: "!" in a.run("return await chrome.action.getBadgeText({ tabId: arguments[0] });", badge_tab),
                 what="the badge says the window is not fully shared")
        # Item 8: the token was not written to disk (not remembered).
        assert a.run("return (await chrome.storage.local.get('bindings')).bindings")[a.binding()["id"]]["token"] == ""
        a.screenshot("popup-view-only")
    finally:
        server.stop()


def test_a_tab_opened_in_a_read_only_workspace_stays_open_as_local_only(ext_server, profiles, pages):
    """Row 2: the tab stays; the popup says why (not "closed by someone else")."""
    server, ws = ext_server, "readonly"
    for name in ("R1", "R2"):
        server.cli(ws, "add", "--title", name, "--url", pages.url(name))
    submit(server, ws, {"setEditable": {"editable": False}})
    b = profiles("B")
    join(b, server, ws, "bob")
    snap = quiet(server, ws, b, what="B mirrors the read-only workspace")
    b.open_tab(pages.url("Extra"))
    wait_for(lambda: any(t.startswith("Extra") for t in popup_local_only(b)), what="the new tab listed as local only")
    stays(lambda: pages.url("Extra") in window_urls(b, b.binding()["windowId"]), 3, "the refused tab was closed")
    assert server.snapshot(ws)["ids"] == snap["ids"]
    assert "read-only" in popup_local_only(b)[0]
    assert "closed by someone else" not in b.popup()["why"]
    b.screenshot("popup-read-only-local-tab")


def test_a_tab_refused_because_the_workspace_is_full_stays_open(extension, profiles, pages):
    """Item 1: LIMIT_EXCEEDED leaves the tab open, local only, and the popup says the workspace is full."""
    server = TabsyncServer(extension["origin"], "--max-tabs", "3")
    try:
        ws = "full"
        a = bound(profiles("A"), server, ws, "alice", [pages.url("F1"), pages.url("F2"), pages.url("F3")])
        quiet(server, ws, a)
        a.open_tab(pages.url("F4"))
        wait_for(lambda: any(t.startswith("F4") for t in popup_local_only(a)), what="F4 listed as local only")
        assert "full" in popup_local_only(a)[0]
        assert "F4" in a.popup()["why"] and "this window only" in a.popup()["why"]
        stays(lambda: pages.url("F4") in window_urls(a, a.binding()["windowId"]), 3, "the refused tab was closed")
        assert len(server.snapshot(ws)["ids"]) == 3
        a.screenshot("popup-local-only")
    finally:
        server.stop()


# ------------------------------------------------------------------------ lost or replaced server


def test_a_server_that_lost_its_data_does_not_empty_the_windows(extension, profiles, pages):
    """Row 3: a --memory server restarted (workspace gone, new epoch): the windows keep their tabs
    and publish them again (same ids), nothing closed, nothing doubled."""
    server = TabsyncServer(extension["origin"], "--memory")
    try:
        ws = "lost"
        a = bound(profiles("A"), server, ws, "alice", [pages.url("L1"), pages.url("L2"), pages.url("L3")])
        b = profiles("B")
        join(b, server, ws, "bob")
        snap = quiet(server, ws, a, b)
        server.restart()
        after = quiet(server, ws, a, b, what="republished into the new epoch")
        assert sorted(after["ids"]) == sorted(snap["ids"]) and sorted(titles(server, ws)) == ["L1", "L2", "L3"]
        for p in (a, b):
            urls = window_urls(p, p.binding()["windowId"])
            assert sorted(urls) == sorted(pages.url(n) for n in ("L1", "L2", "L3")), (p.name, urls)
    finally:
        server.stop()


def test_a_new_history_with_other_tabs_pauses_and_asks(extension, profiles, pages):
    """Item 3: a new epoch whose workspace holds other tabs pauses the mirror (nothing closed) and
    the popup asks; "Publish this window again" makes the union."""
    server = TabsyncServer(extension["origin"], "--memory")
    try:
        ws = "replaced"
        a = bound(profiles("A"), server, ws, "alice", [pages.url("P1"), pages.url("P2"), pages.url("P3")])
        quiet(server, ws, a)
        offline(a, True)
        server.restart()
        server.cli(ws, "add", "--title", "Other", "--url", pages.url("Other"))
        offline(a, False)
        wait_for(lambda: (a.status() or {}).get("status") == "paused", what="A paused")
        a.target(a.binding()["windowId"])
        wait_for(lambda: a.run("return !document.getElementById('pause-actions').hidden"), what="the popup asks")
        assert "nothing was closed" in a.popup()["why"]
        a.screenshot("popup-paused-new-epoch")
        stays(lambda: len(window_urls(a, a.binding()["windowId"])) == 3, 3, "a paused window lost a tab")
        assert titles(server, ws) == ["Other"]
        a.run("document.getElementById('publish-again').click();")
        snap = quiet(server, ws, a, what="the union published")
        assert sorted(titles(server, ws)) == ["Other", "P1", "P2", "P3"] and len(snap["ids"]) == 4
    finally:
        server.stop()


def test_many_tabs_gone_from_a_snapshot_pause_the_mirror(extension, profiles, pages):
    """Item 3's brake: a snapshot of the same history missing more than 5 tabs and more than half
    of the window, with no op seen removing them, closes nothing until the user says so."""
    server = TabsyncServer(extension["origin"], "--max-resume-ops", "2")
    try:
        ws = "brake"
        names = [f"K{i}" for i in range(8)]
        a = bound(profiles("A"), server, ws, "alice", [pages.url(n) for n in names])
        snap = quiet(server, ws, a)
        offline(a, True)
        for tab_id in snap["ids"][2:]:
            server.cli(ws, "rm", tab_id)
        offline(a, False)
        wait_for(lambda: (a.status() or {}).get("status") == "paused", what="the brake paused A")
        stays(lambda: len(window_urls(a, a.binding()["windowId"])) == 8, 3, "the brake let tabs close")
        a.target(a.binding()["windowId"])
        wait_for(lambda: a.run("return !document.getElementById('pause-actions').hidden"), what="the popup asks")
        a.run("document.getElementById('use-server').click();")
        after = quiet(server, ws, a, what="closed once the user said so")
        assert after["ids"] == snap["ids"][:2]
    finally:
        server.stop()


# ------------------------------------------------------------------------ a closed window


def test_a_closed_bound_window_stays_closed_when_the_server_restarts(ext_server, profiles, pages):
    """Row 4 (item 5)."""
    server, ws = ext_server, "closed"
    a = bound(profiles("A"), server, ws, "alice", [pages.url("C1"), pages.url("C2")])
    snap = quiet(server, ws, a)
    a.run("await chrome.windows.remove(arguments[0]);", a.binding()["windowId"])
    wait_for(lambda: a.binding()["attach"] == "reattach", what="the binding detached")
    server.restart()
    stays(lambda: pages.url("C1") not in all_urls(a) and metric(server, "tabsync_connections") == 0, 8,
          "the closed window came back (or reconnected) by itself")
    assert server.snapshot(ws)["ids"] == snap["ids"]


# ------------------------------------------------------------------------ identity across restarts


def test_two_browser_restarts_add_nothing_and_reopen_nothing(ext_server, profiles, pages):
    """Row 5 (item 4): a window of two pages and one blank tab, the browser restarted twice."""
    server, ws = ext_server, "twice"
    a = bound(profiles("A", cdp=True), server, ws, "alice", [pages.url("T1"), pages.url("T2"), "about:blank"])
    snap = quiet(server, ws, a)
    assert len(snap["ids"]) == 3
    for round_ in (1, 2):
        boots = a.run("return (await chrome.storage.session.get('boots')).boots || 0;")
        session_saved_after(a, time.time())
        a.restart()
        wait_for(lambda: (a.binding() or {}).get("attach") == "" and (a.status() or {}).get("status") == "connected",
                 timeout=2 * WAIT, what=f"attached again after restart {round_}")
        assert boots >= 1
        a.target(a.binding()["windowId"])
        after = quiet(server, ws, a, what=f"converged after restart {round_}")
        assert after["ids"] == snap["ids"], f"restart {round_}: {len(snap['ids'])} -> {len(after['ids'])} tabs"
        urls = all_urls(a)
        assert urls.count(pages.url("T1")) == 1 and urls.count(pages.url("T2")) == 1, urls


def test_a_window_of_one_tab_is_attached_again_after_a_restart(ext_server, profiles, pages):
    """Row 5 (item 4), one tab: the restored window has one URL (new tab ids), below the 2-tab floor
    of the URL rule; it shows exactly the page this browser had, so it is the bound window. The
    chaos test met it opened a second time in a new window beside the restored one."""
    server, ws = ext_server, "one-tab"
    a = bound(profiles("A", cdp=True), server, ws, "alice", [pages.url("Solo")])
    snap = quiet(server, ws, a)
    assert len(snap["ids"]) == 1
    session_saved_after(a, time.time())
    a.restart()
    wait_for(lambda: (a.binding() or {}).get("attach") == "" and (a.status() or {}).get("status") == "connected",
             timeout=2 * WAIT, what="attached again after the restart")
    a.target(a.binding()["windowId"])
    after = quiet(server, ws, a, what="converged after the restart")
    assert after["ids"] == snap["ids"]
    urls = all_urls(a)
    assert urls.count(pages.url("Solo")) == 1, urls


def session_saved_after(profile, since):
    """Waits until Chromium wrote its session file after `since` (it saves on a timer): what a
    restart restores is then the windows open now."""
    folder = os.path.join(profile.profile_dir, "Default", "Sessions")

    def saved():
        return any(os.path.getmtime(os.path.join(folder, n)) > since for n in os.listdir(folder))
    wait_for(saved, what="the browser saved its session")


def test_a_window_that_was_never_bound_is_never_published(ext_server, profiles, pages):
    """Item 4: after a restart, a binding whose window was closed looks for that window only (the
    browser may have restored it); a window holding 2 of its 3 URLs (under 80%) and a page of its
    own is not it: nothing of that window reaches the workspace and the binding stays closed."""
    server, ws = ext_server, "stranger"
    a = bound(profiles("A", cdp=True), server, ws, "alice", [pages.url("S1"), pages.url("S2"), pages.url("S3")])
    snap = quiet(server, ws, a)
    stranger = a.run("return (await chrome.windows.create({ url: arguments[0], focused: false })).id;",
                     [pages.url("S1"), pages.url("S2"), pages.url("Private")])
    assert stranger != a.binding()["windowId"]
    wait_for(lambda: a.run("return (await chrome.tabs.query({ windowId: arguments[0] })).every((t) => t.status === 'complete');",
                            stranger), what="the other window loaded")
    a.run("await chrome.windows.remove(arguments[0]);", a.binding()["windowId"])
    wait_for(lambda: a.binding()["closed"], what="the binding closed")
    session_saved_after(a, time.time())
    a.restart()
    try:
        wait_for(lambda: pages.url("Private") in all_urls(a), timeout=2 * WAIT, what="the browser restored the other window")
    except AssertionError as error:
        raise AssertionError(f"{error}: {all_urls(a)}") from None
    stays(lambda: a.binding()["closed"] and server.snapshot(ws)["ids"] == snap["ids"], 12,
          "a window that was never bound was attached or published")
    assert "Private" not in titles(server, ws)


def test_offline_edits_survive_a_browser_restart(ext_server, profiles, pages):
    """Item 7: the outbox is kept in storage.local and sent on the next Welcome, exactly once."""
    server, ws = ext_server, "outbox"
    a = bound(profiles("A", cdp=True), server, ws, "alice", [pages.url("O1"), pages.url("O2"), pages.url("O3")])
    snap = quiet(server, ws, a)
    offline(a, True)
    a.open_tab(pages.url("O4"))
    wait_for(lambda: a.strip()["pending"] >= 1, what="the open pending")
    a.close(snap["ids"][1])
    wait_for(lambda: a.strip()["pending"] >= 2, what="the close pending")
    session_saved_after(a, time.time())
    a.restart()  # storage.session (and its "offline" switch) is gone: the browser is online again
    wait_for(lambda: (a.binding() or {}).get("attach") == "" and (a.status() or {}).get("status") == "connected",
             timeout=2 * WAIT, what="attached again after the restart")
    a.target(a.binding()["windowId"])
    try:
        wait_for(lambda: sorted(titles(server, ws)) == ["O1", "O3", "O4"], what="the offline edits applied")
    except AssertionError as error:
        raise AssertionError(f"{error}\nserver: {server.snapshot(ws)}\nA: {a.status()}") from None
    after = quiet(server, ws, a, what="converged after the restart")
    assert len(after["ids"]) == 3 and len(set(after["ids"])) == 3
    urls = all_urls(a)
    assert urls.count(pages.url("O4")) == 1 and pages.url("O2") not in urls, urls


# ------------------------------------------------------------------------ transient refusals


def test_rate_limited_removes_are_retried_not_rolled_back(extension, profiles, pages):
    """Item 2 (the extension's side): with its pacing off, 10 closes at once meet RATE_LIMITED;
    they are sent again until they land, and no closed tab is reopened."""
    server = TabsyncServer(extension["origin"], "--max-ops-per-second", "5")
    try:
        ws = "retry"
        a = bound(profiles("A"), server, ws, "alice", [pages.url(f"Q{i}") for i in range(12)])
        quiet(server, ws, a)
        set_session(a, pacing=False)
        a.run("await chrome.tabs.remove(arguments[0]);", a.strip()["chromeIds"][2:])
        snap = quiet(server, ws, a, what="the removes landed")
        assert len(snap["ids"]) == 2
        assert metric(server, 'tabsync_ops_rejected_total{code="RATE_LIMITED"}') > 0, "no RATE_LIMITED: the test proves nothing"
        assert len(window_urls(a, a.binding()["windowId"])) == 2, "a closed tab was reopened"
    finally:
        server.stop()


# ------------------------------------------------------------------------ navigation


def test_navigation_follows_and_never_overrides_a_local_one(ext_server, profiles, pages):
    """Row 6 (item 6)."""
    server, ws = ext_server, "navigate"
    a = bound(profiles("A"), server, ws, "alice", [pages.url("N1"), pages.url("N2")])
    b = profiles("B")
    join(b, server, ws, "bob")
    snap = quiet(server, ws, a, b)
    # A follows a link in the first tab: B's tab goes there too.
    a.run("await chrome.tabs.update(arguments[0], { url: arguments[1] });", a.tab_of(snap["ids"][0]), pages.url("N1-next"))
    wait_for(lambda: b.strip()["urls"][b.strip()["ids"].index(snap["ids"][0])] == pages.url("N1-next"), what="B follows A's link")
    quiet(server, ws, a, b)
    # B's user navigates the second tab twice (the second update waits out the 5 s calm); a URL
    # set meanwhile by someone else does not take B's tab away from where its user went. The
    # check needs the second navigation inside the calm: on a machine too slow for that, again.
    second = snap["ids"][1]
    url_of = lambda: next(t for t in server.snapshot(ws)["tabs"] if t["id"] == second).get("url")  # noqa: E731
    for attempt in range(3):
        mine1, mine2, theirs = (pages.url(f"{n}-{attempt}") for n in ("Mine1", "Mine2", "Theirs"))
        b.run("await chrome.tabs.update(arguments[0], { url: arguments[1] });", b.tab_of(second), mine1)
        wait_for(lambda: url_of() == mine1, what="B's first navigation published")
        published = time.monotonic()
        b.run("await chrome.tabs.update(arguments[0], { url: arguments[1] });", b.tab_of(second), mine2)
        submit(server, ws, {"update": {"tabId": second, "url": theirs}})
        if time.monotonic() - published < 2.5:
            break
        quiet(server, ws, a, b)
    wait_for(lambda: url_of() == mine2, timeout=2 * WAIT, what="B's own navigation published after the calm")
    assert theirs not in b.strip()["urls"]
    wait_for(lambda: a.strip()["urls"][a.strip()["ids"].index(second)] == mine2, what="A follows B")


def test_a_flashing_page_makes_at_most_one_update_per_5_seconds(ext_server, profiles, pages):
    """Item 6: a page retitling itself every 600 ms (each title resting past the 400 ms debounce)
    for 6 s makes at most 3 updates, not 10."""
    server, ws = ext_server, "calm"
    a = bound(profiles("A"), server, ws, "alice", [pages.url("Inbox")])
    snap = quiet(server, ws, a)
    before = snap["version"]
    flashes = [("(1) New message" if i % 2 == 0 else "Inbox") for i in range(9)] + ["(2) Inbox"]
    a.retitle(snap["ids"][0], *flashes, gap_ms=600)
    wait_for(lambda: server.snapshot(ws)["tabs"][0].get("badge") == "2", timeout=2 * WAIT, what="the last title")
    after = quiet(server, ws, a)
    assert after["version"] - before <= 3, f"{after['version'] - before} updates in 6 s"


# ------------------------------------------------------------------------ the rest of the family


def test_pinning_a_tab_takes_it_out_of_the_workspace_and_keeps_it_open(ext_server, profiles, pages):
    """Item 8's pinned-tab policy: pinned tabs are local. Pinning a shared tab removes it from the
    workspace (the other windows close their copy) and keeps it open here; unpinning shares it again."""
    server, ws = ext_server, "pin"
    a = bound(profiles("A"), server, ws, "alice", [pages.url("Pin1"), pages.url("Pin2"), pages.url("Pin3")])
    b = profiles("B")
    join(b, server, ws, "bob")
    snap = quiet(server, ws, a, b)
    pinned = snap["ids"][1]
    chrome_id = a.tab_of(pinned)
    a.run("await chrome.tabs.update(arguments[0], { pinned: true });", chrome_id)
    after = quiet(server, ws, a, b, what="the pinned tab left the workspace")
    assert pinned not in after["ids"] and len(after["ids"]) == 2
    assert pages.url("Pin2") in window_urls(a, a.binding()["windowId"])
    a.target(a.binding()["windowId"])
    wait_for(lambda: any("pinned" in t for t in popup_local_only(a)), what="listed as local only, pinned")
    a.run("await chrome.tabs.update(arguments[0], { pinned: false });", chrome_id)
    wait_for(lambda: "Pin2" in titles(server, ws), what="shared again once unpinned")
    quiet(server, ws, a, b)
    assert all_urls(b).count(pages.url("Pin2")) == 1
    # Pinned and unpinned at once in A, then pinned in B (found by scripts/extension-chaos 6 20):
    # it leaves the workspace each time.
    a.run("await chrome.tabs.update(arguments[0], { pinned: true });", chrome_id)
    wait_for(lambda: "Pin2" not in titles(server, ws), what="pinned: out")
    a.run("await chrome.tabs.update(arguments[0], { pinned: false });", chrome_id)
    wait_for(lambda: "Pin2" in titles(server, ws), what="unpinned: back")
    quiet(server, ws, a, b)
    # B saw the remove and the add in quick succession (its copy stayed open); B pins it now.
    b.run("await chrome.tabs.update(arguments[0], { pinned: true });", b.tab_of(pinned))
    wait_for(lambda: "Pin2" not in titles(server, ws), what="the tab B pinned left the workspace")
    quiet(server, ws, a, b)
    assert pages.url("Pin2") not in a.strip()["urls"] and pages.url("Pin2") in window_urls(b, b.binding()["windowId"])


def test_a_token_never_goes_over_plain_ws_to_another_host(extension, profiles, pages):
    """Item 8: the popup says to use wss://, and nothing is bound."""
    a = profiles("A")
    a.new_window([pages.url("Secret")])
    a.bind("ws://192.0.2.1:7070/", "team", "alice", token="a.b.c")
    wait_for(lambda: "wss://" in a.popup()["error"], what="the popup says to use wss://")
    assert a.binding() is None


def test_a_replaced_tab_keeps_its_workspace_tab(ext_server, profiles, pages):
    """Item 8: tabs.onReplaced keeps the mapping (no remove + add). Chromium fires onReplaced when
    a discarded tab gets a new id (chrome.tabs.discard), as for a prerendered page swapped in: the
    new id takes the old one's workspace tab, and nothing reaches the server or B."""
    server, ws = ext_server, "replaced-tab"
    a = bound(profiles("A"), server, ws, "alice", [pages.url("D1"), pages.url("D2"), pages.url("D3")])
    b = profiles("B")
    join(b, server, ws, "bob")
    snap = quiet(server, ws, a, b)
    first = snap["ids"][0]
    old = a.tab_of(first)
    a.activate(snap["ids"][1])
    quiet(server, ws, a, b, what="D2 active")
    a.run("window.replaced = []; chrome.tabs.onReplaced.addListener((added, removed) => replaced.push([added, removed]));")
    new = a.run("return (await chrome.tabs.discard(arguments[0])).id;", old)
    assert new != old, "the discard kept the tab's id: onReplaced was not exercised"
    wait_for(lambda: a.run("return window.replaced;") == [[new, old]], what="Chrome fired onReplaced")
    version = server.snapshot(ws)["version"]
    stays(lambda: server.snapshot(ws)["version"] == version and server.snapshot(ws)["ids"] == snap["ids"], 6,
          "the replaced tab was removed and added again")
    assert dict(a.status()["map"]).get(new) == first, "the new tab id is not mapped to the same workspace tab"
    after = quiet(server, ws, a, b)
    assert after["ids"] == snap["ids"] and all_urls(b).count(pages.url("D1")) == 1


def test_a_token_not_remembered_is_gone_after_a_browser_restart_and_a_remembered_one_is_kept(extension, profiles, pages, tmp_path):
    """Item 8: the token lives in storage.session unless "remember" is ticked. After a browser
    restart the binding without it stops and asks for it again; the one with it connects."""
    key = tmp_path / "team.key"
    key.write_text("s3cret-" * 8 + "\n")
    server = TabsyncServer(extension["origin"], "--auth-key-file", str(key))
    try:
        results = {}
        for name, remember in (("A", False), ("C", True)):
            ws = f"token-{name.lower()}"
            p = profiles(name, cdp=True)
            p.new_window([pages.url(f"{name}1"), pages.url(f"{name}2")])
            p.bind(server.ws_url + "/", ws, name, token=mint(key, ws, "editor", name), remember=remember)
            wait_for(lambda: (p.status() or {}).get("status") == "connected" and p.status()["version"] >= 1
                     and p.status()["pending"] == 0, what=f"{name} adopted (the server's snapshot needs a token)")
            on_disk = p.run("return (await chrome.storage.local.get('bindings')).bindings")[p.binding()["id"]]["token"]
            assert bool(on_disk) == remember, f"{name}: token on disk: {on_disk!r}"
            session_saved_after(p, time.time())
            p.restart()
            results[name] = p
        a, c = results["A"], results["C"]
        wait_for(lambda: "enter it again" in ((a.status() or {}).get("stopped") or ""), timeout=2 * WAIT,
                 what="A (not remembered) asks for its token again")
        wait_for(lambda: (c.status() or {}).get("status") == "connected" and c.binding()["attach"] == "", timeout=2 * WAIT,
                 what="C (remembered) connected again")
        assert a.binding()["token"] == "" and c.binding()["token"]
        c.target(c.binding()["windowId"])
        assert c.strip()["ids"] == [x for x in c.strip()["ids"] if x] and len(c.strip()["ids"]) == 2
        stays(lambda: (a.status() or {}).get("status") == "stopped", 2, "A reconnected without its token")
    finally:
        server.stop()


def all_bindings(profile):
    return profile.run("""const l = (await chrome.storage.local.get('bindings')).bindings || {};
                          const s = (await chrome.storage.session.get('privateBindings')).privateBindings || {};
                          return Object.values({ ...l, ...s });""")


def test_two_bind_requests_at_once_never_claim_one_window(ext_server, profiles, pages):
    """Item 4: two bind requests for one window at once (two clicks, two popups): one binds, the
    other is told the window is bound."""
    server = ext_server
    a = profiles("A")
    window = a.new_window([pages.url("W1"), pages.url("W2")])
    replies = a.run("""const req = (ws) => chrome.runtime.sendMessage({ type: 'bind', windowId: arguments[0], server: arguments[1],
                                                                       workspace: ws, name: 'a', token: '', mode: 'follow' });
                       return await Promise.all([req('race-1'), req('race-2')]);""", window, server.ws_url + "/")
    assert sum(1 for r in replies if r.get("bindingId")) == 1 and any("already bound" in (r.get("error") or "") for r in replies), replies
    wait_for(lambda: (a.status() or {}).get("status") == "connected", what="the one binding connected")
    assert [b["windowId"] for b in all_bindings(a)] == [window]


def test_reopening_two_bindings_at_once_claims_a_window_once_and_only_a_matching_one(ext_server, profiles, pages):
    """Item 4: two closed bindings of workspaces with the same three pages, reopened at once. One
    window holds all three (it matches both): exactly one binding takes it. Another holds two of
    the three and a page of its own (under 80%): it is taken by neither, so the other binding opens
    its workspace in a new window, and that window's own page is published nowhere."""
    server = ext_server
    a = profiles("A")
    urls = [pages.url("J1"), pages.url("J2"), pages.url("J3")]
    for ws in ("join-1", "join-2"):
        a.new_window(urls)
        a.bind(server.ws_url + "/", ws, "alice")
        wait_for(lambda: len((server.snapshot(ws) or {}).get("ids", [])) == 3, what=f"{ws} adopted")
        wait_for(lambda: any(b["workspace"] == ws and b["attach"] == "" for b in all_bindings(a)), what=f"{ws} attached")
        a.run("await chrome.windows.remove(arguments[0]);", a.window)
        wait_for(lambda: all(b["closed"] for b in all_bindings(a)), what=f"{ws} detached")
    both = a.run("return (await chrome.windows.create({ url: arguments[0], focused: false })).id;", urls)
    partial = a.run("return (await chrome.windows.create({ url: arguments[0], focused: false })).id;",
                    urls[:2] + [pages.url("Own")])
    wait_for(lambda: a.run("return (await chrome.tabs.query({})).every((t) => t.status === 'complete');"), what="pages loaded")
    ids = [b["id"] for b in all_bindings(a)]
    a.run("await Promise.all(arguments[0].map((id) => chrome.runtime.sendMessage({ type: 'reopen', bindingId: id })));", ids)

    def attached():
        bs = all_bindings(a)
        return len(bs) == 2 and all(not b["closed"] and b["attach"] == "" for b in bs) and bs
    bs = wait_for(attached, what="both bindings attached")
    windows = sorted(b["windowId"] for b in bs)
    assert len(set(windows)) == 2, f"two bindings claimed one window: {bs}"
    assert both in windows, "neither binding took the matching window"
    assert partial not in windows, "a window under 80% of the workspace's URLs was taken"
    for ws in ("join-1", "join-2"):
        stays(lambda: len(server.snapshot(ws)["ids"]) == 3, 2, f"{ws} changed")
        assert "Own" not in titles(server, ws)
    assert window_urls(a, partial) == urls[:2] + [pages.url("Own")]


def allow_incognito(profile):
    """Allows the extension in private windows, as the user does on chrome://extensions (the page's
    own developerPrivate API). The extension reloads; the control page opens again."""
    target = profile.cdp("Target.createTarget", url="chrome://extensions")["targetId"]
    session = profile._attach(target)
    wait_for(lambda: profile._evaluate(session, "document.readyState === 'complete' && !!chrome.developerPrivate"),
             what="chrome://extensions loads")
    ext = json.dumps(profile.ext["id"])
    info = f"chrome.developerPrivate.getExtensionInfo({ext})"
    profile._evaluate(session, f"chrome.developerPrivate.updateExtensionConfiguration({{ extensionId: {ext}, incognitoAccess: true }})")
    # The unpacked extension reloads with the new setting and comes back disabled: enabled again,
    # as the user's toggle on the same page does.
    wait_for(lambda: profile._evaluate(session, f"{info}.then((i) => i.incognitoAccess.isActive && i.state === 'DISABLED')"),
             what="the setting applied")
    profile._evaluate(session, f"chrome.management.setEnabled({ext}, true)")
    wait_for(lambda: profile._evaluate(session, f"{info}.then((i) => i.state === 'ENABLED')"), what="the extension enabled again")
    profile.cdp("Target.closeTarget", targetId=target)
    profile.session = None
    profile._open_control(0)
    assert profile.run("return await chrome.extension.isAllowedIncognitoAccess();"), "not allowed in private windows"


def test_a_private_window_binding_is_never_written_to_disk(ext_server, profiles, pages):
    """Item 8: a private window bound (the extension allowed in private windows, the box ticked):
    its binding, its token and its resume record live in storage.session only; storage.local holds
    nothing of it, and neither does the profile's extension storage on disk."""
    server, ws = ext_server, "private-ws-q7z"
    a = profiles("A", cdp=True)
    allow_incognito(a)
    window = a.run("return (await chrome.windows.create({ url: arguments[0], incognito: true, focused: false })).id;",
                   [pages.url("Secret1"), pages.url("Secret2")])
    a.target(window)
    assert "(private)" in a.run("return document.getElementById('window-label').textContent;")
    a.bind(server.ws_url + "/", ws, "alice", incognito=True)
    wait_for(lambda: len(all_bindings(a)) == 1 and all_bindings(a)[0]["incognito"], what="the private binding")
    bid = all_bindings(a)[0]["id"]
    wait_for(lambda: a.run("const k = 'status:' + arguments[0]; return ((await chrome.storage.session.get(k))[k] || {}).status;", bid)
             == "connected", what="connected")
    wait_for(lambda: len((server.snapshot(ws) or {}).get("ids", [])) == 2, what="the private window adopted")
    a.run("await chrome.tabs.create({ windowId: arguments[0], url: arguments[1] });", window, pages.url("Secret3"))
    wait_for(lambda: len(server.snapshot(ws)["ids"]) == 3, what="a tab opened in the private window shared")
    local = json.dumps(a.run("return await chrome.storage.local.get(null);"))
    assert bid not in local and ws not in local and "Secret" not in local, local
    session = a.run("return await chrome.storage.session.get(null);")
    assert bid in session["privateBindings"] and f"resume:{bid}" in session
    folder = os.path.join(a.profile_dir, "Default", "Local Extension Settings", a.ext["id"])
    for root, _, files in os.walk(folder):
        for name in files:
            with open(os.path.join(root, name), "rb") as f:
                data = f.read()
            assert ws.encode() not in data and bid.encode() not in data, f"{name} holds the private binding"


def test_share_sends_a_local_only_tab_again_once_the_cause_is_gone(extension, profiles, pages):
    """Item 1's way back: a tab refused because the workspace was full stays local only; its Share
    in the popup sends it again. While still full it is refused again (and stays open, local only);
    once a tab is removed, Share adds it to the workspace and B opens it."""
    server = TabsyncServer(extension["origin"], "--max-tabs", "3")
    try:
        ws = "share"
        a = bound(profiles("A"), server, ws, "alice", [pages.url("H1"), pages.url("H2"), pages.url("H3")])
        b = profiles("B")
        join(b, server, ws, "bob")
        snap = quiet(server, ws, a, b)
        a.target(a.binding()["windowId"])
        a.open_tab(pages.url("H4"))
        wait_for(lambda: any(t.startswith("H4") for t in popup_local_only(a)), what="H4 local only")
        share = "document.querySelector('#local-list li button.share').click();"
        a.run(share)
        wait_for(lambda: metric(server, 'tabsync_ops_rejected_total{code="LIMIT_EXCEEDED"}') >= 2, what="refused again while full")
        wait_for(lambda: any(t.startswith("H4") for t in popup_local_only(a)), what="H4 still local only")
        assert pages.url("H4") in window_urls(a, a.binding()["windowId"])
        server.cli(ws, "rm", snap["ids"][0])
        wait_for(lambda: len(server.snapshot(ws)["ids"]) == 2, what="H1 removed")
        a.run(share)
        wait_for(lambda: "H4" in titles(server, ws), what="H4 shared")
        wait_for(lambda: popup_local_only(a) == [], what="no tab local only")
        after = quiet(server, ws, a, b)
        assert len(after["ids"]) == 3 and all_urls(b).count(pages.url("H4")) == 1
    finally:
        server.stop()


def test_try_again_with_a_new_token_keeps_local_only_tabs_local(ext_server, profiles, pages, tmp_path):
    """Item 1: a tab kept local only (here: opened while the workspace was read-only) stays local
    when the binding is tried again with a new token (a fresh mirror attaches the same window):
    only its Share publishes it."""
    server, ws = ext_server, "try-again"
    for name in ("G1", "G2"):
        server.cli(ws, "add", "--title", name, "--url", pages.url(name))
    submit(server, ws, {"setEditable": {"editable": False}})
    b = profiles("B")
    join(b, server, ws, "bob")
    quiet(server, ws, b)
    b.open_tab(pages.url("Kept"))
    wait_for(lambda: any(t.startswith("Kept") for t in popup_local_only(b)), what="Kept local only")
    submit(server, ws, {"setEditable": {"editable": True}})
    wait_for(lambda: (b.status() or {}).get("editable") is True, what="editable again")
    key = tmp_path / "other.key"
    key.write_text("other-key-" * 4 + "\n")
    reply = b.run("return await chrome.runtime.sendMessage({ type: 'reopen', bindingId: arguments[0], token: arguments[1] });",
                  b.binding()["id"], mint(key, ws, "editor", "bob"))
    assert not reply.get("error"), reply
    wait_for(lambda: b.binding()["attach"] == "" and (b.status() or {}).get("status") == "connected", what="attached again")
    stays(lambda: "Kept" not in titles(server, ws), 3, "a local-only tab was published by Try again")
    wait_for(lambda: any(t.startswith("Kept") for t in popup_local_only(b)), what="Kept still listed local only")
    b.run("document.querySelector('#local-list li button.share').click();")
    wait_for(lambda: "Kept" in titles(server, ws), what="Kept shared")


def test_try_again_keeps_the_window_of_a_one_tab_workspace_and_its_local_only_tab(extension, profiles, pages, tmp_path):
    """Item 1 and row 1, on a workspace of one tab (seed 10662 of scripts/extension-chaos, its
    view-only phase): the server restarted with an access key refuses B's binding (stopped); Try
    again with a viewer's token makes B a read-only mirror of *its* window, where a tab B opens stays
    local only; the server restarted without the key, Try again with an editor's token keeps that
    window too, the tab still local only, and Share publishes it. Before the fix, Try again matched
    the window again as after a browser restart (at least 2 tabs by id or URL): a workspace of one
    tab matched no window, so each Try again opened the workspace in a new window (its tab twice)
    and left the local-only tab behind in a window no binding listed."""
    key = tmp_path / "phase.key"
    key.write_text("phase-key-" * 4 + "\n")
    server = TabsyncServer(extension["origin"])
    try:
        ws = "one-tab"
        server.cli(ws, "add", "--title", "Only", "--url", pages.url("Only"))
        b = profiles("B")
        join(b, server, ws, "bob")
        quiet(server, ws, b)
        window = b.binding()["windowId"]
        windows = len(b.run("return await chrome.windows.getAll();"))

        def try_again(token):
            reply = b.run("return await chrome.runtime.sendMessage({ type: 'reopen', bindingId: arguments[0], token: arguments[1] });",
                          b.binding()["id"], token)
            assert not reply.get("error"), reply
            wait_for(lambda: b.binding()["attach"] == "" and not b.binding()["stopped"]
                     and (b.status() or {}).get("status") == "connected", what="attached again")
            assert b.binding()["windowId"] == window, "Try again left the bound window for a new one"
            assert len(b.run("return await chrome.windows.getAll();")) == windows, "Try again opened a window"

        server.kill()
        server.extra += ["--auth-key-file", str(key)]
        server.start()
        wait_for(lambda: "refused the token" in ((b.status() or {}).get("stopped") or ""), what="B stopped by the refusal")
        try_again(mint(key, ws, "viewer", "bob"))
        wait_for(lambda: (b.status() or {}).get("viewOnly") == "viewer", what="B a read-only mirror")
        b.open_tab(pages.url("Mine"), active=False)
        wait_for(lambda: any(t.startswith("Mine") for t in popup_local_only(b)), what="Mine local only")
        editor = mint(key, ws, "editor", "bob")
        server.kill()
        server.extra = server.extra[:-2]
        server.start()
        wait_for(lambda: (b.status() or {}).get("status") == "connected", what="B back")
        try_again(editor)
        stays(lambda: "Mine" not in titles(server, ws), 3, "a local-only tab was published by Try again")
        assert any(t.startswith("Mine") for t in popup_local_only(b)), "Mine no longer listed local only"
        b.run("document.querySelector('#local-list li button.share').click();")
        wait_for(lambda: "Mine" in titles(server, ws), what="Mine shared")
        wait_for(lambda: popup_local_only(b) == [], what="no tab local only")
        quiet(server, ws, b)
        assert all_urls(b).count(pages.url("Only")) == 1 and all_urls(b).count(pages.url("Mine")) == 1
        assert window_urls(b, window) == [pages.url("Only"), pages.url("Mine")]
    finally:
        server.stop()


# ------------------------------------------------------------------------------------- history


def test_a_remote_restore_closes_only_the_tabs_it_drops_and_opens_the_others(ext_server, profiles, pages):
    """A `restore` from another client is applied as a `replace` is: the real tab of each id it
    drops closes (that tab only: the others keep their Chrome tabs), each id it brings back opens
    once, and the window takes its order. Undoing it with a later restore does the reverse."""
    server, ws = ext_server, "restore"
    a = bound(profiles("A"), server, ws, "alice", [pages.url("S1"), pages.url("S2"), pages.url("S3"), pages.url("S4")])
    before = quiet(server, ws, a)
    s1, s2, s3, s4 = before["ids"]
    submit(server, ws, {"remove": {"tabId": s2}})
    submit(server, ws, {"add": {"tab": {"id": "py-s5", "title": "S5", "url": pages.url("S5")}}})
    middle = quiet(server, ws, a, what="S2 closed and S5 opened")
    assert middle["ids"] == [s1, s3, s4, "py-s5"]
    kept = {i: a.tab_of(i) for i in (s1, s3, s4)}
    s5_tab = a.tab_of("py-s5")
    applied = submit(server, ws, {"restore": {"version": str(before["version"])}})
    assert "restore" in applied["op"], applied
    after = quiet(server, ws, a, what="the restore applied in the window")
    assert after["ids"] == [s1, s2, s3, s4]
    assert {i: a.tab_of(i) for i in (s1, s3, s4)} == kept, "a tab the restore kept was closed and opened again"
    urls = window_urls(a, a.binding()["windowId"])
    assert urls.count(pages.url("S2")) == 1 and pages.url("S5") not in urls
    assert s5_tab not in a.strip()["chromeIds"]
    stays(lambda: len(window_urls(a, a.binding()["windowId"])) == 4 and server.snapshot(ws)["ids"] == [s1, s2, s3, s4], 3,
          "the window or the workspace changed after the restore settled")
    # Undone: S2 closes again, S5 comes back once.
    s2_tab = a.tab_of(s2)
    submit(server, ws, {"restore": {"version": str(middle["version"])}})
    undone = quiet(server, ws, a, what="the undo applied in the window")
    assert undone["ids"] == [s1, s3, s4, "py-s5"]
    assert {i: a.tab_of(i) for i in (s1, s3, s4)} == kept and s2_tab not in a.strip()["chromeIds"]
    urls = window_urls(a, a.binding()["windowId"])
    assert urls.count(pages.url("S5")) == 1 and pages.url("S2") not in urls
