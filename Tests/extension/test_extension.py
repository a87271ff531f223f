"""The browser extension against a real tabsync-server, in two headless Chromium profiles.

After each step — a tab opened, closed, dragged, activated or retitled on either side, a CLI edit,
a viewer joining — the test waits for quiet and checks that the server's snapshot equals each
window's tab strip: the same ids, in the same order, with the same active tab.
"""
import json
import os
import time
import zipfile

import pytest

from conftest import TabsyncServer, converged, submit, wait_for, write_artifact


def bound(profile, server, ws, name, urls, mode="follow"):
    """A window of `urls` in `profile`, bound to `ws` through the popup; waits until connected."""
    profile.new_window(urls)
    profile.bind(server.ws_url + "/", ws, name, mode)
    wait_for(lambda: (profile.status() or {}).get("status") == "connected", what=f"{profile.name} connected")
    return profile


def join(profile, server, ws, name, mode="follow"):
    """Binds a window with one page of its own to a workspace that has tabs: it opens in a new window."""
    first = profile.new_window(["about:blank"])
    profile.bind(server.ws_url + "/", ws, name, mode)
    wait_for(lambda: (profile.binding() or {}).get("windowId") not in (None, first), what=f"{profile.name} new window")
    profile.target(profile.binding()["windowId"])
    return first


def titles(server, ws):
    return [t.get("title", "") for t in server.snapshot(ws)["tabs"]]


def quiet(server, ws, *profiles, follow=True, what="converged"):
    try:
        return wait_for(lambda: converged(server, ws, *profiles, follow=follow), what=what)
    except AssertionError as error:
        details = [f"server: {server.snapshot(ws)}"] + [f"{p.name}: {p.strip()}" for p in profiles]
        raise AssertionError(f"{error}\n" + "\n".join(details)) from None


def test_two_profiles_and_the_cli_mirror_one_workspace(ext_server, profiles, pages, browser_page):
    server, ws = ext_server, "team"
    started = time.monotonic()
    a = bound(profiles("A"), server, ws, "alice", [pages.url("Docs"), pages.url("Dash"), pages.url("Wiki")])
    snap = quiet(server, ws, a, what="A's window adopted into the empty workspace")
    assert len(snap["ids"]) == 3 and [t["title"] for t in snap["tabs"]] == ["Docs", "Dash", "Wiki"]
    assert all(t.get("url", "").startswith(pages.base) for t in snap["tabs"])

    b = profiles("B")
    b_first = join(b, server, ws, "bob")
    quiet(server, ws, a, b, what="B joined in a window of its own")
    assert b_first not in [b.strip()["window"]]  # the window with its own tab was not merged into

    # A opens a tab.
    a.open_tab(pages.url("Issues"))
    wait_for(lambda: titles(server, ws)[-1:] == ["Issues"], what="A's new tab, titled once loaded")
    snap = quiet(server, ws, a, b, what="A's new tab")
    assert len(snap["ids"]) == 4
    # B closes a tab.
    b.close(snap["ids"][1])
    snap = quiet(server, ws, a, b, what="B's close")
    assert len(snap["ids"]) == 3 and "Dash" not in [t["title"] for t in snap["tabs"]]
    # A drags the last tab to the front.
    last = snap["ids"][-1]
    a.move(last, 0)
    snap = quiet(server, ws, a, b, what="A's drag")
    assert snap["ids"][0] == last
    # B activates the third tab: A follows.
    b.activate(snap["ids"][2])
    snap = quiet(server, ws, a, b, what="B's activation")
    assert snap["active"] == snap["ids"][2]
    # A's page retitles itself: the workspace takes it; B's real tab keeps its own page's title.
    target = snap["ids"][1]
    a.activate(target)
    quiet(server, ws, a, b)
    a.retitle(target, "Docs (edited in A)")
    wait_for(lambda: any(t.get("title") == "Docs (edited in A)" for t in server.snapshot(ws)["tabs"]), what="A's retitle")
    snap = quiet(server, ws, a, b)
    assert "Docs (edited in A)" not in b.strip()["titles"]
    # B's page retitles itself.
    b.retitle(snap["ids"][2], "Wiki (edited in B)")
    wait_for(lambda: any(t.get("title") == "Wiki (edited in B)" for t in server.snapshot(ws)["tabs"]), what="B's retitle")
    snap = quiet(server, ws, a, b)
    # The CLI adds, moves and removes.
    cli_id = server.cli(ws, "add", "--title", "From the CLI", "--at", "2")
    snap = quiet(server, ws, a, b, what="CLI add")
    assert snap["ids"][1] == cli_id
    server.cli(ws, "mv", cli_id, "4")
    snap = quiet(server, ws, a, b, what="CLI move")
    assert snap["ids"][3] == cli_id
    server.cli(ws, "rm", snap["ids"][0])
    snap = quiet(server, ws, a, b, what="CLI remove")
    assert cli_id in snap["ids"] and len(snap["ids"]) == 3
    # A viewer with no token (the server's own page) joins: presence shows it in A's popup.
    viewer = browser_page(f"{server.http_url}/w/{ws}?name=viewer")
    a.target(a.binding()["windowId"])
    try:
        wait_for(lambda: any(p.startswith("viewer") for p in a.popup()["peers"]), what="the viewer in A's popup")
    except AssertionError:
        raise AssertionError(f"{a.popup()['peers']} {a.status()['peers']} {a.driver.get_log('browser')}")
    wait_for(lambda: any(p.startswith("bob") for p in a.popup()["peers"]), what="bob in A's popup")
    snap = quiet(server, ws, a, b, what="after the viewer joined")
    assert viewer is not None

    wall = time.monotonic() - started
    memory = {p.name: p.memory_kib() for p in (a, b)}
    write_artifact("scenario.json", {"wall_seconds": round(wall, 1), "browser_pss_kib": memory,
                                     "final": snap["ids"]})
    print(f"scenario: {wall:.1f} s wall; browser PSS: " + ", ".join(f"{k} {v / 1024:.0f} MiB" for k, v in memory.items()))
    a.screenshot("popup-a")
    b.target(b.binding()["windowId"])
    b.screenshot("popup-b")


