"""History in the extension's popup: Recently closed (a HistoryQuery `closed` over the binding's
session) and its Reopen button, against a real tabsync-server in headless Chromium.

Reopen sends a `reopen` op; the server turns it into an `add` of the tab's old id, which the window
opens through its ordinary remote-add path: the tab comes back once, under its id, never published
again as a new tab. A refusal shows the server's message in the popup; a view-only binding lists
the closed tabs without Reopen buttons.
"""
import json
import os

from conftest import TabsyncServer, submit, submit_all, wait_for
from test_extension import bound, quiet
from test_safety import mint, stays, window_urls


def closed_list(profile):
    """The popup's Recently closed entries: [{id, text, reopen}] (reopen: has a Reopen button)."""
    return profile.run("""return document.getElementById('recently-closed').hidden ? null
        : [...document.querySelectorAll('#closed-list li')].map((li) => ({ id: li.dataset.tabId || null,
            text: li.textContent, reopen: !!li.querySelector('button') }));""")


def click_reopen(profile, ws_id):
    profile.run("""document.querySelector(`#closed-list li[data-tab-id="${arguments[0]}"] button`).click();""", ws_id)


def popup_error(profile):
    return profile.run("const e = document.getElementById('error'); return e.hidden ? '' : e.textContent;")


def popup_why(profile):
    return profile.run("const e = document.getElementById('why'); return e.hidden ? '' : e.textContent;")


def test_reopen_from_the_popup_brings_the_tab_back_once_and_a_refusal_shows_the_servers_message(extension, profiles, pages):
    server = TabsyncServer(extension["origin"], "--max-tabs", "4")
    try:
        ws = "reopen"
        a = bound(profiles("A"), server, ws, "alice",
                  [pages.url("Inbox"), pages.url("Design doc"), pages.url("Build log"), pages.url("Calendar")])
        snap = quiet(server, ws, a)
        inbox, doc, log, cal = snap["ids"]
        window = a.binding()["windowId"]
        a.close(doc)
        quiet(server, ws, a, what="Design doc closed")
        a.close(log)
        quiet(server, ws, a, what="Build log closed")
        # Newest first, with who closed it and when.
        wait_for(lambda: [e["id"] for e in (closed_list(a) or [])] == [log, doc], what="both listed as recently closed")
        entries = closed_list(a)
        assert all(e["reopen"] for e in entries)
        assert "Design doc" in entries[1]["text"] and pages.url("Design doc") in entries[1]["text"]
        assert "closed by alice" in entries[1]["text"] and "just now" in entries[1]["text"]
        path = a.screenshot("popup-recently-closed")
        assert os.path.getsize(path) > 0

        # Reopen: the tab comes back once, between its old neighbours, active, mapped to its old id.
        click_reopen(a, doc)
        after = quiet(server, ws, a, what="Design doc reopened")
        assert after["ids"] == [inbox, doc, cal] and after["active"] == doc
        assert window_urls(a, window).count(pages.url("Design doc")) == 1
        assert a.strip()["ids"] == [inbox, doc, cal]
        stays(lambda: window_urls(a, window).count(pages.url("Design doc")) == 1 and server.snapshot(ws)["ids"] == [inbox, doc, cal],
              3, "the reopened tab was opened or published twice")
        wait_for(lambda: [e["id"] for e in (closed_list(a) or [])] == [log], what="the list drops the reopened tab")
        assert popup_error(a) == ""

        # A refusal: the workspace is full (4 tabs, --max-tabs 4), so the server refuses the reopen;
        # the popup shows its message and nothing opens.
        submit(server, ws, {"add": {"tab": {"id": "py-fill", "title": "Filler", "url": pages.url("Filler")}}})
        quiet(server, ws, a, what="the filler opened")
        wait_for(lambda: [e["id"] for e in (closed_list(a) or [])] == [log], what="the list after the filler")
        click_reopen(a, log)
        message = wait_for(lambda: popup_why(a), what="the popup shows the refusal")
        assert message.startswith("“Build log” could not be reopened:") and "LIMIT_EXCEEDED" in message, message
        assert popup_error(a) == ""  # said once
        stays(lambda: pages.url("Build log") not in window_urls(a, window) and len(server.snapshot(ws)["ids"]) == 4, 3,
              "the refused reopen opened a tab")
        assert [e["id"] for e in closed_list(a)] == [log] and closed_list(a)[0]["reopen"]
        a.screenshot("popup-reopen-refused")
    finally:
        server.stop()




def test_a_view_only_binding_lists_recently_closed_tabs_without_reopen(extension, profiles, pages, tmp_path):
    key = tmp_path / "team.key"
    key.write_text("s3cret-" * 8 + "\n")
    server = TabsyncServer(extension["origin"], "--auth-key-file", str(key))
    try:
        ws = "viewclosed"
        submit_all(server, ws, [{"add": {"tab": {"id": f"t-{n}", "title": n, "url": pages.url(n)}}} for n in ("V1", "V2", "V3")]
                   + [{"remove": {"tabId": "t-V2"}}], token=mint(key, ws, "editor", "carol"))
        a = profiles("A")
        first = a.new_window(["about:blank"])
        a.bind(server.ws_url + "/", ws, "bob", token=mint(key, ws, "viewer", "bob"))
        wait_for(lambda: (a.binding() or {}).get("windowId") not in (None, first), what="the read-only mirror's own window")
        a.target(a.binding()["windowId"])
        wait_for(lambda: [e["id"] for e in (closed_list(a) or [])] == ["t-V2"], what="V2 listed as recently closed")
        entry = closed_list(a)[0]
        assert not entry["reopen"] and "closed by carol" in entry["text"] and "V2" in entry["text"]
        a.screenshot("popup-recently-closed-view-only")
    finally:
        server.stop()