def test_the_server_killed_and_restarted_midway_loses_and_doubles_nothing(ext_server, profiles, pages):
    server, ws = ext_server, "restart"
    a = bound(profiles("A"), server, ws, "alice", [pages.url("One"), pages.url("Two"), pages.url("Three")])
    b = profiles("B")
    join(b, server, ws, "bob")
    snap = quiet(server, ws, a, b)
    server.kill()
    wait_for(lambda: a.strip()["status"] != "connected" and b.strip()["status"] != "connected", what="both see the server gone")
    # While it is down: A opens a tab and drags it to the front; B closes "Two".
    a.open_tab(pages.url("Four"))
    wait_for(lambda: a.strip()["pending"] >= 1, what="A's open pending")
    four = a.strip()["ids"][-1]
    a.move(four, 0)
    b.close(snap["ids"][1])
    wait_for(lambda: b.strip()["pending"] >= 1, what="B's close pending")
    server.start()
    snap = quiet(server, ws, a, b, what="both resumed after the restart")
    titles = [t["title"] for t in snap["tabs"]]
    assert titles == ["Four", "One", "Three"], titles
    assert len(set(snap["ids"])) == len(snap["ids"])


def test_a_locked_close_is_rolled_back_and_the_popup_says_why(ext_server, profiles, pages):
    server, ws = ext_server, "locked"
    a = bound(profiles("A"), server, ws, "alice", [pages.url("Keep"), pages.url("Pinned docs")])
    snap = quiet(server, ws, a)
    locked = snap["ids"][1]
    submit(server, ws, {"update": {"tabId": locked, "locked": True}})
    wait_for(lambda: any(t.get("locked") for t in server.snapshot(ws)["tabs"]), what="locked")
    quiet(server, ws, a)
    a.close(locked)
    wait_for(lambda: "locked" in a.popup()["why"], what="the popup says why")
    snap = quiet(server, ws, a, what="the closed tab reopened")
    assert locked in snap["ids"] and a.strip()["ids"] == snap["ids"]
    assert "Pinned docs" in a.popup()["why"]


def test_five_retitles_make_at_most_a_debounce_of_updates_and_no_ping_pong(ext_server, profiles, pages):
    server, ws = ext_server, "titles"
    a = bound(profiles("A"), server, ws, "alice", [pages.url("Page")])
    b = profiles("B")
    join(b, server, ws, "bob")
    snap = quiet(server, ws, a, b)
    tab = snap["ids"][0]
    before = snap["version"]
    for i in range(5):
        a.retitle(tab, f"Title {i}")
    wait_for(lambda: server.snapshot(ws)["tabs"][0].get("title") == "Title 4", what="the last title")
    snap = quiet(server, ws, a, b)
    assert snap["version"] - before <= 2, f"{snap['version'] - before} updates for 5 retitles"
    # Quiet stays quiet: B does not write the title back, A does not answer.
    settled = snap["version"]
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline:
        assert server.snapshot(ws)["version"] == settled, "ping-pong: the version moves with nobody editing"
        time.sleep(0.2)
    assert "Title 4" not in b.strip()["titles"]


def test_a_hostile_title_stays_inert_in_the_popup(ext_server, profiles, pages):
    server, ws = ext_server, "hostile"
    a = bound(profiles("A"), server, ws, "alice", [pages.url("Plain")])
    b = profiles("B")
    join(b, server, ws, "bob")
    snap = quiet(server, ws, a, b)
    hostile = '<img src=x onerror="window.__pwned=1"><b>bold</b>\u0007\u001b[31m'
    a.retitle(snap["ids"][0], hostile)
    wait_for(lambda: "<img" in server.snapshot(ws)["tabs"][0].get("title", ""), what="the hostile title stored")
    title = server.snapshot(ws)["tabs"][0]["title"]
    assert "\u0007" not in title and "\u001b" not in title
    b.target(b.binding()["windowId"])
    wait_for(lambda: any("<img" in t for t in b.popup()["tabs"]), what="B's popup shows it as text")
    d = b.driver
    assert d.execute_script("return document.querySelectorAll('#tabs img, #tabs b').length") == 0
    assert d.execute_script("return window.__pwned === undefined")
    b.screenshot("popup-hostile-title")


def test_a_refused_token_shows_in_the_popup_without_retrying(extension, profiles, pages, tmp_path):
    key = tmp_path / "team.key"
    key.write_text("s3cret-" * 8 + "\n")
    server = TabsyncServer(extension["origin"], "--auth-key-file", str(key))
    try:
        a = profiles("A")
        a.new_window([pages.url("Mine")])
        a.bind(server.ws_url + "/", "secret", "mallory", token="not-a-jwt")
        wait_for(lambda: "refused the token" in a.popup()["why"], what="the popup says the token was refused")
        assert a.popup()["status"] == "stopped"

        def refused():
            status, _, body = server.get("/metrics")
            lines = [l for l in body.decode().splitlines() if l.startswith("tabsync_") and "unauthorized" in l.lower()]
            return lines
        first = refused()
        # No retry storm: nothing more reaches the server while the binding stays stopped.
        hellos = server.get("/metrics")[2].decode().count("\n")
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline:
            assert a.popup()["status"] == "stopped"
            time.sleep(0.25)
        assert refused() == first, (first, refused())
        assert hellos > 0
        a.screenshot("popup-refused-token")
    finally:
        server.stop()


def test_joining_many_tabs_opens_them_lazily(ext_server, profiles, pages):
    server, ws = ext_server, "many"
    for i in range(14):
        server.cli(ws, "add", "--title", f"Tab {i}", "--url", pages.url(f"Tab {i}"))
    b = profiles("B")
    join(b, server, ws, "bob")
    snap = quiet(server, ws, b, what="14 tabs opened")
    st = b.strip()
    lazy = [u for u in st["urls"] if u.startswith(b.base + "/placeholder.html")]
    assert len(lazy) >= 14 - 8 - 1, st["urls"]
    # Activating a placeholder loads its page.
    last = snap["ids"][-1]
    b.activate(last)
    wait_for(lambda: b.strip()["urls"][b.strip()["ids"].index(last)] == pages.url("Tab 13"), what="the placeholder loads")
    snap = quiet(server, ws, b)
    assert snap["active"] == last


def test_package_extension_makes_a_loadable_zip(extension):
    with zipfile.ZipFile(extension["zip"]) as z:
        names = set(z.namelist())
        manifest = json.loads(z.read("manifest.json"))
    assert {"manifest.json", "background.js", "popup.html", "popup.js", "tabsync-client.js",
            "fractional-indexing.js", "mirror.js", "placeholder.html", "placeholder.js"} <= names
    assert manifest["manifest_version"] == 3 and manifest["background"]["type"] == "module"
    assert extension["origin"] == f"chrome-extension://{extension['id']}"
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(os.path.join(root, "web", "tabsync-client.js"), "rb") as f:
        with zipfile.ZipFile(extension["zip"]) as z:
            assert z.read("tabsync-client.js") == f.read()
